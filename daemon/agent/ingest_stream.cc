#include "daemon/agent/ingest_stream.h"

#include <algorithm>
#include <thread>
#include <utility>
#include <vector>

#include "accelmon/v1/ingest.grpc.pb.h"

namespace accelmon {

// A few completion queues, each drained by one thread; a stream is given one in turn, so a
// loadgen's thousands of streams spread over them and an agent's one stream costs one thread.
// Shared by every stream alive: made with the first, shut down and joined with the last.
class IngestStream::CompletionThreads {
 public:
  static std::shared_ptr<CompletionThreads> Acquire() {
    static std::mutex mu;
    static std::weak_ptr<CompletionThreads> shared;
    std::lock_guard lock(mu);
    std::shared_ptr<CompletionThreads> threads = shared.lock();
    if (!threads) {
      threads = std::make_shared<CompletionThreads>();
      shared = threads;
    }
    return threads;
  }

  CompletionThreads() {
    // A quarter of the cores: enough for a loadgen at saturation, one on a small host.
    const size_t count = std::clamp<size_t>(std::thread::hardware_concurrency() / 4, 1, 8);
    queues_.resize(count);
  }

  // Stops the threads once their queues are drained; every stream is over by then.
  ~CompletionThreads() {
    for (auto& queue : queues_) {
      if (queue) queue->completion.Shutdown();
    }
    for (auto& queue : queues_) {
      if (queue) queue->thread.join();
    }
  }

  CompletionThreads(const CompletionThreads&) = delete;
  CompletionThreads& operator=(const CompletionThreads&) = delete;

  // The next queue in turn, its thread started on first use.
  grpc::CompletionQueue* Next() {
    std::lock_guard lock(mu_);
    std::unique_ptr<Queue>& queue = queues_[next_++ % queues_.size()];
    if (!queue) {
      queue = std::make_unique<Queue>();
      grpc::CompletionQueue* completion = &queue->completion;
      queue->thread = std::thread([completion] { Drain(*completion); });
    }
    return &queue->completion;
  }

 private:
  struct Queue {
    grpc::CompletionQueue completion;
    std::thread thread;
  };

  static void Drain(grpc::CompletionQueue& completion) {
    void* tag = nullptr;
    bool ok = false;
    while (completion.Next(&tag, &ok)) {
      const Tag* finished = static_cast<const Tag*>(tag);
      finished->stream->OnCompleted(finished->operation, ok);
    }
  }

  std::mutex mu_;
  std::vector<std::unique_ptr<Queue>> queues_;
  size_t next_ = 0;
};

IngestStream::IngestStream(grpc::GenericStub& stub, IngestStreamObserver* observer, Options options)
    : observer_(observer), options_(options), threads_(CompletionThreads::Acquire()) {
  call_ = stub.PrepareCall(&context_, kMethod, threads_->Next());
  // The start is the first write (it sends the call's headers): `writing_` holds the next back
  // until its tag comes.
  call_->StartCall(&write_tag_);
  call_->Read(&ack_bytes_, &read_tag_);
}

IngestStream::~IngestStream() {
  bool ending = false;
  {
    std::lock_guard lock(mu_);
    ending = closing_ || cancelled_;
  }
  if (!ending) Cancel();  // left open (an exception on the owner's way out): no wait on the server
  Wait();
}

IngestStream::SendResult IngestStream::TrySend(const v1::NodeReport& report) {
  Pending pending{.sequence = report.sequence(), .numbered = false, .bytes = {}};
  bool own = false;
  if (!grpc::SerializationTraits<v1::NodeReport>::Serialize(report, &pending.bytes, &own).ok()) {
    return SendResult::kOver;  // not a report protobuf can write; never the case
  }
  std::unique_lock lock(mu_);
  return TakeLocked(lock, std::move(pending));
}

IngestStream::SendResult IngestStream::TrySend(grpc::ByteBuffer bytes, uint64_t sequence) {
  std::unique_lock lock(mu_);
  return TakeLocked(lock,
                    Pending{.sequence = sequence, .numbered = false, .bytes = std::move(bytes)});
}

IngestStream::SendResult IngestStream::TrySendNumbered() {
  std::unique_lock lock(mu_);
  return TakeLocked(lock, Pending{.sequence = counts_.sent + 1, .numbered = true, .bytes = {}});
}

bool IngestStream::Send(const v1::NodeReport& report) {
  Pending pending{.sequence = report.sequence(), .numbered = false, .bytes = {}};
  bool own = false;
  if (!grpc::SerializationTraits<v1::NodeReport>::Serialize(report, &pending.bytes, &own).ok()) {
    return false;
  }
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return OverLocked() || in_flight_.size() < options_.max_unacknowledged; });
  return TakeLocked(lock, std::move(pending)) == SendResult::kQueued;
}

IngestStream::SendResult IngestStream::TakeLocked(std::unique_lock<std::mutex>& lock,
                                                  Pending pending) {
  if (OverLocked()) return SendResult::kOver;
  if (in_flight_.size() >= options_.max_unacknowledged) return SendResult::kFull;
  in_flight_.push_back(
      IngestSent{.sequence = pending.sequence, .sent_at = std::chrono::steady_clock::now()});
  ++counts_.sent;
  queue_.push_back(std::move(pending));
  PumpLocked(lock);
  return SendResult::kQueued;
}

