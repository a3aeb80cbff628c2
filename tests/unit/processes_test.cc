// The processes collector over fixture /proc trees (tests/fixtures/procs-*): Slurm cgroup v1 and
// v2 layouts, plain processes, amdgpu fdinfo, a pid that vanished; and NVML's process list
// through the fake library into it, as the agent runs them (collectors/registry.cc).
#include "collectors/processes.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "collectors/nvml_api.h"
#include "collectors/registry.h"
#include "collectors/shared_library.h"
#include "support/fake_nvml_library.h"
#include "support/temp_dir.h"

namespace accelmon::collectors {
namespace processes_test {
namespace {

namespace fs = std::filesystem;

const std::string kFixtures = ACCELMON_FIXTURES_DIR;
constexpr uint64_t kGiB = 1ULL << 30;
constexpr uint64_t kKiB = 1ULL << 10;
// The fixtures' uid without a passwd entry: shown as the number.
constexpr const char* kNoNameUid = "2147480000";

PathResolver Fixture(const std::string& name) {
  return PathResolver(kFixtures + "/" + name + "/proc", kFixtures + "/" + name + "/sys");
}

v1::DeviceTelemetry& AddDevice(v1::NodeReport& report, const std::string& vendor,
                               const std::string& pci_bus_id) {
  v1::DeviceTelemetry& d = *report.add_devices();
  d.mutable_identity()->set_vendor(vendor);
  d.mutable_identity()->set_index(static_cast<uint32_t>(report.devices_size() - 1));
  d.mutable_identity()->set_pci_bus_id(pci_bus_id);
  d.mutable_identity()->set_uuid(vendor + "-" + pci_bus_id);
  return d;
}

v1::ProcessMemory& AddProcess(v1::DeviceTelemetry& d, uint32_t pid,
                              std::optional<uint64_t> used = std::nullopt) {
  v1::ProcessMemory& p = *d.add_processes();
  p.set_pid(pid);
  if (used) p.set_used_bytes(*used);
  return p;
}

std::vector<uint32_t> Pids(const v1::DeviceHolder& h) { return {h.pids().begin(), h.pids().end()}; }

std::vector<uint32_t> Pids(const v1::DeviceTelemetry& d) {
  std::vector<uint32_t> out;
  for (const auto& p : d.processes()) out.push_back(p.pid());
  return out;
}

void Collect(const PathResolver& paths, v1::NodeReport& report, ProcessesOptions options = {}) {
  ProcessesCollector collector(paths, options);
  EXPECT_EQ(collector.name(), "processes");
  collector.Collect(report);
}

// ---- Parsers --------------------------------------------------------------------------------

TEST(SlurmCgroup, V1JobAndStepFromTheControllerLines) {
  EXPECT_EQ(ParseSlurmCgroup("12:pids:/\n"
                             "6:devices:/slurm/uid_1000/job_4711/step_0/task_0\n"
                             "4:freezer:/slurm/uid_1000/job_4711/step_0/task_0\n"
                             "1:name=systemd:/system.slice/slurmd.service\n"),
            (SlurmStep{"4711", "0"}));
  EXPECT_EQ(ParseSlurmCgroup("3:cpuset:/slurm_node17/uid_0/job_12/step_batch/task_0\n"),
            (SlurmStep{"12", "batch"}))
      << "several slurmd on one host (slurm_<node>)";
  EXPECT_EQ(ParseSlurmCgroup("5:memory:/slurm/uid_0/job_12\n"
                             "4:freezer:/slurm/uid_0/job_12/step_3/task_0\n"),
            (SlurmStep{"12", "3"}))
      << "a controller at job level does not hide the step another line names";
}

TEST(SlurmCgroup, V2StepsBatchExternInteractiveAndTheStepdItself) {
  EXPECT_EQ(ParseSlurmCgroup("0::/system.slice/slurmstepd.scope/job_4711/step_0/user/task_0\n"),
            (SlurmStep{"4711", "0"}));
  for (const std::string step : {"batch", "extern", "interactive"}) {
    EXPECT_EQ(ParseSlurmCgroup("0::/system.slice/slurmstepd.scope/job_9/step_" + step +
                               "/user/task_special"),
              (SlurmStep{"9", step}));
  }
  EXPECT_EQ(ParseSlurmCgroup("0::/system.slice/node3_slurmstepd.scope/job_77/step_1/slurm"),
            (SlurmStep{"77", "1"}));
  EXPECT_EQ(ParseSlurmCgroup("0::/system.slice/slurmstepd.scope/job_77/user"),
            (SlurmStep{"77", ""}))
      << "in the job, outside a step";
}

TEST(SlurmCgroup, OtherCgroupsAreNotSlurm) {
  EXPECT_EQ(ParseSlurmCgroup("0::/user.slice/user-1000.slice/session-3.scope\n"), std::nullopt);
  EXPECT_EQ(ParseSlurmCgroup("0::/system.slice/job_web.service\n"), std::nullopt)
      << "job_ must be followed by the numeric job id";
  EXPECT_EQ(ParseSlurmCgroup("0::/docker/job_\n"), std::nullopt);
  EXPECT_EQ(ParseSlurmCgroup(""), std::nullopt);
  EXPECT_EQ(ParseSlurmCgroup("garbage without colons\n"), std::nullopt);
}

TEST(ProcStatus, UidIsTheRealUid) {
  EXPECT_EQ(ParseStatusUid("Name:\tpython3\nUid:\t1000\t0\t0\t0\nGid:\t5\t5\t5\t5\n"), 1000u);
  EXPECT_EQ(ParseStatusUid("Name:\tpython3\n"), std::nullopt);
  EXPECT_EQ(ParseStatusUid("Uid:\tx\n"), std::nullopt);
}

TEST(DrmFdinfo, AmdgpuKeysInBytes) {
  const DrmFdinfo a = ParseDrmFdinfo(
      "pos:\t0\ndrm-driver:\tamdgpu\ndrm-client-id:\t17\ndrm-pdev:\t0000:C1:00.0\n"
      "drm-memory-vram:\t1048576 KiB\ndrm-memory-gtt: \t2048 KiB\n");
  EXPECT_EQ(a.driver, "amdgpu");
  EXPECT_EQ(a.pdev, "0000:c1:00.0") << "lower case, as sysfs names the device";
  EXPECT_EQ(a.client_id, 17u);
  EXPECT_EQ(a.vram_bytes, 1048576 * kKiB);

  const DrmFdinfo newer = ParseDrmFdinfo("drm-driver:\tamdgpu\ndrm-total-vram:\t3 MiB\n");
  EXPECT_EQ(newer.vram_bytes, 3ULL << 20) << "kernels that print only drm-total-vram";
  EXPECT_EQ(newer.client_id, std::nullopt);
  EXPECT_EQ(ParseDrmFdinfo("drm-memory-vram:\t4096\n").vram_bytes, 4096u) << "no unit: bytes";
  EXPECT_EQ(ParseDrmFdinfo("drm-memory-vram:\t12 parsecs\n").vram_bytes, std::nullopt);
}

// ---- The collector over fixture trees -------------------------------------------------------

TEST(ProcessesCollector, SlurmV1ProcessesMakeOneHolderPerJobStep) {
  v1::NodeReport report;
  v1::DeviceTelemetry& gpu0 = AddDevice(report, "nvidia", "0000:18:00.0");
  AddProcess(gpu0, 31002, 1 * kGiB);
  AddProcess(gpu0, 31001, 2 * kGiB);
  AddProcess(AddDevice(report, "nvidia", "0000:28:00.0"), 31003);
  Collect(Fixture("procs-slurm-v1"), report);

  const v1::DeviceTelemetry& d0 = report.devices(0);
  EXPECT_EQ(Pids(d0), (std::vector<uint32_t>{31001, 31002})) << "processes ascending";
  EXPECT_EQ(d0.processes(0).user(), "root");
  EXPECT_EQ(d0.processes(0).command(), "python3");
  ASSERT_EQ(d0.holders_size(), 1) << "two tasks of one step: one holder";
  const v1::DeviceHolder& h = d0.holders(0);
  EXPECT_EQ(h.kind(), v1::HOLDER_KIND_SLURM);
  EXPECT_EQ(h.job(), "4711");
  EXPECT_EQ(h.step(), "0");
  EXPECT_EQ(h.user(), "root");
  EXPECT_EQ(h.command(), "python3");
  EXPECT_EQ(Pids(h), (std::vector<uint32_t>{31001, 31002}));
  EXPECT_EQ(h.memory_used_bytes(), 3 * kGiB);
  EXPECT_TRUE(h.pod().empty() && h.rank().empty() && !h.has_world_size());

  ASSERT_EQ(report.devices(1).holders_size(), 1);
  const v1::DeviceHolder& batch = report.devices(1).holders(0);
  EXPECT_EQ(batch.job(), "4712");
  EXPECT_EQ(batch.step(), "batch");
  EXPECT_EQ(batch.user(), kNoNameUid) << "a uid without a name is its number";
  EXPECT_EQ(batch.command(), "train.sh");
  EXPECT_FALSE(batch.has_memory_used_bytes()) << "no process with known memory: absent, not 0";
}

TEST(ProcessesCollector, SlurmV2StepsAreSeparateHolders) {
  v1::NodeReport report;
  v1::DeviceTelemetry& gpu = AddDevice(report, "nvidia", "0000:18:00.0");
  for (uint32_t pid : {32004u, 32003u, 32002u, 32001u}) AddProcess(gpu, pid, kGiB);
  Collect(Fixture("procs-slurm-v2"), report);
  ASSERT_EQ(gpu.holders_size(), 4);
  std::vector<std::tuple<std::string, std::string, std::string, uint32_t>> got;
  for (const auto& h : gpu.holders()) {
    EXPECT_EQ(h.kind(), v1::HOLDER_KIND_SLURM);
    ASSERT_EQ(h.pids_size(), 1);
    got.emplace_back(h.job(), h.step(), h.command(), h.pids(0));
  }
  using T = std::tuple<std::string, std::string, std::string, uint32_t>;
  EXPECT_EQ(got, (std::vector<T>{{"5001", "0", "python3", 32001},
                                 {"5001", "batch", "torchrun", 32002},
                                 {"5001", "extern", "nvidia-smi", 32003},
                                 {"5002", "interactive", "jupyter-lab", 32004}}));
}

TEST(ProcessesCollector, PlainProcessesGroupByUserWithTheirPushedJobAndVanishedPidsAreSkipped) {
  v1::NodeReport report;
  v1::DeviceTelemetry& gpu = AddDevice(report, "nvidia", "0000:18:00.0");
  AddProcess(gpu, 33999, 5 * kGiB);  // listed by the driver, gone from /proc since
  AddProcess(gpu, 33003, 2 * kGiB);
  AddProcess(gpu, 33002);
  v1::ProcessMemory& pushed = AddProcess(gpu, 33001, 1 * kGiB);
  pushed.set_job("llm-7");
  pushed.set_rank("3");
  pushed.set_world_size(8);
  Collect(Fixture("procs-plain"), report);

  ASSERT_EQ(gpu.holders_size(), 2);
  const v1::DeviceHolder& root = gpu.holders(1).user() == "root" ? gpu.holders(1) : gpu.holders(0);
  const v1::DeviceHolder& other = &root == &gpu.holders(0) ? gpu.holders(1) : gpu.holders(0);
  EXPECT_EQ(root.kind(), v1::HOLDER_KIND_PROCESS);
  EXPECT_EQ(root.user(), "root");
  EXPECT_EQ(Pids(root), (std::vector<uint32_t>{33001, 33003}));
  EXPECT_EQ(root.memory_used_bytes(), 3 * kGiB) << "the vanished pid's memory is not counted";
  EXPECT_EQ(root.job(), "llm-7") << "not Slurm: the job the training process pushed";
  EXPECT_EQ(root.rank(), "3");
  EXPECT_EQ(root.world_size(), 8u);
  EXPECT_EQ(root.command(), "jupyter-lab");
  EXPECT_TRUE(root.step().empty());
  EXPECT_EQ(other.user(), kNoNameUid);
  EXPECT_EQ(Pids(other), (std::vector<uint32_t>{33002}));
  EXPECT_TRUE(other.job().empty());
  EXPECT_FALSE(other.has_memory_used_bytes());

  EXPECT_EQ(Pids(gpu), (std::vector<uint32_t>{33001, 33002, 33003, 33999}))
      << "the driver's entry stays; only the holders leave the vanished pid out";
  EXPECT_TRUE(gpu.processes(3).user().empty() && gpu.processes(3).command().empty());
}

TEST(ProcessesCollector, PidListedByTheDriverAndPushedIsOneEntry) {
  v1::NodeReport report;
  v1::DeviceTelemetry& gpu = AddDevice(report, "nvidia", "0000:18:00.0");
  AddProcess(gpu, 33001, 4 * kGiB);
  v1::ProcessMemory& pushed = AddProcess(gpu, 33001);
  pushed.set_job("llm-7");
  pushed.set_reserved_bytes(3 * kGiB);
  Collect(Fixture("procs-plain"), report);
  ASSERT_EQ(gpu.processes_size(), 1);
  EXPECT_EQ(gpu.processes(0).used_bytes(), 4 * kGiB);
  EXPECT_EQ(gpu.processes(0).reserved_bytes(), 3 * kGiB);
  EXPECT_EQ(gpu.processes(0).job(), "llm-7");
  ASSERT_EQ(gpu.holders_size(), 1);
  EXPECT_EQ(Pids(gpu.holders(0)), (std::vector<uint32_t>{33001}));
}

TEST(ProcessesCollector, AmdgpuClientsFromFdinfoCountedOncePerClientOnTheirDevice) {
  v1::NodeReport report;
  AddDevice(report, "amd", "0000:c1:00.0");
  AddDevice(report, "amd", "0000:c2:00.0");
  AddDevice(report, "amd", "0000:c3:00.0");  // nobody opened it
  Collect(Fixture("procs-amdgpu-fdinfo"), report);

  const v1::DeviceTelemetry& c1 = report.devices(0);
  ASSERT_EQ(Pids(c1), (std::vector<uint32_t>{34001, 34002}))
      << "the i915 client of 34003 is not an amdgpu device's";
  EXPECT_EQ(c1.processes(0).used_bytes(), 1048576 * kKiB) << "fds 3 and 4 are one client (17)";
  EXPECT_EQ(c1.processes(1).used_bytes(), (524288 + 1024) * kKiB) << "two clients of one process";
  EXPECT_EQ(c1.processes(1).command(), "ollama");
  ASSERT_EQ(c1.holders_size(), 2);
  EXPECT_EQ(c1.holders(0).kind(), v1::HOLDER_KIND_SLURM);
  EXPECT_EQ(c1.holders(0).job(), "6001");
  EXPECT_EQ(c1.holders(0).memory_used_bytes(), 1048576 * kKiB);
  EXPECT_EQ(c1.holders(1).kind(), v1::HOLDER_KIND_PROCESS);
  EXPECT_EQ(c1.holders(1).user(), kNoNameUid);

  const v1::DeviceTelemetry& c2 = report.devices(1);
  ASSERT_EQ(Pids(c2), (std::vector<uint32_t>{34001}));
  EXPECT_EQ(c2.processes(0).used_bytes(), 2048 * kKiB);
  EXPECT_TRUE(report.devices(2).processes().empty());
  EXPECT_TRUE(report.devices(2).holders().empty()) << "no processes: no holders";
}

TEST(ProcessesCollector, NvidiaDevicesAloneNeverWalkFdinfo) {
  v1::NodeReport report;
  AddDevice(report, "nvidia", "0000:c1:00.0");  // the amdgpu fixture's pdev, but not amd
  Collect(Fixture("procs-amdgpu-fdinfo"), report);
  EXPECT_TRUE(report.devices(0).processes().empty());
}

TEST(ProcessesCollector, DeviceWithHoldersKeepsThemAndGetsOnlyTheNewPids) {
  v1::NodeReport report;
  v1::DeviceTelemetry& gpu = AddDevice(report, "sim", "0000:18:00.0");
  v1::DeviceHolder& sim = *gpu.add_holders();
  sim.set_kind(v1::HOLDER_KIND_SLURM);
  sim.set_job("sim-job");
  sim.add_pids(31001);
  AddProcess(gpu, 31001, kGiB);
  {
    v1::NodeReport copy = report;
    Collect(Fixture("procs-slurm-v1"), copy);
    ASSERT_EQ(copy.devices(0).holders_size(), 1) << "nothing to add: left as it was";
    EXPECT_EQ(copy.devices(0).holders(0).job(), "sim-job");
  }
  AddProcess(gpu, 31003, kGiB);
  Collect(Fixture("procs-slurm-v1"), report);
  EXPECT_TRUE(gpu.processes(0).user().empty() && gpu.processes(0).command().empty())
      << "a held pid is its holder's maker's (a simulated pid means nothing in /proc)";
  EXPECT_EQ(gpu.processes(1).command(), "train.sh");
  ASSERT_EQ(gpu.holders_size(), 2);
  EXPECT_EQ(gpu.holders(0).job(), "sim-job");
  EXPECT_EQ(Pids(gpu.holders(1)), (std::vector<uint32_t>{31003}));
  EXPECT_EQ(gpu.holders(1).job(), "4712");
}

TEST(ProcessesCollector, CapKeepsPushingProcessesThenTheLargestAndHoldersCountAllMemory) {
  v1::NodeReport report;
  v1::DeviceTelemetry& gpu = AddDevice(report, "nvidia", "0000:18:00.0");
  AddProcess(gpu, 31001, 1 * kGiB);
  AddProcess(gpu, 31002, 4 * kGiB);
  AddProcess(gpu, 31003, 3 * kGiB);
  AddProcess(gpu, 31004, 2 * kGiB).set_job("pushing");  // not in the fixture: gone
  AddProcess(gpu, 31005, 5 * kGiB);                     // gone too
  Collect(Fixture("procs-slurm-v1"), report, {.max_per_device = 2});
  EXPECT_EQ(Pids(gpu), (std::vector<uint32_t>{31004, 31005}))
      << "the pushing process, then the most memory; ascending";
  ASSERT_EQ(gpu.holders_size(), 2);
  EXPECT_EQ(Pids(gpu.holders(0)), (std::vector<uint32_t>{31001, 31002}))
      << "job 4711 step 0: capped at 2 pids";
  EXPECT_EQ(gpu.holders(0).memory_used_bytes(), 5 * kGiB);
  EXPECT_EQ(Pids(gpu.holders(1)), (std::vector<uint32_t>{31003}));
}

class ProcessesCollectorTree : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = testing::MakeTempDir("accelmon-procs");
    fs::copy(kFixtures + "/procs-plain/proc", root_ + "/proc", fs::copy_options::recursive);
  }
  void TearDown() override { fs::remove_all(root_); }
  PathResolver paths() const { return PathResolver(root_ + "/proc", root_ + "/sys"); }
  void Write(const std::string& relative, const std::string& text) {
    std::ofstream(root_ + "/proc/" + relative) << text;
  }
  std::string root_;
};

TEST_F(ProcessesCollectorTree, UnreadableFileLeavesItsFieldAbsentAndIsLoggedOnce) {
  // A directory where status should be: read(2) fails (EISDIR) even for root, as EACCES would
  // for an agent that is not root.
  fs::remove(root_ + "/proc/33001/status");
  fs::create_directory(root_ + "/proc/33001/status");
  std::ostringstream log;
  auto previous = spdlog::default_logger();
  spdlog::set_default_logger(std::make_shared<spdlog::logger>(
      "capture", std::make_shared<spdlog::sinks::ostream_sink_mt>(log)));
  ProcessesCollector collector(paths(), {});
  for (int tick = 0; tick < 3; ++tick) {
    v1::NodeReport report;
    AddProcess(AddDevice(report, "nvidia", "0000:18:00.0"), 33001, kGiB);
    collector.Collect(report);
    const v1::DeviceTelemetry& gpu = report.devices(0);
    ASSERT_EQ(gpu.holders_size(), 1) << "still on the device, with what could be read";
    EXPECT_TRUE(gpu.holders(0).user().empty()) << "unknown user: absent";
    EXPECT_EQ(gpu.holders(0).command(), "jupyter-lab");
    EXPECT_EQ(gpu.holders(0).memory_used_bytes(), kGiB);
  }
  spdlog::set_default_logger(previous);
  const std::string text = log.str();
  EXPECT_NE(text.find("33001/status"), std::string::npos) << text;
  EXPECT_EQ(text.find("33001/status"), text.rfind("33001/status")) << "said once: " << text;
}

TEST_F(ProcessesCollectorTree, ProcessIsReadOnceAndAgainAfterRereadAfter) {
  auto tick = [](ProcessesCollector& c) {
    v1::NodeReport report;
    AddProcess(AddDevice(report, "nvidia", "0000:18:00.0"), 33002);
    c.Collect(report);
    return report.devices(0).holders(0).command();
  };
  ProcessesCollector cached(paths(), {.max_per_device = 64, .reread_after = std::chrono::hours(1)});
  ProcessesCollector every_tick(paths(), {.max_per_device = 64, .reread_after = {}});
  EXPECT_EQ(tick(cached), "ollama");
  EXPECT_EQ(tick(every_tick), "ollama");
  Write("33002/comm", "ollama-runner\n");
  EXPECT_EQ(tick(cached), "ollama") << "kept from the first read";
  EXPECT_EQ(tick(every_tick), "ollama-runner");
}

TEST_F(ProcessesCollectorTree, PidThatLeftAndCameBackIsReadAgain) {
  ProcessesCollector collector(paths(),
                               {.max_per_device = 64, .reread_after = std::chrono::hours(1)});
  auto tick = [&](bool on_device) {
    v1::NodeReport report;
    v1::DeviceTelemetry& gpu = AddDevice(report, "nvidia", "0000:18:00.0");
    if (on_device) AddProcess(gpu, 33002);
    collector.Collect(report);
    return gpu.holders().empty() ? std::string() : gpu.holders(0).command();
  };
  EXPECT_EQ(tick(true), "ollama");
  EXPECT_EQ(tick(false), "");
  Write("33002/comm", "llama-server\n");  // a new process with the same pid
  EXPECT_EQ(tick(true), "llama-server");
}

class AmdgpuTree : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = testing::MakeTempDir("accelmon-amdgpu-procs");
    fs::copy(kFixtures + "/procs-amdgpu-fdinfo/proc", root_ + "/proc",
             fs::copy_options::recursive | fs::copy_options::copy_symlinks);
  }
  void TearDown() override { fs::remove_all(root_); }
  PathResolver paths() const { return PathResolver(root_ + "/proc", root_ + "/sys"); }
  std::string root_;
};

