// Throughput of the flight recorder's format and of its interchange formats, on the reports
// `standalone --sim 8` makes (host collectors over the test fixture root, 8 simulated devices),
// 16 nodes ticking once a second. See bench/README.md.
//
//   encode+frame  ReportBatch records from the reports' wire bytes, as the exporter writes them
//   recorder      the same through the real Recorder (write(2), fdatasync every 100 ms)
//   read          LogReader (salvage) + DecodeRecord + ReportBatch parse, from memory
//   reader        RecordingReader over a recording directory on disk (what the tools do)
//   jsonl, openmetrics  the interchange formats
//
// A "value" is one numeric field set in a report (CountValues); a "sample" is one sample of the
// report's /metrics exposition (what Prometheus would store).
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "accelmon/v1/recording.pb.h"
#include "bench/count_values.h"
#include "collectors/registry.h"
#include "collectors/sim.h"
#include "daemon/exporter/metrics_renderer.h"
#include "daemon/tools/openmetrics_writer.h"
#include "recording/jsonl.h"
#include "recording/log_reader.h"
#include "recording/log_writer.h"
#include "recording/record_codec.h"
#include "recording/recorder.h"
#include "recording/recording_reader.h"
#include "recording/segment_writer.h"

namespace {

namespace fs = std::filesystem;
namespace pb = google::protobuf;
using accelmon::v1::NodeReport;
using namespace accelmon::recording;  // NOLINT: the subject of this file

constexpr int kNodes = 16;
constexpr int kTicks = 64;
constexpr int64_t kStart = 1764680000;

using accelmon::bench::CountValues;

uint64_t CountSamples(const NodeReport& report) {
  const auto at =
      std::chrono::system_clock::time_point(std::chrono::seconds(report.timestamp().seconds()));
  const std::shared_ptr<const NodeReport> unowned(std::shared_ptr<const NodeReport>(), &report);
  uint64_t n = 0;
  for (const auto& f : accelmon::RenderNodes({accelmon::NodeEntry{unowned, at}}, at))
    n += f.metric.size();
  return n;
}

// kNodes * kTicks reports, tick by tick (every node at tick 0, then at tick 1, ...): the order an
// exporter applies them in.
struct Pool {
  std::vector<NodeReport> reports;
  std::vector<std::string> wire;
  std::vector<uint64_t> values;  // per report
  uint64_t wire_bytes = 0;
  uint64_t total_values = 0;
  uint64_t total_samples = 0;

