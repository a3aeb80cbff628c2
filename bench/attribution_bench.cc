// What attributing devices to processes and Slurm jobs costs per agent cycle: the agent's
// collectors as `accelmon agent` builds them (CreateCollectors: host collectors, NVML through the
// test library with 8 GPUs, the processes collector) over a /proc made for the run, with and
// without 64 Slurm processes on the GPUs. See bench/README.md.
#include <benchmark/benchmark.h>
#include <spdlog/spdlog.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include "collectors/nvml.h"
#include "collectors/nvml_api.h"
#include "collectors/processes.h"
#include "collectors/registry.h"
#include "collectors/shared_library.h"

namespace {

namespace fs = std::filesystem;
using accelmon::collectors::CollectorConfig;
using accelmon::collectors::CollectorSet;
using accelmon::collectors::CreateCollectors;
using accelmon::collectors::HostCollectors;
using accelmon::collectors::PathResolver;
using accelmon::collectors::ProcessesCollector;
using accelmon::collectors::SharedLibrary;

constexpr int kDevices = 8;
constexpr int kProcessesPerDevice = 8;  // 64 in all
constexpr unsigned kFirstPid = 40000;
const std::string kHost = ACCELMON_FIXTURES_DIR "/host";

// The host fixture's /proc plus one Slurm task per GPU process (cgroup v2, job 7001 step 0),
// in a temporary directory removed at exit.
class BenchProc {
 public:
  BenchProc() {
    std::string pattern = (fs::temp_directory_path() / "accelmon-attribution.XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp");
    root_ = pattern;
    fs::copy(kHost + "/proc", root_ / "proc", fs::copy_options::recursive);
    for (int i = 0; i < kDevices * kProcessesPerDevice; ++i) {
      const unsigned pid = kFirstPid + static_cast<unsigned>(i);
      const fs::path dir = root_ / "proc" / std::to_string(pid);
      fs::create_directories(dir);
      std::ofstream(dir / "status") << "Name:\tpython3\nUmask:\t0022\nState:\tS (sleeping)\n"
                                    << "Tgid:\t" << pid << "\nPid:\t" << pid
                                    << "\nPPid:\t1\nUid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\n"
                                    << "VmRSS:\t 4567890 kB\nThreads:\t97\n";
      std::ofstream(dir / "comm") << "python3\n";
      std::ofstream(dir / "cgroup")
          << "0::/system.slice/slurmstepd.scope/job_7001/step_0/user/task_" << i << "\n";
    }
  }
  ~BenchProc() { fs::remove_all(root_); }
  PathResolver paths() const { return PathResolver(root_ / "proc", kHost + "/sys"); }