// The amdgpu device of the fixture and what each tick found on it: pid -> used bytes.
std::map<uint32_t, uint64_t> AmdgpuTick(ProcessesCollector& collector) {
  v1::NodeReport report;
  AddDevice(report, "amd", "0000:c1:00.0");
  collector.Collect(report);
  std::map<uint32_t, uint64_t> out;
  for (const auto& p : report.devices(0).processes()) out[p.pid()] = p.used_bytes();
  return out;
}

TEST_F(AmdgpuTree, FdinfoIsReadEveryTickAndNewFdsAtTheNextRescan) {
  ProcessesCollector collector(paths(), {.fd_rescan_after = std::chrono::hours(1)});
  ASSERT_EQ(AmdgpuTick(collector).size(), 2u);
  // The fixture's 34001 allocates more VRAM, and 34003 opens the amdgpu GPU too.
  std::ofstream(root_ + "/proc/34001/fdinfo/3")
      << "drm-driver:\tamdgpu\ndrm-client-id:\t17\ndrm-pdev:\t0000:c1:00.0\n"
         "drm-memory-vram:\t2097152 KiB\n";
  fs::create_symlink("/dev/dri/renderD128", root_ + "/proc/34003/fd/9");
  std::ofstream(root_ + "/proc/34003/fdinfo/9")
      << "drm-driver:\tamdgpu\ndrm-client-id:\t40\ndrm-pdev:\t0000:c1:00.0\n"
         "drm-memory-vram:\t1024 KiB\n";
  auto found = AmdgpuTick(collector);
  EXPECT_EQ(found[34001], 2097152 * kKiB) << "a known fd's fdinfo is read every tick";
  EXPECT_FALSE(found.contains(34003)) << "the fds of every process are walked once an hour here";

  ProcessesCollector rescanning(paths(), {.fd_rescan_after = {}});
  found = AmdgpuTick(rescanning);
  EXPECT_EQ(found[34003], 1024 * kKiB);
  for (const char* fd : {"3", "4"}) {  // 34001 closes its amdgpu client
    fs::remove(root_ + "/proc/34001/fd/" + fd);
    fs::remove(root_ + "/proc/34001/fdinfo/" + fd);
  }
  EXPECT_FALSE(AmdgpuTick(collector).contains(34001)) << "a closed fd is gone at the next tick";
}

