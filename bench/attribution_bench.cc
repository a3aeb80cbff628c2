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

#include "collectors/dra_devices.h"
#include "collectors/kubelet.h"
#include "collectors/nvml.h"
#include "collectors/nvml_api.h"
#include "collectors/pod_uids.h"
#include "collectors/processes.h"
#include "collectors/registry.h"
#include "collectors/shared_library.h"
#include "k8s/podresources/v1/api.pb.h"

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

// The NVML collector over the test library; nothing, and the benchmark skipped with the reason,
// when it cannot load.
std::unique_ptr<accelmon::collectors::Collector> NvmlOrSkip(benchmark::State& state) {
  std::string why_not;
  auto nvml = accelmon::collectors::CreateNvmlCollector(FAKE_NVML_PATH, &why_not);
  if (!nvml) state.SkipWithError(why_not.c_str());
  return nvml;
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
  auto nvml = NvmlOrSkip(state);
  if (!nvml) return;
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
  auto nvml = NvmlOrSkip(state);
  if (!nvml) return;
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

// What Kubernetes attribution adds to a tick on a DRA node, after the kubelet's answer came: a
// look at the CDI specs (a stat of each directory and file; listed and parsed again only when one
// changed), at the pod log directory (110 pods, the kubelet's default maximum; listed again only
// when its mtime changed) and attributing 4 pods
// to the 4 GPUs and one MIG instance of tests/fixtures/dra (a device plugin's GPU, a claim shared
// by two pods, a MIG instance's claim). The kubelet's List call itself is not in it.
void BM_KubeletDraAttribution(benchmark::State& state) {
  const std::string dra = std::string(ACCELMON_FIXTURES_DIR) + "/dra";
  char pattern[] = "/tmp/accelmon-bench-pods.XXXXXX";
  const std::filesystem::path pods_dir = mkdtemp(pattern);
  for (int i = 0; i < 110; ++i) {
    std::filesystem::create_directories(pods_dir / ("ml_pod-" + std::to_string(i) +
                                                    "_0b7c0e8a-1f2d-4e3c-8a9b-" +
                                                    std::to_string(100000000000 + i)));
  }
  accelmon::collectors::DraDeviceResolver resolver(
      {dra + "/cdi"}, accelmon::collectors::PathResolver(dra + "/proc", dra + "/sys"));
  accelmon::v1::NodeReport base = NewReport(0);
  for (uint32_t i = 0; i < 4; ++i) {
    auto& id = *base.add_devices()->mutable_identity();
    id.set_vendor("nvidia");
    id.set_index(i);
    id.set_uuid("GPU-fa4e000" + std::to_string(i) + "-0000-4000-8000-00000000000" +
                std::to_string(i));
    char pci[32];
    std::snprintf(pci, sizeof pci, "00000000:%02X:00.0", 0x18 + 0x10 * i);
    id.set_pci_bus_id(pci);
  }
  auto& mig = *base.add_devices()->mutable_identity();
  mig.set_vendor("nvidia");
  mig.set_index(300);
  mig.set_uuid("MIG-5c1d0002-0000-4000-8000-000000000001");
  mig.set_pci_bus_id("0000:38:00.0");
  mig.mutable_mig()->set_parent_uuid(base.devices(2).identity().uuid());
  mig.mutable_mig()->set_gpu_instance_id(1);
  mig.mutable_mig()->set_compute_instance_id(0);
  ::v1::ListPodResourcesResponse pods;
  auto add_pod = [&](const std::string& name) {
    auto* pod = pods.add_pod_resources();
    pod->set_namespace_("ml");
    pod->set_name(name);
    auto* c = pod->add_containers();
    c->set_name("worker");
    return c;
  };
  auto add_claim = [](::v1::ContainerResources* c, const std::string& claim,
                      const std::string& cdi) {
    auto* d = c->add_dynamic_resources();
    d->set_claim_namespace("ml");
    d->set_claim_name(claim);
    d->add_claim_resources()->add_cdi_devices()->set_name(cdi);
  };
  auto* plugin = add_pod("pod-0")->add_devices();
  plugin->set_resource_name("nvidia.com/gpu");
  plugin->add_device_ids(base.devices(0).identity().uuid());
  const std::string shared = "k8s.gpu.nvidia.com/claim=5b1c4f0e-7a1d-4c2e-9f3b-0d1e2f3a4b5c-gpu-1";
  add_claim(add_pod("pod-1"), "shared-gpu", shared);
  add_claim(add_pod("pod-2"), "shared-gpu", shared);
  add_claim(add_pod("pod-3"), "mig-1g",
            "k8s.gpu.nvidia.com/claim=8e2d6a41-3c5f-4b7e-a1d9-6f0e5c4b3a21-gpu-2-mig-1g18gb-1-0");
  accelmon::collectors::PodLogDirectory pod_logs(pods_dir);
  size_t holders = 0;
  for (auto _ : state) {
    accelmon::v1::NodeReport report = base;
    resolver.Refresh();
    bool exists = false;
    const accelmon::collectors::PodUids& uids = pod_logs.Refresh(exists);
    holders = accelmon::collectors::AttributePods(pods, report, {.dra = &resolver, .uids = &uids});
    benchmark::DoNotOptimize(report);
  }
  if (holders != 4) state.SkipWithError("not every pod was attributed");
  std::filesystem::remove_all(pods_dir);
}
BENCHMARK(BM_KubeletDraAttribution)->MeasureProcessCPUTime()->UseRealTime();

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
