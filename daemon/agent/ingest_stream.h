// One client stream of Ingest.Stream (proto/accelmon/v1/ingest.proto), as every sender holds it:
// the agent's uplink, replay and loadgen. Reports are written one at a time in the order they
// were sent; acks are read as they come and matched to the oldest unacknowledged report (the
// exporter answers in order); the acks' verdicts are counted. The owner sends from its own thread
// and never blocks on the network (Send() may wait for the window only); the stream tells its
// observer, on a completion thread, of every ack, of room to write, and of the call's end.
// Send, Close, Cancel and the destructor belong to one owner thread (and the observer's calls).
//
// The call runs on gRPC's asynchronous API over completion queues this file owns, each drained by
// one thread blocked in Next() without a deadline, rather than on the callback API: gRPC 1.51's
// callback API polls its queue from two threads that wake every second and sleep 100 ms after
// each wake, which cost an idle agent 0.39 millicores (bench/README.md, goal 4). The threads
// start with the first stream and stop with the last.
#pragma once

#include <grpcpp/client_context.h>
#include <grpcpp/completion_queue.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/support/byte_buffer.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "accelmon/v1/ingest.pb.h"
#include "accelmon/v1/telemetry.pb.h"

namespace accelmon {

// A stream's acks by verdict.
struct IngestAckCounts {
  uint64_t sent = 0;  // reports the stream took
  uint64_t applied = 0;
  uint64_t duplicate = 0;
  uint64_t rejected = 0;
  std::map<std::string, uint64_t> rejected_reasons;  // "unknown" for an empty reason

  uint64_t acknowledged() const { return applied + duplicate + rejected; }
};

// A report the stream took and has not yet seen answered.
struct IngestSent {
  uint64_t sequence = 0;
  // When the stream took it; zero for an ack that answers nothing sent.
  std::chrono::steady_clock::time_point sent_at{};
};

// What the stream tells its owner. Every call comes on the stream's completion thread, one at a
// time, never under the stream's lock, so it may call the stream back (TrySend(), Close(), ...);
// it must not block, as other streams may share the thread.
class IngestStreamObserver {
 public:
  virtual ~IngestStreamObserver() = default;
  // An ack, for `report` (the oldest unacknowledged). One at a time, in the order they came.
  virtual void OnAck(const v1::Ack& /*ack*/, const IngestSent& /*report*/) {}
  // A write finished, the window opened or the stream can take no more: an owner waiting to
  // send has something to look at.
  virtual void OnWritable() {}
  // The call is over. The last call; the stream must not be destroyed from inside it.
  virtual void OnDone(const grpc::Status& /*status*/) {}
  // For TrySendNumbered(): the wire bytes of report `sequence`, made as its write starts.
  virtual grpc::ByteBuffer EncodeAtWrite(uint64_t /*sequence*/) { return {}; }
};

class IngestStream final {
 public:
  static constexpr char kMethod[] = "/accelmon.v1.Ingest/Stream";

  struct Options {
    // Reports taken and not yet acknowledged: beyond it TrySend() refuses and Send() waits.
    size_t max_unacknowledged = std::numeric_limits<size_t>::max();
  };

  enum class SendResult {
    kQueued,  // taken: written after those before it
    kFull,    // `max_unacknowledged` are unacknowledged
    kOver,    // the stream takes no more (closed, cancelled, broken, or ended by the exporter)
  };

  // Opens the stream on `stub`'s channel. `observer` may be null; it must outlive the stream.
  IngestStream(grpc::GenericStub& stub, IngestStreamObserver* observer, Options options);
  IngestStream(grpc::GenericStub& stub, IngestStreamObserver* observer)
      : IngestStream(stub, observer, Options{}) {}
  // Waits for the call to end; cancels it first unless Close() or Cancel() was called.
  ~IngestStream();

  IngestStream(const IngestStream&) = delete;
  IngestStream& operator=(const IngestStream&) = delete;

  // Takes a report without waiting.
  SendResult TrySend(const v1::NodeReport& report);
  // The same for a report already serialised: `bytes` hold a NodeReport with `sequence`.
  SendResult TrySend(grpc::ByteBuffer bytes, uint64_t sequence);
  // The same for a report numbered by the stream (the n-th it takes is sequence n), its bytes
  // made by the observer's EncodeAtWrite(n) when its write starts (so stamped as it goes out).
  SendResult TrySendNumbered();
  // Takes a report, waiting while the window is full. False when the stream takes no more.
  bool Send(const v1::NodeReport& report);

  // No more reports: half-closes once every report taken is written; the exporter ends the
  // stream after its last ack.
  void Close();
  // Ends the call now; what is unacknowledged stays so.
  void Cancel();
  // Waits until the call is over; its status.
  grpc::Status Wait();

  // The stream takes no more reports.
  bool over() const;
  // Reports taken and not yet written (the one being written included).
  size_t unwritten() const;
  size_t unacknowledged() const;
  IngestAckCounts counts() const;

 private:
  struct Pending {
    uint64_t sequence = 0;
    bool numbered = false;
    grpc::ByteBuffer bytes;
  };

  // The completion queues and their threads, shared by every stream alive (ingest_stream.cc).
  class CompletionThreads;
  // What a finished operation was: its tag on the completion queue.
  enum class Operation { kWrite, kRead, kFinish };
  struct Tag {
    IngestStream* stream;
    Operation operation;
  };

  SendResult TakeLocked(std::unique_lock<std::mutex>& lock, Pending pending);
  bool OverLocked() const;
  // Starts the next write, or the half-close, or asks for the call's status, whichever is due.
  // The gRPC calls are made outside the lock; `writing_` or `finishing_` says which thread may
  // make them.
  void PumpLocked(std::unique_lock<std::mutex>& lock);

  // On the completion thread: one operation of this stream finished.
  void OnCompleted(Operation operation, bool ok);
  void OnWriteDone(bool ok);
  void OnReadDone(bool ok);
  void OnFinished();

  IngestStreamObserver* const observer_;
  const Options options_;
  // First, so it goes last: the thread that drains the call's queue outlives the call.
  std::shared_ptr<CompletionThreads> threads_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call_;
  Tag write_tag_{this, Operation::kWrite};  // the start, every write and the half-close
  Tag read_tag_{this, Operation::kRead};
  Tag finish_tag_{this, Operation::kFinish};
  grpc::Status finish_status_;  // gRPC's to fill until the finish tag comes

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Pending> queue_;         // taken, not yet written
  std::deque<IngestSent> in_flight_;  // taken, not yet acknowledged
  grpc::ByteBuffer writing_bytes_;    // being written
  grpc::ByteBuffer ack_bytes_;        // being read
  // A write (the call's start first, then a report or the half-close) is under way or about to
  // start: gRPC allows one at a time.
  bool writing_ = true;
  bool writing_report_ = false;  // the write under way is a report's
  bool half_closed_ = false;
  bool finishing_ = false;  // the status is asked for: no more operations start
  bool closing_ = false;
  bool cancelled_ = false;
  bool write_failed_ = false;
  bool reads_done_ = false;
  bool done_ = false;
  grpc::Status status_;
  IngestAckCounts counts_;
};

}  // namespace accelmon
