// Renders the exporter's state: the contract with dashboards and alerts (names in
// docs/architecture.md's metric table), written once against MetricSink. Values a report lacks
// are not rendered. /metrics writes the text format (TextExpositionSink); RenderNodes() gives
// prometheus-cpp MetricFamily objects for the OpenMetrics writer and tests.
#pragma once

#include <prometheus/metric_family.h>

#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "daemon/exporter/diagnostics_service.h"
#include "daemon/exporter/exporter_stats.h"
#include "daemon/exporter/metric_sink.h"
#include "daemon/exporter/node_store.h"
#include "daemon/exporter/text_exposition.h"

namespace accelmon {

// Node and device series for `nodes`, as seen at `now` (for accelmon_node_up).
void EmitNodes(const std::vector<NodeEntry>& nodes, Clock::time_point now, MetricSink& sink);

// Per-job series (accelmon_job_*) over every node of `nodes`: a device's job is its first
// holder with a job id. Not part of EmitNodes: they need the whole fleet, not one report.
void EmitJobs(const std::vector<NodeEntry>& nodes, MetricSink& sink);

// The exporter's own series (accelmon_exporter_*, accelmon_build_info).
// `unrecorded_nodes`: of `nodes`, those whose latest report was shown unrecorded.
void EmitExporterStats(const ExporterStats& stats, size_t nodes, MetricSink& sink,
                       size_t unrecorded_nodes = 0);

// The same series as prometheus-cpp metric families (empty families left out).
// The diagnostics series (accelmon_diagnosis_*, accelmon_exporter_diagnosis_*); nothing when off.
void EmitDiagnostics(const DiagnosticsMetrics& diagnostics, MetricSink& sink);

std::vector<prometheus::MetricFamily> RenderNodes(const std::vector<NodeEntry>& nodes,
                                                  Clock::time_point now);
std::vector<prometheus::MetricFamily> RenderExporterStats(const ExporterStats& stats, size_t nodes);

// What /metrics serves: a snapshot of the store (its lock is not held while rendering, so a
// scrape never blocks ingest) and the exporter's own series, in the text format.
class StateRenderer {
 public:
  StateRenderer(NodeStore& store, ExporterStats& stats,
                std::function<Clock::time_point()> clock = Clock::now)
      : store_(store), stats_(stats), clock_(std::move(clock)) {}

  // Renders the exposition into `sink` and replaces `pieces` with it, in pieces to write one
  // after the other (what /metrics does: no copy into one string); they point into `sink`. Safe
  // to call from several threads at once, each with its own sink: a sink reused from one scrape
  // to the next keeps its capacity, so a steady-state scrape allocates nothing per series.
  void RenderPieces(TextExpositionSink& sink, std::vector<std::string_view>& pieces) const;
  // The same in one string (tests, tools), rendered into a sink this renderer keeps.
  void RenderText(std::string& out) const;

  // Also renders the diagnostics series (the diagnostics worker's latest snapshot).
  void set_diagnostics(DiagnosticsService* diagnostics) { diagnostics_ = diagnostics; }

 private:
  void Render(TextExpositionSink& sink) const;

  NodeStore& store_;
  ExporterStats& stats_;
  DiagnosticsService* diagnostics_ = nullptr;
  std::function<Clock::time_point()> clock_;
  mutable std::mutex text_mu_;
  mutable TextExpositionSink text_sink_;  // RenderText's, under text_mu_
};

}  // namespace accelmon
