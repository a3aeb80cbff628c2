// The exporter's self-metrics, updated lock-free on the ingest path.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "recording/recorder.h"

namespace accelmon {

class ExporterStats {
 public:
  std::atomic<uint64_t> reports_applied{0};
  std::atomic<uint64_t> reports_duplicate{0};
  std::atomic<int64_t> streams_active{0};
  // Reads deferred because a stream sent faster than --grpc.max-reports-per-second.
  std::atomic<uint64_t> reads_throttled{0};
  std::atomic<double> last_scrape_seconds{0};
  std::atomic<uint64_t> last_scrape_series{0};  // samples the last /metrics had
  // The last reload (SIGHUP, POST /-/reload), as Prometheus' prometheus_config_last_reload_*:
  // successful until one fails; the start-up's reading counts as the first success.
  std::atomic<bool> config_reload_successful{true};
  std::atomic<double> config_reload_success_seconds{0};  // Unix time
  // The flight recorder's (--record.dir), updated by its writer thread; rendered only while
  // `recording` is set.
  std::atomic<bool> recording{false};
  recording::RecorderStats recorder;
  // Applied reports whose ack waits for the recorder or for the findings they changed to be
  // saved (ingest_service.cc).
  std::atomic<int64_t> acks_waiting{0};
  // Reports shown while the recording could not be written (NodeStore::Show), unacknowledged.
  std::atomic<uint64_t> reports_unrecorded{0};
  // What start-up read back from the recording (0 without one).
  std::atomic<uint64_t> restored_nodes{0};
  std::atomic<uint64_t> restored_findings{0};

  // Rejections are rare; a lock keeps the reason map simple.
  void CountRejected(const std::string& reason) {
    std::lock_guard lock(mu_);
    ++rejected_[reason];
  }
  std::map<std::string, uint64_t> rejected() const {
    std::lock_guard lock(mu_);
    return rejected_;
  }
  // Parts of applied reports trimmed away (series_budget.h), by reason.
  void CountDropped(const std::string& reason, uint64_t n) {
    std::lock_guard lock(mu_);
    dropped_[reason] += n;
  }
  std::map<std::string, uint64_t> dropped() const {
    std::lock_guard lock(mu_);
    return dropped_;
  }

 private:
  mutable std::mutex mu_;
  std::map<std::string, uint64_t> rejected_;
  std::map<std::string, uint64_t> dropped_;
};

}  // namespace accelmon