 private:
  fs::path root_;
};

const BenchProc& Proc() {
  static const BenchProc proc;  // one per run, removed at exit
  return proc;
}

SharedLibrary& FakeNvml() {
  static SharedLibrary* lib = new SharedLibrary(FAKE_NVML_PATH);
  return *lib;
}

// 8 GPUs; with `processes`, 8 compute processes on each (pids in the bench /proc).
void ScriptFakeNvml(bool processes) {
  SharedLibrary& lib = FakeNvml();
  lib.Function<void (*)()>("fake_nvml_reset")();
  lib.Function<void (*)(int)>("fake_nvml_set_device_count")(kDevices);
  if (!processes) return;
  auto add = lib.Function<void (*)(int, const char*, unsigned, unsigned long long)>(
      "fake_nvml_add_process");
  for (int d = 0; d < kDevices; ++d) {
    for (int p = 0; p < kProcessesPerDevice; ++p) {
      add(d, "compute", kFirstPid + static_cast<unsigned>(d * kProcessesPerDevice + p),
          (8ULL + static_cast<unsigned>(p)) << 30);
    }
  }
}

CollectorConfig AgentConfig(bool attribution) {
  CollectorConfig config{.paths = Proc().paths()};
  config.devices = true;
  config.nvml_library = FAKE_NVML_PATH;
  config.dcmi_library = "/nonexistent/libdcmi.so";
  config.processes = attribution;
  return config;
}

accelmon::v1::NodeReport NewReport(uint64_t seq) {
  accelmon::v1::NodeReport report;
  report.set_node("bench");
  report.mutable_timestamp()->set_seconds(1'700'000'000 + static_cast<int64_t>(seq));
  return report;
}

// One agent tick: every collector into a fresh report. Arg 0: no attribution (no processes on
// the GPUs, processes collector off); 1: 64 Slurm processes listed by NVML and attributed.
void BM_AgentCycle(benchmark::State& state) {
  const bool attribution = state.range(0) != 0;
  ScriptFakeNvml(attribution);
  CollectorSet collectors(CreateCollectors(AgentConfig(attribution)));
  uint64_t seq = 0;
  size_t holders = 0;
  for (auto _ : state) {
    accelmon::v1::NodeReport report = NewReport(++seq);
    collectors.CollectAll(report);
    holders = 0;
    for (const auto& d : report.devices()) holders += static_cast<size_t>(d.holders_size());
    benchmark::DoNotOptimize(report);
  }
  if (attribution && holders != kDevices) state.SkipWithError("expected one holder per GPU");
  state.counters["holders"] = static_cast<double>(holders);
}
BENCHMARK(BM_AgentCycle)
    ->ArgName("attribution")
    ->Arg(0)
    ->Arg(1)
    ->MeasureProcessCPUTime()
    ->UseRealTime();

// The NVML collector alone (8 GPUs, through the test library), with its process lists empty
// (arg 0) or 8 processes per GPU (arg 1): the cost of listing them into the report.
void BM_NvmlCollector(benchmark::State& state) {
  ScriptFakeNvml(state.range(0) != 0);
  std::string why_not;
  auto nvml = accelmon::collectors::CreateNvmlCollector(FAKE_NVML_PATH, &why_not);
  if (!nvml) {
    state.SkipWithError(why_not.c_str());
    return;
  }
  uint64_t seq = 0;
  for (auto _ : state) {
    accelmon::v1::NodeReport report = NewReport(++seq);
    nvml->Collect(report);
    benchmark::DoNotOptimize(report);
  }
}
BENCHMARK(BM_NvmlCollector)
    ->ArgName("processes")
    ->Arg(0)
    ->Arg(1)
    ->MeasureProcessCPUTime()
    ->UseRealTime();

// The NVML collector alone (8 GPUs, no processes) with GPM profiling off (arg 0: the GPUs say
// they have no GPM) or on (arg 1: one sample per GPU per tick and one 16-metric query against
// the previous tick's sample): what issue 21's activity adds to a cycle.
void BM_NvmlCollectorGpm(benchmark::State& state) {
  ScriptFakeNvml(false);
  if (state.range(0) == 0) {
    FakeNvml().Function<void (*)(int, const char*, double)>("fake_nvml_set_value")(
        -1, "gpm.supported", 0);
  }
  std::string why_not;
  auto nvml = accelmon::collectors::CreateNvmlCollector(FAKE_NVML_PATH, &why_not);
  if (!nvml) {
    state.SkipWithError(why_not.c_str());
    return;
  }
  uint64_t seq = 0;
  {
    accelmon::v1::NodeReport first = NewReport(++seq);  // GPM's first sample: no interval yet
    nvml->Collect(first);
  }
  size_t with_activity = 0;
  for (auto _ : state) {
    accelmon::v1::NodeReport report = NewReport(++seq);
    nvml->Collect(report);
    with_activity = 0;
    for (const auto& d : report.devices()) with_activity += d.has_activity() ? 1 : 0;
    benchmark::DoNotOptimize(report);
  }
  if (state.range(0) != 0 && with_activity != kDevices) {
    state.SkipWithError("expected GPM activity on every GPU");
  }
  state.counters["gpus_with_activity"] = static_cast<double>(with_activity);
}
BENCHMARK(BM_NvmlCollectorGpm)
    ->ArgName("gpm")
    ->Arg(0)
    ->Arg(1)
    ->MeasureProcessCPUTime()
    ->UseRealTime();

// The processes collector alone over a report with 8 GPUs x 8 processes, as NVML lists them.
// Arg 0: steady state (each process's /proc read when it appeared); 1: every process read again
// each tick (the first tick, and once a minute per process).
void BM_ProcessesCollector(benchmark::State& state) {
  const bool reread = state.range(0) != 0;
  ProcessesCollector collector(
      Proc().paths(),
      {.max_per_device = 64,
       .reread_after = reread ? std::chrono::milliseconds(0) : std::chrono::hours(1)});
  accelmon::v1::NodeReport base = NewReport(0);
  for (int d = 0; d < kDevices; ++d) {
    auto& device = *base.add_devices();
    device.mutable_identity()->set_vendor("nvidia");
    device.mutable_identity()->set_index(static_cast<uint32_t>(d));
    for (int p = 0; p < kProcessesPerDevice; ++p) {
      auto& process = *device.add_processes();
      process.set_pid(kFirstPid + static_cast<unsigned>(d * kProcessesPerDevice + p));
      process.set_used_bytes((8ULL + static_cast<unsigned>(p)) << 30);
    }
  }
  for (auto _ : state) {
    accelmon::v1::NodeReport report = base;
    collector.Collect(report);
    benchmark::DoNotOptimize(report);
  }
}
BENCHMARK(BM_ProcessesCollector)
    ->ArgName("reread")
    ->Arg(0)
    ->Arg(1)
    ->MeasureProcessCPUTime()
    ->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
  // The collectors' start-up lines ("NVIDIA collection on") would land in the JSON output.
  spdlog::set_level(spdlog::level::warn);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
