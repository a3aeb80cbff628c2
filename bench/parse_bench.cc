// The protobuf half of ingest's floor (issue 39): what parsing one loadgen report into an arena
// costs, with nothing of ours around it. bench/ingest_vs_echo.sh adds the bare gRPC echo server's
// CPU per report to it; the exporter's CPU per report at saturation is judged against that sum.
//
// The bytes are the ones `accelmon loadgen --devices 8 --links-per-device 18` sends (the
// saturation run's), with a sequence and timestamp; the arena is the store's (NewArenaReport),
// made and freed per report as ingest does.
#include <benchmark/benchmark.h>

#include <chrono>
#include <string>

#include "daemon/clients/loadgen.h"
#include "daemon/exporter/node_store.h"
#include "proto/time_format.h"

namespace {

std::string LoadgenReport() {
  accelmon::LoadgenOptions options;
  options.devices = 8;
  options.links_per_device = 18;
  const int64_t now = accelmon::WallClockNowNanos();
  accelmon::v1::NodeReport report;
  report.ParseFromString(accelmon::LoadgenReportBodies("loadgen-0001", options, now).front());
  report.set_sequence(12345);
  *report.mutable_timestamp() = accelmon::TimestampFromNanos(now);
  return report.SerializeAsString();
}

void BM_ParseReportOnArena(benchmark::State& state) {
  const std::string wire = LoadgenReport();
  for (auto _ : state) {
    std::shared_ptr<accelmon::v1::NodeReport> report = accelmon::NewArenaReport();
    if (!report->ParseFromString(wire)) state.SkipWithError("the report does not parse");
    benchmark::DoNotOptimize(report.get());
  }
  state.counters["bytes"] = static_cast<double>(wire.size());
}
BENCHMARK(BM_ParseReportOnArena)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
