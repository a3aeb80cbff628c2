// The agent's side of the stream to the exporter. Collection hands reports to Submit(), which
// never blocks on the network; one thread streams them, in order, and forgets a report only
// once the exporter has acknowledged it. After a broken stream it reconnects with exponential
// backoff and jitter and re-sends everything unacknowledged (the exporter drops duplicates).
#pragma once

#include <grpcpp/client_context.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "accelmon/v1/ingest.grpc.pb.h"

namespace accelmon {

struct UplinkOptions {
  std::string exporter_address = "localhost:9478";
  // Reports kept while the exporter is away (an hour at 1s); beyond that the oldest go first.
  size_t max_pending = 3600;
  std::chrono::milliseconds min_backoff{100};
  std::chrono::milliseconds max_backoff{5000};
};

struct UplinkStats {
  uint64_t pending = 0;
  uint64_t dropped = 0;
  uint64_t acknowledged = 0;
  bool connected = false;
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
  void Run();
  // One stream's life: returns when it breaks or the uplink stops.
  grpc::Status StreamOnce(bool& got_ack);
  void HandleAck(const v1::Ack& ack);

  const UplinkOptions options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Ingest::Stub> stub_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<const v1::NodeReport>> pending_;  // sorted by sequence
  uint64_t dropped_ = 0;
  uint64_t acknowledged_ = 0;
  bool connected_ = false;
  bool stopping_ = false;
  grpc::ClientContext* active_context_ = nullptr;  // cancelled by Stop()

  std::thread thread_;
};

}  // namespace accelmon
