// What one report may add to /metrics. ValidateReport refuses reports that break the hard limits
// (devices, links, processes, holders, events); this trims the rest instead, so that the valid
// parts of an oversized report still count: the lists and maps no other limit bounds
// (collectors, sensors, buddyinfo zones and orders, map entries), and then the whole report to
// the node's series budget (--limits.series-per-node).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "accelmon/v1/telemetry.pb.h"

namespace accelmon {

struct TrimLimits {
  size_t max_collectors = 64;
  // Entries of each map that becomes a label: a device's throttle reasons, a link's error types,
  // the agent's push rejection reasons.
  size_t max_map_entries = 32;
  // Host temperature sensors, and host power sensors (each).
  size_t max_sensors = 256;
  size_t max_buddy_zones = 64;
  size_t max_buddy_orders = 32;  // Linux has 11 to 14
  // Series a report may add to /metrics, estimated from above by CountSeries.
  size_t series_per_node = 20'000;
};

// What trimming dropped, by reason (the `reason` label of accelmon_exporter_ingest_dropped_total):
// too_many_collectors, too_many_map_entries, too_many_sensors, too_many_buddy_zones,
// too_many_buddy_orders, series_budget. Counts are entries dropped (a collector, a map entry, a
// sensor, a zone, an order, a link, a process, a device).
using Dropped = std::map<std::string, uint64_t>;

// At least as many series as /metrics renders for `report` (node, host, devices, links, holders,
// processes), counted by the same rules as metrics_renderer.cc; a unit test holds the two
// together.
size_t CountSeries(const v1::NodeReport& report);

// Trims `report` in place to `limits`; returns what it dropped (empty when nothing). Over the
// series budget it drops, until the report fits: host sensors, buddyinfo zones, host links,
// processes, holders, link error types, throttle reasons, device links, and devices, each from
// the end.
Dropped TrimReport(v1::NodeReport& report, const TrimLimits& limits);

}  // namespace accelmon