// ---- NVML's process list through the fake library, as the agent runs it ---------------------

TEST(ProcessesEndToEnd, NvmlPidsGetTheirSlurmJobFromTheFixtureProc) {
  const SharedLibrary& fake = testing::FakeNvmlLibrary(FAKE_NVML_PATH);
  ASSERT_TRUE(fake.loaded()) << fake.error();
  auto reset = fake.Function<void (*)()>("fake_nvml_reset");
  auto add_process = fake.Function<void (*)(int, const char*, unsigned, unsigned long long)>(
      "fake_nvml_add_process");
  ASSERT_NE(reset, nullptr);
  ASSERT_NE(add_process, nullptr);
  reset();
  add_process(0, "compute", 31001, 2 * kGiB);
  add_process(0, "compute", 31002, 1 * kGiB);
  add_process(1, "graphics", 31003, NVML_VALUE_NOT_AVAILABLE);

  CollectorConfig config{.paths = Fixture("procs-slurm-v1")};
  for (const auto& info : HostCollectors()) config.host_collectors[std::string(info.name)] = false;
  config.devices = true;
  config.nvml_library = FAKE_NVML_PATH;
  config.dcmi_library = "/nonexistent/libdcmi.so";
  CollectorSet set(CreateCollectors(config));
  v1::NodeReport report;
  report.mutable_timestamp()->set_seconds(1'700'000'000);
  set.CollectAll(report);
  reset();

  std::vector<std::string> ran;
  for (const auto& c : report.collectors()) {
    EXPECT_TRUE(c.success()) << c.name() << ": " << c.error();
    ran.push_back(c.name());
  }
  EXPECT_EQ(ran, (std::vector<std::string>{"nvml", "processes"})) << "processes after devices";
  ASSERT_EQ(report.devices_size(), 2);
  const v1::DeviceTelemetry& gpu0 = report.devices(0);
  ASSERT_EQ(gpu0.holders_size(), 1);
  EXPECT_EQ(gpu0.holders(0).kind(), v1::HOLDER_KIND_SLURM);
  EXPECT_EQ(gpu0.holders(0).job(), "4711");
  EXPECT_EQ(gpu0.holders(0).step(), "0");
  EXPECT_EQ(Pids(gpu0.holders(0)), (std::vector<uint32_t>{31001, 31002}));
  EXPECT_EQ(gpu0.holders(0).memory_used_bytes(), 3 * kGiB);
  EXPECT_EQ(gpu0.processes(0).command(), "python3");
  const v1::DeviceTelemetry& gpu1 = report.devices(1);
  ASSERT_EQ(gpu1.holders_size(), 1);
  EXPECT_EQ(gpu1.holders(0).job(), "4712");
  EXPECT_EQ(gpu1.holders(0).step(), "batch");
  EXPECT_FALSE(gpu1.holders(0).has_memory_used_bytes());
}

TEST(ProcessesEndToEnd, OffWithNoCollectorProcessesAndWithoutDevices) {
  CollectorConfig config{.paths = Fixture("procs-slurm-v1")};
  for (const auto& info : HostCollectors()) config.host_collectors[std::string(info.name)] = false;
  EXPECT_TRUE(CreateCollectors(config).empty()) << "no device can be there: not created";
  config.sim_devices = 1;
  EXPECT_EQ(CreateCollectors(config).back()->name(), "processes");
  config.processes = false;
  EXPECT_EQ(CreateCollectors(config).back()->name(), "sim");
}

}  // namespace
}  // namespace processes_test
}  // namespace accelmon::collectors
