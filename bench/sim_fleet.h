// A simulated fleet for the /metrics benchmarks (render_bench, scrape_peers): nodes of 8
// simulated devices with NVLink/PCIe links and pushed processes, as many as it takes to reach a
// number of series, the same for every benchmark that asks for that number.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "collectors/sim.h"
#include "daemon/exporter/metrics_renderer.h"

namespace accelmon::bench {

inline const Clock::time_point kNow = Clock::time_point(std::chrono::seconds(1'700'000'001));

inline std::shared_ptr<const accelmon::v1::NodeReport> SimReport(int node_index) {
  const std::string node = "sim-node-" + std::to_string(node_index);
  auto report = std::make_shared<accelmon::v1::NodeReport>();
  report->set_node(node);
  report->set_agent_instance_id("bench-" + node);
  report->set_sequence(1);
  report->mutable_timestamp()->set_seconds(1'700'000'000);
  report->mutable_interval()->set_seconds(1);
  accelmon::collectors::SimCollector sim(
      {.devices = 8, .seed = accelmon::collectors::SimSeedForNode(node)});
  accelmon::v1::NodeReport first_tick;
  sim.Collect(first_tick);
  sim.Collect(*report);  // the second tick: rates and energy are non-zero
  return report;
}

inline size_t CountSeries(const std::vector<NodeEntry>& nodes) {
  size_t n = 0;
  for (const auto& f : accelmon::RenderNodes(nodes, kNow)) n += f.metric.size();
  return n;
}

// Simulated nodes (8 devices with links each) until there are at least `target` series.
struct Fleet {
  std::vector<NodeEntry> nodes;
  size_t series = 0;
  double labels_per_series = 0;
};

inline const Fleet& FleetOf(size_t target) {
  static std::map<size_t, Fleet> fleets;
  Fleet& fleet = fleets[target];
  if (!fleet.nodes.empty()) return fleet;
  const NodeEntry first{SimReport(0), kNow};
  const size_t per_node = CountSeries({first});
  for (int i = 0; fleet.nodes.size() * per_node < target; ++i) {
    fleet.nodes.push_back({SimReport(i), kNow});
  }
  size_t labels = 0;
  for (const auto& f : accelmon::RenderNodes(fleet.nodes, kNow)) {
    fleet.series += f.metric.size();
    for (const auto& m : f.metric) labels += m.label.size();
  }
  fleet.labels_per_series = static_cast<double>(labels) / static_cast<double>(fleet.series);
  return fleet;
}

}  // namespace accelmon::bench
