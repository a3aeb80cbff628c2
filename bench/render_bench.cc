// /metrics rendering at 1k, 10k and 100k series: our renderer (EmitNodes into the text sink)
// against the peer, prometheus-cpp 1.0.1's Registry::Collect + TextSerializer over the SAME
// data (a Registry of gauges with the same names, labels and values). Also: allocations per
// scrape in steady state (allocation_counter.cc counts every operator new), the whole scrape
// as /metrics runs it (store snapshot + render), and the gzip'd scrape Prometheus asks for
// (libdeflate level 1, as /metrics does; zlib level 1, what it did before, as the anchor).
// See bench/README.md for method and numbers.
#include <benchmark/benchmark.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>
#include <zlib.h>

#include <sstream>

#include "bench/allocation_counter.h"
#include "bench/sim_fleet.h"
#include "collectors/sim.h"
#include "daemon/exporter/gzip_encoder.h"
#include "daemon/exporter/metrics_renderer.h"
#include "daemon/exporter/text_exposition.h"
#include "daemon/exporter/zstd_encoder.h"

namespace {

using accelmon::Clock;
using accelmon::NodeEntry;
using accelmon::bench::Fleet;
using accelmon::bench::FleetOf;
using accelmon::bench::kNow;

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
// As /metrics renders: the families' buffers are the answer's pieces, never copied together.
void BM_RenderOurs(benchmark::State& state) {
  const Fleet& fleet = FleetOf(static_cast<size_t>(state.range(0)));
  accelmon::TextExpositionSink sink;
  std::vector<std::string_view> pieces;
  auto scrape = [&] {
    sink.Clear();
    accelmon::EmitNodes(fleet.nodes, kNow, sink);
    sink.Pieces(pieces);
  };
  scrape();  // warm-up: buffers grow to their steady-state size
  scrape();
  const uint64_t before = AllocationCount();
  for (auto _ : state) {
    scrape();
    benchmark::DoNotOptimize(pieces.data());
  }
  size_t bytes = 0;
  for (const auto piece : pieces) bytes += piece.size();
  SetCounters(state, fleet, bytes, AllocationCount() - before);
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
// A compressed scrape as /metrics runs it: render, then `Encoder` over the families' buffers.
// ratio: plain bytes over compressed bytes.
template <typename Encoder>
void CompressedScrape(benchmark::State& state) {
  const Fleet& fleet = FleetOf(static_cast<size_t>(state.range(0)));
  accelmon::TextExpositionSink sink;
  std::vector<std::string_view> pieces;
  Encoder encoder;
  std::string_view compressed;
  auto scrape = [&] {
    sink.Clear();
    accelmon::EmitNodes(fleet.nodes, kNow, sink);
    sink.Pieces(pieces);
    compressed = encoder.Encode(pieces);
  };
  scrape();
  scrape();
  const uint64_t before = AllocationCount();
  for (auto _ : state) {
    scrape();
    benchmark::DoNotOptimize(compressed.data());
  }
  size_t plain = 0;
  for (const auto piece : pieces) plain += piece.size();
  SetCounters(state, fleet, compressed.size(), AllocationCount() - before);
  state.counters["ratio"] = static_cast<double>(plain) / static_cast<double>(compressed.size());
}

// gzip (libdeflate level 1), what Prometheus asks for.
void BM_GzipScrapeOurs(benchmark::State& state) { CompressedScrape<accelmon::GzipEncoder>(state); }
BENCHMARK(BM_GzipScrapeOurs)->Arg(1000)->Arg(10'000)->Arg(100'000)->Unit(benchmark::kMicrosecond);

// zstd (a client that asks for it): streamed over the pieces, no copy.
void BM_ZstdScrapeOurs(benchmark::State& state) { CompressedScrape<accelmon::ZstdEncoder>(state); }
BENCHMARK(BM_ZstdScrapeOurs)->Arg(1000)->Arg(10'000)->Arg(100'000)->Unit(benchmark::kMicrosecond);

// The anchor, what /metrics did before: the text in one string, then zlib deflate level 1 with
// gzip framing, state and output kept between scrapes.
void BM_GzipScrapeZlib(benchmark::State& state) {
  const Fleet& fleet = FleetOf(static_cast<size_t>(state.range(0)));
  accelmon::TextExpositionSink sink;
  std::string text, compressed;
  z_stream z{};
  deflateInit2(&z, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
  auto scrape = [&] {
    sink.Clear();
    accelmon::EmitNodes(fleet.nodes, kNow, sink);
    text.clear();
    sink.AppendTo(text);
    deflateReset(&z);
    compressed.resize(deflateBound(&z, text.size()));
    z.next_in = reinterpret_cast<Bytef*>(text.data());
    z.avail_in = static_cast<uInt>(text.size());
    z.next_out = reinterpret_cast<Bytef*>(compressed.data());
    z.avail_out = static_cast<uInt>(compressed.size());
    deflate(&z, Z_FINISH);
    compressed.resize(z.total_out);
  };
  scrape();
  const uint64_t before = AllocationCount();
  for (auto _ : state) {
    scrape();
    benchmark::DoNotOptimize(compressed.data());
  }
  deflateEnd(&z);
  SetCounters(state, fleet, compressed.size(), AllocationCount() - before);
  state.counters["ratio"] =
      static_cast<double>(text.size()) / static_cast<double>(compressed.size());
}
BENCHMARK(BM_GzipScrapeZlib)->Arg(1000)->Arg(10'000)->Arg(100'000)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
