// /metrics rendering at 1k, 10k and 100k series: our renderer (EmitNodes into the text sink)
// against the peer, prometheus-cpp 1.0.1's Registry::Collect + TextSerializer over the SAME
// data (a Registry of gauges with the same names, labels and values). Also: allocations per
// scrape in steady state (allocation_counter.cc counts every operator new), the whole scrape
// as /metrics runs it (store snapshot + render), and gzip level 1 of the result.
// See bench/README.md for method and numbers.
#include <benchmark/benchmark.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <sstream>

#include "bench/allocation_counter.h"
#include "collectors/sim.h"
#include "daemon/exporter/gzip_encoder.h"
#include "daemon/exporter/metrics_renderer.h"
#include "daemon/exporter/text_exposition.h"

namespace {

using accelmon::Clock;
using accelmon::NodeEntry;

const Clock::time_point kNow = Clock::time_point(std::chrono::seconds(1'700'000'001));

std::shared_ptr<const accelmon::v1::NodeReport> SimReport(int node_index) {
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

size_t CountSeries(const std::vector<NodeEntry>& nodes) {
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

const Fleet& FleetOf(size_t target) {
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

void SetCounters(benchmark::State& state, const Fleet& fleet, size_t bytes, uint64_t allocations) {
  const auto series = static_cast<double>(fleet.series);
  state.counters["series"] = series;
  state.counters["labels_per_series"] = fleet.labels_per_series;
  state.counters["ns_per_series"] = benchmark::Counter(
      series * 1e-9, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
  state.counters["bytes"] = static_cast<double>(bytes);
  state.counters["allocs_per_scrape"] =
      benchmark::Counter(static_cast<double>(allocations), benchmark::Counter::kAvgIterations);
}

// Ours: the renderer core into the text sink, buffers kept from scrape to scrape.
void BM_RenderOurs(benchmark::State& state) {
  const Fleet& fleet = FleetOf(static_cast<size_t>(state.range(0)));
  accelmon::TextExpositionSink sink;
  std::string out;
  auto scrape = [&] {
    sink.Clear();
    accelmon::EmitNodes(fleet.nodes, kNow, sink);
    out.clear();
    sink.AppendTo(out);
  };
  scrape();  // warm-up: buffers grow to their steady-state size
  scrape();
  const uint64_t before = AllocationCount();
  for (auto _ : state) {
    scrape();
    benchmark::DoNotOptimize(out.data());
  }
  SetCounters(state, fleet, out.size(), AllocationCount() - before);
}
BENCHMARK(BM_RenderOurs)->Arg(1000)->Arg(10'000)->Arg(100'000)->Unit(benchmark::kMicrosecond);

// Ours as /metrics runs it: snapshot of the store, node and exporter series, text (no HTTP).
void BM_ScrapeOurs(benchmark::State& state) {
  const Fleet& fleet = FleetOf(static_cast<size_t>(state.range(0)));
  accelmon::NodeStore store(std::chrono::hours(1));
  for (const NodeEntry& n : fleet.nodes) store.Apply(n.report, kNow);
  accelmon::ExporterStats stats;
  const accelmon::StateRenderer renderer(store, stats, [] { return kNow; });
  std::string out;
  renderer.RenderText(out);
  renderer.RenderText(out);
  const uint64_t before = AllocationCount();
  for (auto _ : state) {
    renderer.RenderText(out);
    benchmark::DoNotOptimize(out.data());
  }
  SetCounters(state, fleet, out.size(), AllocationCount() - before);
}
BENCHMARK(BM_ScrapeOurs)->Arg(1000)->Arg(10'000)->Arg(100'000)->Unit(benchmark::kMicrosecond);

// The per-job series alone (EmitJobs: every device of every node is one job's, the sim's): the
// part of a scrape that looks across nodes. Steady state allocates nothing.
void BM_RenderJobs(benchmark::State& state) {
  const Fleet& fleet = FleetOf(static_cast<size_t>(state.range(0)));
  accelmon::TextExpositionSink sink;
  std::string out;
  auto scrape = [&] {
    sink.Clear();
    accelmon::EmitJobs(fleet.nodes, sink);
    out.clear();
    sink.AppendTo(out);
  };
  scrape();
  scrape();
  const uint64_t before = AllocationCount();
  for (auto _ : state) {
    scrape();
    benchmark::DoNotOptimize(out.data());
  }
  SetCounters(state, fleet, out.size(), AllocationCount() - before);
  state.counters["nodes"] = static_cast<double>(fleet.nodes.size());
}
BENCHMARK(BM_RenderJobs)->Arg(1000)->Arg(10'000)->Arg(100'000)->Unit(benchmark::kMicrosecond);

// The peer: the same families, labels and values as prometheus-cpp gauges in a Registry.
void BM_RenderPeer(benchmark::State& state) {
  const Fleet& fleet = FleetOf(static_cast<size_t>(state.range(0)));
  prometheus::Registry registry;
  for (const auto& f : accelmon::RenderNodes(fleet.nodes, kNow)) {
    auto& family = prometheus::BuildGauge().Name(f.name).Help(f.help).Register(registry);
    for (const auto& m : f.metric) {
      prometheus::Labels labels;
      for (const auto& l : m.label) labels.emplace(l.name, l.value);
      family.Add(labels).Set(f.type == prometheus::MetricType::Counter ? m.counter.value
                                                                       : m.gauge.value);
    }
  }
  const prometheus::TextSerializer serializer;
  size_t bytes = 0;
  const uint64_t before = AllocationCount();
  for (auto _ : state) {
    std::ostringstream out;
    serializer.Serialize(out, registry.Collect());
    bytes = static_cast<size_t>(out.tellp());
    benchmark::DoNotOptimize(out);
  }
  SetCounters(state, fleet, bytes, AllocationCount() - before);
}
BENCHMARK(BM_RenderPeer)->Arg(1000)->Arg(10'000)->Arg(100'000)->Unit(benchmark::kMicrosecond);

// gzip level 1 of our exposition, as /metrics sends it to a scraper that asks.
void BM_Gzip(benchmark::State& state) {
  const Fleet& fleet = FleetOf(static_cast<size_t>(state.range(0)));
  accelmon::TextExpositionSink sink;
  accelmon::EmitNodes(fleet.nodes, kNow, sink);
  std::string text;
  sink.AppendTo(text);
  accelmon::GzipEncoder encoder;
  std::string compressed;
  encoder.Encode(text, compressed);
  const uint64_t before = AllocationCount();
  for (auto _ : state) {
    encoder.Encode(text, compressed);
    benchmark::DoNotOptimize(compressed.data());
  }
  SetCounters(state, fleet, compressed.size(), AllocationCount() - before);
  state.counters["ratio"] =
      static_cast<double>(text.size()) / static_cast<double>(compressed.size());
}
BENCHMARK(BM_Gzip)->Arg(1000)->Arg(10'000)->Arg(100'000)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
