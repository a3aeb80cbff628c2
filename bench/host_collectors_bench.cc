// CPU cost of one full host collection cycle (every host collector, over a fixture root),
// the agent-side work node_exporter does per scrape. See bench/README.md.
#include <benchmark/benchmark.h>
#include <prometheus/text_serializer.h>

#include <chrono>
#include <sstream>

#include "collectors/registry.h"
#include "daemon/exporter/metrics_renderer.h"

namespace {

using accelmon::collectors::CollectorConfig;
using accelmon::collectors::CollectorSet;
using accelmon::collectors::CreateCollectors;
using accelmon::collectors::PathResolver;

const std::string kRoot = ACCELMON_FIXTURES_DIR "/host";

CollectorSet HostCollectors() {
  return CollectorSet(CreateCollectors(
      CollectorConfig{.paths = PathResolver(kRoot + "/proc", kRoot + "/sys"), .sim_devices = 0}));
}

accelmon::v1::NodeReport NewReport(uint64_t seq) {
  accelmon::v1::NodeReport report;
  report.set_node("bench");
  report.set_agent_instance_id("bench");
  report.set_sequence(seq);
  report.mutable_timestamp()->set_seconds(1'700'000'000 + static_cast<int64_t>(seq));
  return report;
}

// What the agent does per tick: run every host collector into a fresh report.
void BM_HostCollectionCycle(benchmark::State& state) {
  CollectorSet collectors = HostCollectors();
  uint64_t seq = 0;
  for (auto _ : state) {
    accelmon::v1::NodeReport report = NewReport(++seq);
    collectors.CollectAll(report);
    benchmark::DoNotOptimize(report);
  }
}
BENCHMARK(BM_HostCollectionCycle)->MeasureProcessCPUTime()->UseRealTime();

// Collection plus what node_exporter also does per scrape: render and serialise the text format.
void BM_HostCollectRenderSerialize(benchmark::State& state) {
  CollectorSet collectors = HostCollectors();
  uint64_t seq = 0;
  for (auto _ : state) {
    auto report = std::make_shared<accelmon::v1::NodeReport>(NewReport(++seq));
    collectors.CollectAll(*report);
    const auto now = accelmon::Clock::now();
    std::vector<accelmon::NodeEntry> nodes{{report, now}};
    std::ostringstream out;
    prometheus::TextSerializer().Serialize(out, accelmon::RenderNodes(nodes, now));
    benchmark::DoNotOptimize(out);
  }
}
BENCHMARK(BM_HostCollectRenderSerialize)->MeasureProcessCPUTime()->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
