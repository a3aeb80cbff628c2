// Renders the exporter's state as Prometheus metric families: the contract with dashboards and
// alerts (names in docs/architecture.md's metric table). Values a report lacks are not rendered.
#pragma once

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>

#include <functional>
#include <vector>

#include "daemon/exporter_stats.h"
#include "daemon/node_store.h"

namespace accelmon {

// Node and device series for `nodes`, as seen at `now` (for accelmon_node_up).
std::vector<prometheus::MetricFamily> RenderNodes(const std::vector<NodeEntry>& nodes,
                                                  Clock::time_point now);

// The exporter's own series (accelmon_exporter_*, accelmon_build_info).
std::vector<prometheus::MetricFamily> RenderExporterStats(const ExporterStats& stats, size_t nodes);

// What prometheus-cpp's Exposer calls on every scrape.
class StateCollectable final : public prometheus::Collectable {
 public:
  StateCollectable(NodeStore& store, ExporterStats& stats,
                   std::function<Clock::time_point()> clock = Clock::now)
      : store_(store), stats_(stats), clock_(std::move(clock)) {}

  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  NodeStore& store_;
  ExporterStats& stats_;
  std::function<Clock::time_point()> clock_;
};

}  // namespace accelmon
