// `accelmon top`'s model: from the latest reports and the open findings, the rows the terminal UI
// and `--once` show — a fleet summary, one row per node, one per device, one per open finding —
// sorted and filtered. Pure: no terminal, no network, the clock passed in.
//
// A value no report carries is absent here too and shown as "-", never as 0 (the promise of
// docs/architecture.md). Memory is kept in bytes, exactly as /metrics has it
// (accelmon_device_memory_used_bytes); the formatters round only for display.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "accelmon/v1/diagnostics.pb.h"
#include "accelmon/v1/telemetry.pb.h"

namespace accelmon::top {

// What the node list (and each node's devices) is sorted by; `s` cycles through them in order.
enum class SortKey { kNode, kUtil, kMemory, kTemp, kFindings };

// "node", "util", "memory", "temp", "findings" (the --sort values).
std::string_view SortKeyName(SortKey key);
std::optional<SortKey> ParseSortKey(std::string_view name);
SortKey NextSortKey(SortKey key);

struct ViewOptions {
  SortKey sort = SortKey::kNode;
  // Case-insensitive substring of the node name or of a job on one of its devices; empty: all.
  std::string filter{};
};

// A node is stale when its latest report is older than this many of its collection intervals
// (as accelmon_node_up turns 0).
inline constexpr int kStaleIntervals = 3;

struct FleetSummary {
  size_t nodes = 0;  // after the filter
  size_t live = 0;
  size_t stale = 0;
  size_t devices = 0;
  size_t findings = 0;  // open findings of those nodes
  size_t critical = 0;
  size_t warning = 0;
};

struct DeviceRow {
  uint32_t index = 0;
  std::string model{};
  std::optional<uint64_t> mem_used{};   // bytes
  std::optional<uint64_t> mem_total{};  // bytes
  std::optional<double> fragmentation{};
  std::optional<double> util{};   // compute, 0..1
  std::optional<double> temp{};   // core, °C
  std::optional<double> power{};  // watts
  std::string holder{};           // jobs (else pods, else users), comma-separated; empty: unknown
  std::optional<bool> up{};
};

struct NodeRow {
  std::string node{};
  bool stale = false;
  size_t devices = 0;
  std::optional<double> mean_util{};    // over the devices that report it
  std::optional<uint64_t> mem_used{};   // sum over the devices that report it
  std::optional<uint64_t> mem_total{};  // sum over the devices that report it
  std::optional<double> max_temp{};
  std::optional<double> power{};        // sum
  size_t findings = 0;                  // open
  std::optional<double> age_seconds{};  // since the report's timestamp; absent without one
  std::vector<DeviceRow> device_rows{};
};

struct FindingRow {
  std::string severity{};
  std::string rule{};
  std::string node{};
  std::string device{};  // empty: the node itself
  std::string summary{};
  std::optional<double> since_seconds{};  // since it began (`start`)
};

struct View {
  FleetSummary summary{};
  std::vector<NodeRow> nodes{};        // sorted, filtered
  std::vector<FindingRow> findings{};  // open ones of those nodes, critical first, oldest first
};

View BuildView(const std::vector<v1::NodeReport>& reports, const std::vector<v1::Finding>& findings,
               std::chrono::system_clock::time_point now, const ViewOptions& options);

// Display formats; each gives "-" for an absent value.
std::string FormatGiB(std::optional<uint64_t> bytes);    // "12.3"
std::string FormatBytes(std::optional<uint64_t> bytes);  // "13207024435": exact, as /metrics
std::string FormatMemory(std::optional<uint64_t> used,
                         std::optional<uint64_t> total);   // "12.3/80.0G"
std::string FormatPercent(std::optional<double> ratio);    // "57%"
std::string FormatRatio(std::optional<double> ratio);      // "0.42"
std::string FormatCelsius(std::optional<double> celsius);  // "65"
std::string FormatWatts(std::optional<double> watts);      // "250"
std::string FormatAge(std::optional<double> seconds);  // "0.4s", "12s", "3m05s", "2h10m", "3d4h"

// "nodes 3 (3 live, 0 stale)  devices 6  open findings 1 (1 critical, 0 warning)"
std::string FormatSummary(const FleetSummary& summary);

// What `accelmon top --once` prints: the summary, then the NODES, DEVICES and FINDINGS tables
// (one row each, columns separated by at least two spaces, every device of every node with its
// exact memory in bytes).
std::string FormatText(const View& view, std::string_view source);

}  // namespace accelmon::top
