// Throughput of offline diagnosis (`accelmon diagnose`) in values per second (CountValues: one
// numeric field set in a report), on what `standalone --sim 8` reports (host collectors over the
// test fixture root, 8 simulated devices), 8 nodes ticking once a second:
//
//   recording   Diagnose() over a recording directory (zstd), 1 hour: reader + engine + output
//   jsonl       Diagnose() over a JSON Lines file, the first 5 minutes (JSON parsing is slow)
//   engine      Engine::Process alone over the first 5 minutes in memory: the rules' own cost
//
// The data are generated once, into a temporary directory, before the first benchmark. See
// bench/README.md.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "bench/count_values.h"
#include "collectors/registry.h"
#include "collectors/sim.h"
#include "daemon/tools/diagnose_command.h"
#include "diagnostics/engine.h"
#include "recording/jsonl.h"
#include "recording/segment_writer.h"

namespace {

namespace fs = std::filesystem;
using accelmon::v1::NodeReport;

constexpr int kNodes = 8;
constexpr int kRecordingSeconds = 3600;
constexpr int kSmallSeconds = 300;  // JSON Lines and in memory
constexpr int64_t kStart = 1764680000;

struct Data {
  fs::path dir;
  std::string recording;
  std::string jsonl;
  std::vector<NodeReport> memory;  // the first kSmallSeconds
  uint64_t recording_reports = 0;
  uint64_t recording_values = 0;
  uint64_t small_reports = 0;
  uint64_t small_values = 0;

  Data() {
    dir = fs::temp_directory_path() / ("accelmon_diagnose_bench_" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    recording = (dir / "rec").string();
    jsonl = (dir / "fleet.jsonl").string();

    std::vector<accelmon::collectors::CollectorSet> nodes;
    const std::string root = ACCELMON_FIXTURES_DIR "/host";
    for (int n = 0; n < kNodes; ++n) {
      nodes.emplace_back(
          accelmon::collectors::CreateCollectors(accelmon::collectors::CollectorConfig{
              .paths = accelmon::collectors::PathResolver(root + "/proc", root + "/sys"),
              .sim_devices = 8,
              .sim_seed = accelmon::collectors::SimSeedForNode("sim" + std::to_string(n))}));
    }
    // As `record import` writes: zstd, batches of a group commit's size.
    accelmon::recording::SegmentWriter writer(accelmon::recording::RecordingOptions{
        .dir = recording,
        .writer = "import",
        .max_bytes = 0,
        .retention = std::chrono::milliseconds(0),
        .compression = accelmon::recording::Compression::kZstd});
    accelmon::recording::Batch batch;
    accelmon::recording::JsonlWriter json;
    std::string lines;
    std::ofstream jsonl_file(jsonl, std::ios::binary);
    for (int t = 0; t < kRecordingSeconds; ++t) {
      for (int n = 0; n < kNodes; ++n) {
        NodeReport r;
        r.set_node("sim-" + std::to_string(n));
        r.set_agent_instance_id("bench-" + std::to_string(n));
        r.set_sequence(static_cast<uint64_t>(t) + 1);
        r.mutable_timestamp()->set_seconds(kStart + t);
        r.mutable_interval()->set_seconds(1);
        r.set_agent_version("0.1.0");
        nodes[static_cast<size_t>(n)].CollectAll(r);
        const uint64_t values = accelmon::bench::CountValues(r);
        ++recording_reports;
        recording_values += values;
        batch.Add(r);
        if (batch.keys.size() >= 128) {
          writer.AppendBatch(batch);
          batch.Clear();
        }
        if (t < kSmallSeconds) {
          ++small_reports;
          small_values += values;
          json.Append(r, &lines);
          memory.push_back(std::move(r));
        }
      }
      jsonl_file << lines;
      lines.clear();
    }
    writer.AppendBatch(batch);
    writer.Sync();
  }
  ~Data() { fs::remove_all(dir); }
};

const Data& TheData() {
  static const Data data;
  return data;
}

void SetRates(benchmark::State& state, uint64_t reports, uint64_t values) {
  state.counters["reports/s"] =
      benchmark::Counter(static_cast<double>(reports), benchmark::Counter::kIsRate);
  state.counters["values/s"] =
      benchmark::Counter(static_cast<double>(values), benchmark::Counter::kIsRate);
  state.counters["values/report"] =
      static_cast<double>(values) / static_cast<double>(std::max<uint64_t>(reports, 1));
}

// The whole command, output to /dev/null (it is a few lines: the time is in reading and rules).
void RunDiagnose(benchmark::State& state, const std::string& input, uint64_t reports,
                 uint64_t values) {
  uint64_t rounds = 0;
  for (auto _ : state) {
    const int rc = accelmon::Diagnose({.inputs = {input}, .output = "/dev/null"});
    if (rc != 0) state.SkipWithError("diagnose failed");
    ++rounds;
  }
  SetRates(state, rounds * reports, rounds * values);
}

void BM_DiagnoseRecording(benchmark::State& state) {
  const Data& d = TheData();
  RunDiagnose(state, d.recording, d.recording_reports, d.recording_values);
}
BENCHMARK(BM_DiagnoseRecording)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_DiagnoseJsonl(benchmark::State& state) {
  const Data& d = TheData();
  RunDiagnose(state, d.jsonl, d.small_reports, d.small_values);
}
BENCHMARK(BM_DiagnoseJsonl)->Unit(benchmark::kMillisecond)->UseRealTime();

// Every rule over reports already in memory: what diagnosis costs beyond reading.
void BM_EngineOnly(benchmark::State& state) {
  const Data& d = TheData();
  uint64_t rounds = 0;
  for (auto _ : state) {
    accelmon::diagnostics::Engine engine;
    for (const NodeReport& r : d.memory) engine.Process(r);
    benchmark::DoNotOptimize(engine.stats().opened);
    ++rounds;
  }
  SetRates(state, rounds * d.small_reports, rounds * d.small_values);
}
BENCHMARK(BM_EngineOnly)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