  Pool() {
    std::vector<accelmon::collectors::CollectorSet> nodes;
    for (int n = 0; n < kNodes; ++n) {
      const std::string root = ACCELMON_FIXTURES_DIR "/host";
      nodes.emplace_back(
          accelmon::collectors::CreateCollectors(accelmon::collectors::CollectorConfig{
              .paths = accelmon::collectors::PathResolver(root + "/proc", root + "/sys"),
              .sim_devices = 8,
              .sim_seed = accelmon::collectors::SimSeedForNode("node" + std::to_string(n))}));
    }
    for (int t = 0; t < kTicks; ++t) {
      for (int n = 0; n < kNodes; ++n) {
        NodeReport r;
        r.set_node("node" + std::to_string(n));
        r.set_agent_instance_id("bench-" + std::to_string(n));
        r.set_sequence(static_cast<uint64_t>(t) + 1);
        r.mutable_timestamp()->set_seconds(kStart + t);
        r.mutable_timestamp()->set_nanos(1000000 * ((n * 37) % 1000));
        r.mutable_interval()->set_seconds(1);
        r.set_agent_version("0.1.0");
        nodes[static_cast<size_t>(n)].CollectAll(r);
        wire.push_back(r.SerializeAsString());
        wire_bytes += wire.back().size();
        values.push_back(CountValues(r));
        total_values += values.back();
        total_samples += CountSamples(r);
        reports.push_back(std::move(r));
      }
    }
  }
};

const Pool& ThePool() {
  static const Pool pool;
  return pool;
}

Compression CompressionArg(const benchmark::State& state) {
  return state.range(0) == 0 ? Compression::kNone : Compression::kZstd;
}

fs::path ScratchDir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() /
                       ("accelmon_recording_bench_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(dir);
  return dir;
}

void SetRates(benchmark::State& state, uint64_t reports, uint64_t values, uint64_t bytes) {
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
  state.counters["reports/s"] =
      benchmark::Counter(static_cast<double>(reports), benchmark::Counter::kIsRate);
  state.counters["values/s"] =
      benchmark::Counter(static_cast<double>(values), benchmark::Counter::kIsRate);
}

// ---- write --------------------------------------------------------------------------------

// Batching, compressing and framing from the reports' wire bytes; no I/O. range(0): 0 none,
// 1 zstd; range(1): reports per ReportBatch record.
void BM_EncodeFrame(benchmark::State& state) {
  const Pool& pool = ThePool();
  const Compression compression = CompressionArg(state);
  const auto batch = static_cast<size_t>(state.range(1));
  LogWriter writer;
  std::string body;
  std::string framed;
  size_t next = 0;
  uint64_t reports = 0, values = 0, in_bytes = 0, out_bytes = 0;
  for (auto _ : state) {
    body.clear();
    for (size_t k = 0; k < batch; ++k, next = (next + 1) % pool.wire.size()) {
      AppendReportToBatch(pool.wire[next], &body);
      in_bytes += pool.wire[next].size();
      values += pool.values[next];
    }
    framed.clear();
    writer.AddRecord(EncodeRecord(RecordKind::kReportBatch, body, compression), &framed);
    out_bytes += framed.size();
    reports += batch;
    benchmark::DoNotOptimize(framed.data());
  }
  SetRates(state, reports, values, in_bytes);
  state.counters["disk_bytes/report"] =
      static_cast<double>(out_bytes) / static_cast<double>(reports);
  state.counters["disk_bytes/value"] = static_cast<double>(out_bytes) / static_cast<double>(values);
  state.counters["ratio"] = static_cast<double>(in_bytes) / static_cast<double>(out_bytes);
}
BENCHMARK(BM_EncodeFrame)
    ->ArgNames({"zstd", "batch"})
    ->ArgsProduct({{0, 1}, {1, 16, 256}})
    ->Unit(benchmark::kMicrosecond);

// The exporter's path end to end: Recorder::Append of the reports (copying their wire bytes, as
// the exporter does) from one thread, at most 4096 unacknowledged (an exporter's agents wait for
// their acks too), group commit with the default 100 ms fdatasync, files on the file system of
// $TMPDIR. An iteration is 32 rounds of the pool (32768 reports) until the last is acknowledged,
// so it includes one final sync.
void BM_RecorderWrite(benchmark::State& state) {
  const Pool& pool = ThePool();
  const fs::path dir = ScratchDir("recorder");
  constexpr int kRounds = 32;
  constexpr uint64_t kWindow = 4096;
  accelmon::recording::RecorderStats stats;
  uint64_t appended = 0, values = 0, bytes = 0;
  {
    RecorderOptions options;
    options.recording.dir = dir.string();
    options.recording.compression = CompressionArg(state);
    options.recording.max_bytes = 0;
    Recorder recorder(options, stats);
    std::atomic<uint64_t> acked{0};
    auto wait_until = [&acked](uint64_t n) {
      while (acked.load() < n) std::this_thread::sleep_for(std::chrono::microseconds(100));
    };
    for (auto _ : state) {
      const auto start = std::chrono::steady_clock::now();
      for (int round = 0; round < kRounds; ++round) {
        for (size_t i = 0; i < pool.wire.size(); ++i) {
          if (appended >= kWindow) wait_until(appended - kWindow);
          const NodeReport& r = pool.reports[i];
          recorder.Append(pool.wire[i], ReportKey{r.node(), r.agent_instance_id(), appended + 1},
                          [&acked](bool) { acked.fetch_add(1); });
          ++appended;
        }
        values += pool.total_values;
        bytes += pool.wire_bytes;
      }
      wait_until(appended);
      state.SetIterationTime(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
  }
  SetRates(state, appended, values, bytes);
  state.counters["disk_bytes/report"] =
      static_cast<double>(stats.bytes.load()) / static_cast<double>(appended);
  state.counters["disk_bytes/value"] =
      static_cast<double>(stats.bytes.load()) / static_cast<double>(values);
  fs::remove_all(dir);
}
BENCHMARK(BM_RecorderWrite)
    ->ArgName("zstd")
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMillisecond)
    ->UseManualTime();

// ---- read ---------------------------------------------------------------------------------

// The pool as one segment in memory: ReportBatch records of `batch` reports.
struct Segment {
  std::string data;
  uint64_t reports = 0;
  uint64_t values = 0;
};

Segment MakeSegment(Compression compression, size_t batch) {
  const Pool& pool = ThePool();
  Segment s;
  LogWriter writer;
  std::string body;
  for (size_t i = 0; i < pool.wire.size();) {
    body.clear();
    for (size_t k = 0; k < batch && i < pool.wire.size(); ++k, ++i) {
      AppendReportToBatch(pool.wire[i], &body);
      ++s.reports;
      s.values += pool.values[i];
    }
    writer.AddRecord(EncodeRecord(RecordKind::kReportBatch, body, compression), &s.data);
  }
  return s;
}

// Salvage reader + record decoding + parsing every report, from memory. range(0): 0 none, 1 zstd.
void BM_ReadDecode(benchmark::State& state) {
  const Segment segment = MakeSegment(CompressionArg(state), 16);
  accelmon::v1::ReportBatch batch;
  std::string scratch, storage, error;
  uint64_t reports = 0;
  for (auto _ : state) {
    LogReader reader(segment.data, ReadMode::kSalvage);
    std::string_view record;
    while (reader.ReadRecord(&record, &scratch)) {
      DecodedRecord decoded;
      if (!DecodeRecord(record, &storage, &decoded, &error) ||
          !batch.ParseFromArray(decoded.body.data(), static_cast<int>(decoded.body.size()))) {
        state.SkipWithError("cannot decode");
        return;
      }
      reports += static_cast<uint64_t>(batch.reports_size());
    }
  }
  const auto rounds = reports / segment.reports;
  SetRates(state, reports, rounds * segment.values, rounds * segment.data.size());
}
BENCHMARK(BM_ReadDecode)->ArgName("zstd")->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

// The offline tools' path: RecordingReader over a recording directory written by SegmentWriter
// (files in the page cache after the first round).
void BM_RecordingReader(benchmark::State& state) {
  const Pool& pool = ThePool();
  const fs::path dir = ScratchDir("reader");
  {
    RecordingOptions options;
    options.dir = dir.string();
    options.compression = CompressionArg(state);
    options.max_bytes = 0;
    SegmentWriter writer(options);
    Batch batch;
    for (size_t i = 0; i < pool.wire.size(); ++i) {
      const NodeReport& r = pool.reports[i];
      batch.Add(pool.wire[i], ReportKey{r.node(), r.agent_instance_id(), r.sequence()});
      if (batch.keys.size() == 16) {
        writer.AppendBatch(batch);
        batch.Clear();
      }
    }
    writer.AppendBatch(batch);
  }
  uint64_t reports = 0, bytes = 0;
  for (auto _ : state) {
    RecordingReader reader(dir.string());
    while (reader.Next() != nullptr) ++reports;
    bytes += reader.bytes_total();
  }
  const auto rounds = reports / pool.reports.size();
  SetRates(state, reports, rounds * pool.total_values, bytes);
  fs::remove_all(dir);
}
BENCHMARK(BM_RecordingReader)->ArgName("zstd")->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

// ---- interchange formats ------------------------------------------------------------------

void BM_JsonlWrite(benchmark::State& state) {
  const Pool& pool = ThePool();
  JsonlWriter writer;
  std::string out;
  size_t next = 0;
  uint64_t reports = 0, values = 0, bytes = 0;
  for (auto _ : state) {
    out.clear();
    writer.Append(pool.reports[next], &out);
    bytes += out.size();
    values += pool.values[next];
    ++reports;
    next = (next + 1) % pool.reports.size();
  }
  SetRates(state, reports, values, bytes);
}
BENCHMARK(BM_JsonlWrite)->Unit(benchmark::kMicrosecond);

void BM_JsonlRead(benchmark::State& state) {
  const Pool& pool = ThePool();
  std::string text;
  JsonlWriter writer;
  for (const auto& r : pool.reports) writer.Append(r, &text);
  uint64_t reports = 0, bytes = 0;
  NodeReport report;
  for (auto _ : state) {
    std::istringstream in(text);
    JsonlReader reader(in, "bench");
    while (reader.Next(&report) == JsonlReader::Result::kReport) ++reports;
    bytes += text.size();
  }
  const auto rounds = reports / pool.reports.size();
  SetRates(state, reports, rounds * pool.total_values, bytes);
}
BENCHMARK(BM_JsonlRead)->Unit(benchmark::kMillisecond);

// Every pool report into OpenMetrics files (rendering, buffering, writing); an iteration is the
// whole pool, Finish() included.
void BM_OpenMetricsWrite(benchmark::State& state) {
  const Pool& pool = ThePool();
  const fs::path dir = ScratchDir("openmetrics");
  uint64_t reports = 0, samples = 0;
  for (auto _ : state) {
    accelmon::OpenMetricsWriter writer(dir.string());
    for (const auto& r : pool.reports) writer.Add(r);
    const auto summary = writer.Finish();
    reports += summary.reports;
    samples += summary.samples;
  }
  state.counters["reports/s"] =
      benchmark::Counter(static_cast<double>(reports), benchmark::Counter::kIsRate);
  state.counters["samples/s"] =
      benchmark::Counter(static_cast<double>(samples), benchmark::Counter::kIsRate);
  fs::remove_all(dir);
}
BENCHMARK(BM_OpenMetricsWrite)->Unit(benchmark::kMillisecond);

// Not a benchmark: the pool's shape, printed once so the rates above can be read.
void BM_PoolShape(benchmark::State& state) {
  const Pool& pool = ThePool();
  for (auto _ : state) benchmark::DoNotOptimize(pool.reports.size());
  const auto n = static_cast<double>(pool.reports.size());
  state.counters["reports"] = n;
  state.counters["wire_bytes/report"] = static_cast<double>(pool.wire_bytes) / n;
  state.counters["values/report"] = static_cast<double>(pool.total_values) / n;
  state.counters["samples/report"] = static_cast<double>(pool.total_samples) / n;
}
BENCHMARK(BM_PoolShape)->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
