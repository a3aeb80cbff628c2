// The metrics a finding can plot (Finding.plot) and how `accelmon diagnose --format html` reads
// them back out of the reports around each finding.
//
// Plot names: of the finding's device (matched by device_uuid, else by index == finding.device)
//   "fragmentation_ratio", "memory_used_bytes", "core_celsius", "compute_ratio", "sm_ratio",
//   "ecc_corrected_total", "ecc_uncorrected_total", "device_up" (1/0);
// of the finding's link on its device (a host link when the finding has no device)
//   "link_up" (1/0), "link_bytes_per_second" (transmit + receive, from counter deltas);
// of the node
//   "host_oom_kill_total".
// A value the report does not hold gives no point (never a fake zero).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "accelmon/v1/diagnostics.pb.h"
#include "accelmon/v1/telemetry.pb.h"

namespace accelmon::diagnostics {

// The value of `metric` for `subject`'s device, link or node in `report`; nothing when absent or
// when `metric` is not a plot name. "link_bytes_per_second" needs two reports: use
// SeriesCollector (here it is always absent).
std::optional<double> ExtractPlotValue(const v1::NodeReport& report, std::string_view metric,
                                       const v1::Finding& subject);

// How a plot's values read: "bytes", "ratio", "celsius", "bool", "count", "bytes_per_second";
// "" for unknown names.
std::string_view PlotUnit(std::string_view metric);

struct SeriesPoint {
  int64_t time_ns = 0;
  double value = 0;
};

// Collects, for each finding, its plot metric from `margin_ns` before its start to `margin_ns`
// after its end (to the last report when it is still open). Feed it the same reports the engine
// saw, in the same order; like the engine it skips a report not newer than its node's previous.
// `findings` must outlive the collector.
class SeriesCollector {
 public:
  static constexpr int64_t kDefaultMarginNs = int64_t{600} * 1'000'000'000;

  explicit SeriesCollector(std::span<const v1::Finding> findings,
                           int64_t margin_ns = kDefaultMarginNs);

  void Add(const v1::NodeReport& report);

  // Points of findings[i], in time order.
  const std::vector<SeriesPoint>& points(size_t i) const { return tracks_[i].points; }
  size_t size() const { return tracks_.size(); }

 private:
  struct Track {
    const v1::Finding* finding;
    int64_t from_ns;
    int64_t to_ns;  // INT64_MAX while open
    bool rate;      // link_bytes_per_second
    // The previous counter sample (rate only).
    std::optional<std::pair<int64_t, double>> previous;
    std::vector<SeriesPoint> points;
  };

  std::vector<Track> tracks_;
  std::map<std::string, std::vector<size_t>, std::less<>> by_node_;  // track indexes
  std::map<std::string, int64_t, std::less<>> last_ns_;              // per node
};

}  // namespace accelmon::diagnostics
