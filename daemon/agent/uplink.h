// The agent's side of the stream to the exporter. Collection hands reports to Submit(), which
// never blocks on the network; one thread streams them, in order, and forgets a report only
// once the exporter has acknowledged it. After a broken stream it reconnects with exponential
// backoff and jitter and re-sends everything unacknowledged (the exporter drops duplicates).
// What is unacknowledged has one book, a ReportLog (report_log.h): the disk spool when there is
// one, else a queue in memory; the uplink itself only remembers how far it has sent.
// Given several exporters it streams to the one ranked first for its node (rendezvous.h), fails
// over down the ranking while that one is unreachable, and returns when it is back.
#pragma once

#include <grpcpp/client_context.h>
#include <grpcpp/generic/generic_stub.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "accelmon/v1/ingest.grpc.pb.h"
#include "daemon/common/tls.h"

namespace accelmon {

class ReportLog;
class Spool;

struct UplinkOptions {
  std::string exporter_address = "localhost:9478";
  GrpcClientTls tls{};  // plain text unless enabled
  // Without a spool: reports kept while the exporter is away (an hour at 1s); beyond that the
  // oldest go first. A spool is bounded by its own max_bytes instead.
  size_t max_pending = 3600;
  std::chrono::milliseconds min_backoff{100};
  std::chrono::milliseconds max_backoff{5000};
  // With a disk spool, every report is written there first and read back from it to be sent,
  // oldest first (an earlier run's unacknowledged ones too); it is the only record of them.
  Spool* spool = nullptr;
  // Several exporters (when set, exporter_address is not used), ranked for `node` by rendezvous
  // hashing. Unreachable: the next in the ranking is tried. While streaming to any but the first,
  // the better-ranked ones are checked every `return_probe_interval` and the uplink moves back to
  // the best one reachable. Unacknowledged reports go to whichever exporter it is connected to.
  std::vector<std::string> exporter_addresses{};
  std::string node{};
  std::chrono::milliseconds return_probe_interval{30'000};
};

struct UplinkStats {
  uint64_t pending = 0;
  uint64_t dropped = 0;
  uint64_t acknowledged = 0;
  uint64_t resent = 0;  // sent again on a later stream, unacknowledged on an earlier one
  bool connected = false;
  std::string exporter;  // the exporter streamed to, or tried next
};

class Uplink {
 public:
  explicit Uplink(UplinkOptions options);
  ~Uplink();

  void Start();
  void Stop();

  // Queues a report for sending. Never blocks on the network.
  void Submit(v1::NodeReport report);

  UplinkStats stats() const;

  // Waits until every submitted report is acknowledged, or `timeout` passes.
  bool WaitUntilDrained(std::chrono::milliseconds timeout);

 private:
  class StreamObserver;

  void Run();
  // One stream's life: returns when it breaks or the uplink stops.
  grpc::Status StreamOnce(bool& got_ack);
  // Waits `wait` before the next attempt, or less when the channel connects meanwhile; true
  // when stopping.
  bool WaitToRetry(std::chrono::milliseconds wait);
  // After a failure that looks like TLS: one handshake of our own, to log why (tls_probe.h).
  void ExplainTlsFailure(const std::string& address, const grpc::Status& status) const;
  // A better-ranked exporter than the current one whose channel is ready, if any; sets
  // `connecting` when one is on its way (worth checking again soon).
  std::optional<size_t> ReadyBetterTarget(bool& connecting);
  // After the current exporter failed without a single ack: the next in the ranking.
  void FailOver(const grpc::Status& status, bool log);
  // "exporter HOST:PORT" with its rank when there are several.
  std::string Describe(size_t target) const;
  void HandleAck(const v1::Ack& ack);
  // After the exporter ended a stream because a report exceeded its message size limit.
  void DropTooLarge(const grpc::Status& status);

  struct Target {
    std::string address;
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<grpc::GenericStub> stub;
  };

  const UplinkOptions options_;
  std::vector<Target> targets_;        // best first; one without exporter_addresses
  std::unique_ptr<ReportLog> memory_;  // the book without a spool
  ReportLog* log_ = nullptr;           // the spool or memory_

  mutable std::mutex mu_;
  std::condition_variable cv_;
  uint64_t acknowledged_ = 0;  // acks that moved the watermark
  uint64_t highest_sent_ = 0;  // the highest sequence handed to any stream (the uplink thread's)
  std::atomic<uint64_t> resent_{0};
  bool connected_ = false;
  bool stopping_ = false;
  size_t current_ = 0;               // into targets_; written by the streaming thread only
  std::optional<size_t> return_to_;  // the stream was ended to move back to this target

  std::thread thread_;
};

// The exporter's limit from gRPC's "Received message larger than max (N vs. LIMIT)", if it is that.
std::optional<size_t> ParseMessageSizeLimit(const std::string& error_message);

}  // namespace accelmon
