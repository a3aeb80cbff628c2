// Every report an agent hands to its uplink, in order (Agent::set_report_observer), for tests
// that compare what the agent sent with what the exporter shows; and the waits on both.
#pragma once

#include <chrono>
#include <cmath>
#include <functional>
#include <mutex>
#include <optional>
#include <vector>

#include "accelmon/v1/telemetry.pb.h"
#include "daemon/exporter/exporter.h"
#include "support/wait.h"

namespace accelmon::testing {

class ReportTap {
 public:
  std::function<void(const v1::NodeReport&)> Observer() {
    return [this](const v1::NodeReport& r) {
      std::lock_guard lock(mu_);
      reports_.push_back(r);
    };
  }
  std::vector<v1::NodeReport> reports() {
    std::lock_guard lock(mu_);
    return reports_;
  }
  size_t size() {
    std::lock_guard lock(mu_);
    return reports_.size();
  }
  std::optional<v1::NodeReport> At(size_t i) {
    std::lock_guard lock(mu_);
    if (i >= reports_.size()) return std::nullopt;
    return reports_[i];
  }
  // The report whose timestamp /metrics shows (accelmon_node_last_report_timestamp_seconds):
  // the exposition prints 16 significant digits, and reports are far more than 1 ms apart.
  std::optional<v1::NodeReport> WithTimestamp(double seconds) {
    std::lock_guard lock(mu_);
    for (const auto& r : reports_) {
      if (std::abs(static_cast<double>(r.timestamp().seconds()) +
                   static_cast<double>(r.timestamp().nanos()) / 1e9 - seconds) < 1e-3) {
        return r;
      }
    }
    return std::nullopt;
  }

 private:
  std::mutex mu_;
  std::vector<v1::NodeReport> reports_;
};

// The exporter's latest report of its first node, once it satisfies `pred`; nothing when none
// did within `timeout`.
inline std::optional<v1::NodeReport> WaitForLatestReport(
    Exporter& exporter, const std::function<bool(const v1::NodeReport&)>& pred,
    std::chrono::milliseconds timeout) {
  std::optional<v1::NodeReport> found;
  WaitFor(
      [&] {
        const auto nodes = exporter.store().Snapshot(std::chrono::system_clock::now());
        if (nodes.empty() || !pred(*nodes[0].report)) return false;
        found = *nodes[0].report;
        return true;
      },
      timeout);
  return found;
}

}  // namespace accelmon::testing