void IngestStream::Close() {
  std::unique_lock lock(mu_);
  closing_ = true;
  PumpLocked(lock);
  cv_.notify_all();
}

void IngestStream::Cancel() {
  context_.TryCancel();
  std::unique_lock lock(mu_);
  cancelled_ = true;
  queue_.clear();
  PumpLocked(lock);
  cv_.notify_all();
}

grpc::Status IngestStream::Wait() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return done_; });
  return status_;
}

bool IngestStream::over() const {
  std::lock_guard lock(mu_);
  return OverLocked();
}

size_t IngestStream::unwritten() const {
  std::lock_guard lock(mu_);
  return queue_.size() + (writing_report_ ? 1 : 0);
}

size_t IngestStream::unacknowledged() const {
  std::lock_guard lock(mu_);
  return in_flight_.size();
}

IngestAckCounts IngestStream::counts() const {
  std::lock_guard lock(mu_);
  return counts_;
}

bool IngestStream::OverLocked() const {
  return closing_ || cancelled_ || write_failed_ || reads_done_ || done_;
}

void IngestStream::PumpLocked(std::unique_lock<std::mutex>& lock) {
  if (writing_ || finishing_) return;
  const bool writable = !write_failed_ && !cancelled_ && !reads_done_;
  if (writable && !queue_.empty()) {
    Pending next = std::move(queue_.front());
    queue_.pop_front();
    writing_ = true;  // this thread alone starts the write; OnWriteDone pumps again
    writing_report_ = true;
    lock.unlock();
    writing_bytes_ = next.numbered && observer_ != nullptr ? observer_->EncodeAtWrite(next.sequence)
                                                           : std::move(next.bytes);
    call_->Write(writing_bytes_, &write_tag_);
    lock.lock();
    return;
  }
  // Nothing more to write: half-close when asked; the exporter ends the call after its last ack.
  if (writable && closing_ && !half_closed_) {
    half_closed_ = true;
    writing_ = true;
    lock.unlock();
    call_->WritesDone(&write_tag_);
    lock.lock();
    return;
  }
  // gRPC takes the status only once the reads are over (a read under way would receive the
  // headers twice) and no write is: the last operation of the call.
  if (!reads_done_) return;
  finishing_ = true;
  lock.unlock();
  call_->Finish(&finish_status_, &finish_tag_);
  lock.lock();
}

void IngestStream::OnCompleted(Operation operation, bool ok) {
  switch (operation) {
    case Operation::kWrite:
      OnWriteDone(ok);
      break;
    case Operation::kRead:
      OnReadDone(ok);
      break;
    case Operation::kFinish:
      OnFinished();
      break;
  }
}

void IngestStream::OnWriteDone(bool ok) {
  {
    std::unique_lock lock(mu_);
    writing_ = false;
    writing_report_ = false;
    if (!ok) {
      write_failed_ = true;  // the stream broke; the finish brings the status
      queue_.clear();
    }
    PumpLocked(lock);
    cv_.notify_all();
  }
  if (observer_ != nullptr) observer_->OnWritable();
}

void IngestStream::OnReadDone(bool ok) {
  if (!ok) {
    // The exporter ended the stream (or it broke): nothing more will be written.
    {
      std::unique_lock lock(mu_);
      reads_done_ = true;
      queue_.clear();
      PumpLocked(lock);
      cv_.notify_all();
    }
    if (observer_ != nullptr) observer_->OnWritable();
    return;
  }
  v1::Ack ack;
  if (!grpc::SerializationTraits<v1::Ack>::Deserialize(&ack_bytes_, &ack).ok()) {
    ack.set_status(v1::Ack::STATUS_REJECTED);
    ack.set_reason("unparseable_ack");
  }
  IngestSent report;
  {
    std::lock_guard lock(mu_);
    switch (ack.status()) {
      case v1::Ack::STATUS_APPLIED:
        ++counts_.applied;
        break;
      case v1::Ack::STATUS_DUPLICATE:
        ++counts_.duplicate;
        break;
      default:
        ++counts_.rejected;
        ++counts_.rejected_reasons[ack.reason().empty() ? "unknown" : ack.reason()];
        break;
    }
    if (!in_flight_.empty()) {
      report = in_flight_.front();
      in_flight_.pop_front();
    } else {
      report.sequence = ack.sequence();  // an answer to nothing sent: the exporter's word
    }
    cv_.notify_all();
  }
  if (observer_ != nullptr) {
    observer_->OnAck(ack, report);
    observer_->OnWritable();
  }
  call_->Read(&ack_bytes_, &read_tag_);
}

void IngestStream::OnFinished() {
  // Every other operation has come back: writes and reads are over before the status is asked.
  grpc::Status status = finish_status_;
  {
    std::lock_guard lock(mu_);
    status_ = status;
  }
  if (observer_ != nullptr) observer_->OnDone(status);
  // The last touch: the owner may destroy the stream once Wait() sees this.
  std::lock_guard lock(mu_);
  done_ = true;
  cv_.notify_all();
}

}  // namespace accelmon
