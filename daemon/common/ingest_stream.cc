#include "daemon/common/ingest_stream.h"

#include <utility>

#include "accelmon/v1/ingest.grpc.pb.h"

namespace accelmon {

IngestStream::IngestStream(grpc::GenericStub& stub, IngestStreamObserver* observer, Options options)
    : observer_(observer), options_(options) {
  stub.PrepareBidiStreamingCall(&context_, kMethod, grpc::StubOptions(), this);
  // Writes are started from the owner's thread, outside the reactions: the hold keeps OnDone
  // (after which no operation may start) back until the owner is done writing.
  AddHold();
  StartRead(&ack_bytes_);
  StartCall();
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
  return queue_.size() + (writing_ ? 1 : 0);
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
  if (writing_ || !held_) return;
  if (!write_failed_ && !cancelled_ && !reads_done_ && !queue_.empty()) {
    Pending next = std::move(queue_.front());
    queue_.pop_front();
    writing_ = true;  // this thread alone starts the write; OnWriteDone pumps again
    lock.unlock();
    writing_bytes_ = next.numbered && observer_ != nullptr ? observer_->EncodeAtWrite(next.sequence)
                                                           : std::move(next.bytes);
    StartWrite(&writing_bytes_);
    lock.lock();
    return;
  }
  // Nothing more to write: half-close when asked, and let the call end once it can write no more.
  if (!(closing_ || cancelled_ || write_failed_ || reads_done_)) return;
  held_ = false;  // this thread alone makes the last calls
  const bool half_close = closing_ && !cancelled_ && !write_failed_ && !reads_done_;
  lock.unlock();
  if (half_close) StartWritesDone();
  RemoveHold();
  lock.lock();
}

void IngestStream::OnWriteDone(bool ok) {
  {
    std::unique_lock lock(mu_);
    writing_ = false;
    if (!ok) {
      write_failed_ = true;  // the stream broke; OnDone brings the status
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
  StartRead(&ack_bytes_);
}

void IngestStream::OnDone(const grpc::Status& status) {
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
