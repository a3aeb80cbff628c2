// The status page's data (GET /api/v1/status): the fleet summary, one row per node, the open
// findings and the exporter's own health, as JSON; with ?node=NAME also that node's devices in
// full. Built from the same state that renders /metrics (a node store snapshot, the exporter's
// counters, the diagnostics worker's findings), so both show the same numbers for the same
// instant. It keeps nothing between requests: rates and sparklines are the page's own work, and
// nobody looking costs nothing.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <string_view>

#include "daemon/exporter/diagnostics_service.h"
#include "daemon/exporter/exporter_stats.h"
#include "daemon/exporter/node_store.h"

namespace accelmon {

// Where a finding's runbook is (dashboards/generate.py's RUNBOOK_BASE and anchor).
std::string RunbookUrl(std::string_view rule);

class StatusRenderer {
 public:
  StatusRenderer(NodeStore& store, ExporterStats& stats, DiagnosticsService* diagnostics,
                 std::function<Clock::time_point()> clock = Clock::now);

  // Replaces `out` with the status JSON; `node` (may be empty) also gets its devices. Safe from
  // several threads at once; the store's lock is held only for its snapshot.
  void RenderJson(std::string_view node, std::string& out) const;

 private:
  NodeStore& store_;
  ExporterStats& stats_;
  DiagnosticsService* diagnostics_;
  std::function<Clock::time_point()> clock_;
  const std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
};

}  // namespace accelmon
