// The allocator push table (validation, bounds, expiry) and the fragmentation derived from it.
#include "collectors/push.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

namespace accelmon::collectors {
namespace push_test {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

constexpr uint64_t kGiB = 1ULL << 30;
const PushStore::SteadyClock::time_point kT0{std::chrono::hours(1000)};

v1::ProcessMemory Process(uint32_t pid, uint64_t reserved, uint64_t allocated, uint64_t largest) {
  v1::ProcessMemory p;
  p.set_pid(pid);
  p.set_reserved_bytes(reserved);
  p.set_allocated_bytes(allocated);
  p.set_largest_free_block_bytes(largest);
  return p;
}

v1::DeviceTelemetry Device(uint64_t free, std::vector<v1::ProcessMemory> processes) {
  v1::DeviceTelemetry d;
  d.mutable_memory()->set_free_bytes(free);
  for (auto& p : processes) *d.add_processes() = std::move(p);
  return d;
}

// Worked by hand: largest = max(largest cached block, device free);
// fragmentation = 1 - largest / (device free + sum(reserved - allocated)).
TEST(DeriveFragmentation, DeviceFreeIsTheLargestBlock) {
  // 10 GiB free on the device, 10 GiB cached by the process in blocks of at most 4 GiB.
  auto d = Device(10 * kGiB, {Process(1, 30 * kGiB, 20 * kGiB, 4 * kGiB)});
  DeriveFragmentation(d);
  EXPECT_EQ(d.memory().largest_free_block_bytes(), 10 * kGiB);
  EXPECT_DOUBLE_EQ(d.memory().fragmentation_ratio(), 1 - 10.0 / 20);  // 0.5
}

TEST(DeriveFragmentation, ACachedBlockIsTheLargest) {
  // 2 GiB free; the process caches 20 GiB, the largest piece 12 GiB.
  auto d = Device(2 * kGiB, {Process(1, 40 * kGiB, 20 * kGiB, 12 * kGiB)});
  DeriveFragmentation(d);
  EXPECT_EQ(d.memory().largest_free_block_bytes(), 12 * kGiB);
  EXPECT_DOUBLE_EQ(d.memory().fragmentation_ratio(), 1 - 12.0 / 22);  // 10/22
}

TEST(DeriveFragmentation, CachesOfAllProcessesCount) {
  // 6 GiB free; one process caches 6 GiB (largest 3), the other caches nothing.
  auto d = Device(6 * kGiB,
                  {Process(1, 10 * kGiB, 4 * kGiB, 3 * kGiB), Process(2, 8 * kGiB, 8 * kGiB, 0)});
  DeriveFragmentation(d);
  EXPECT_EQ(d.memory().largest_free_block_bytes(), 6 * kGiB);
  EXPECT_DOUBLE_EQ(d.memory().fragmentation_ratio(), 0.5);  // 1 - 6 / (6 + 6 + 0)
}

TEST(DeriveFragmentation, UnfragmentedAndNothingFree) {
  auto clean = Device(10 * kGiB, {Process(1, 10 * kGiB, 10 * kGiB, 0)});
  DeriveFragmentation(clean);
  EXPECT_EQ(clean.memory().largest_free_block_bytes(), 10 * kGiB);
  EXPECT_EQ(clean.memory().fragmentation_ratio(), 0.0);

  auto full = Device(0, {Process(1, 10 * kGiB, 10 * kGiB, 0)});
  DeriveFragmentation(full);
  EXPECT_EQ(full.memory().largest_free_block_bytes(), 0u);
  EXPECT_EQ(full.memory().fragmentation_ratio(), 0.0) << "nothing free, nothing fragmented";
}

TEST(DeriveFragmentation, AbsentWhenNothingPushed) {
  v1::DeviceTelemetry real;  // a real device's collector reports no fragmentation
  real.mutable_memory()->set_free_bytes(10 * kGiB);
  DeriveFragmentation(real);
  EXPECT_FALSE(real.memory().has_largest_free_block_bytes());
  EXPECT_FALSE(real.memory().has_fragmentation_ratio());

  v1::DeviceTelemetry sim;  // the simulator sets its own: kept
  sim.mutable_memory()->set_fragmentation_ratio(0.3);
  DeriveFragmentation(sim);
  EXPECT_EQ(sim.memory().fragmentation_ratio(), 0.3);
}

v1::NodeReport TwoDevices() {
  v1::NodeReport r;
  auto* a = r.add_devices();
  a->mutable_identity()->set_uuid("GPU-a");
  a->mutable_identity()->set_index(0);
  a->mutable_memory()->set_free_bytes(10 * kGiB);
  auto* b = r.add_devices();  // no uuid: matched by index
  b->mutable_identity()->set_index(1);
  b->mutable_memory()->set_free_bytes(4 * kGiB);
  return r;
}

v1::AllocatorStats Push(uint32_t pid, const std::string& uuid) {
  v1::AllocatorStats s;
  s.set_pid(pid);
  s.set_job("job-1");
  s.set_rank("0");
  s.set_device_uuid(uuid);
  s.set_reserved_bytes(30 * kGiB);
  s.set_allocated_bytes(20 * kGiB);
  s.set_largest_free_block_bytes(4 * kGiB);
  return s;
}

// A procfs of its own: /proc/<pid> exists for the pids the test says are alive.
class FakeProcfs {
 public:
  FakeProcfs()
      : root_(fs::temp_directory_path() / ("accelmon_push_test_" + std::to_string(getpid()))) {
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  ~FakeProcfs() { fs::remove_all(root_); }
  void Start(uint32_t pid) { fs::create_directory(root_ / std::to_string(pid)); }
  void Exit(uint32_t pid) { fs::remove(root_ / std::to_string(pid)); }
  std::string path() const { return root_.string(); }

 private:
  fs::path root_;
};

TEST(PushStore, RefusesWithAReason) {
  FakeProcfs procfs;
  PushStore store({.max_processes_per_device = 64, .expire_after = 30s, .procfs = procfs.path()});
  EXPECT_EQ(store.Accept(Push(7, "GPU-a"), kT0), "unknown_device") << "before the first report";
  store.SetKnownDevices(TwoDevices());

  const std::vector<std::pair<std::string, std::function<void(v1::AllocatorStats&)>>> cases = {
      {"missing_pid", [](auto& s) { s.set_pid(0); }},
      {"missing_device", [](auto& s) { s.clear_device_uuid(); }},
      {"unknown_device", [](auto& s) { s.set_device_uuid("GPU-z"); }},
      {"unknown_device",
       [](auto& s) {
         s.clear_device_uuid();
         s.set_device_index(5);
       }},
      {"allocated_exceeds_reserved", [](auto& s) { s.set_allocated_bytes(31 * kGiB); }},
      {"largest_free_block_exceeds_reserved",
       [](auto& s) { s.set_largest_free_block_bytes(31 * kGiB); }},
      {"label_too_long", [](auto& s) { s.set_job(std::string(129, 'j')); }},
      {"label_too_long", [](auto& s) { s.set_rank(std::string(129, 'r')); }},
  };
  for (const auto& [reason, change] : cases) {
    auto s = Push(7, "GPU-a");
    change(s);
    EXPECT_EQ(store.Accept(s, kT0), reason);
  }
  const auto rejected = store.rejected();
  EXPECT_EQ(rejected.at("unknown_device"), 3u);
  EXPECT_EQ(rejected.at("missing_pid"), 1u);
  EXPECT_EQ(rejected.at("label_too_long"), 2u);
  EXPECT_EQ(rejected.at("too_many_processes"), 0u) << "every reason is there from the start";
  EXPECT_TRUE(store.Collect(kT0).empty()) << "nothing refused is kept";

  // Equal values are fine, and unset ones are not compared.
  auto edge = Push(7, "GPU-a");
  edge.set_allocated_bytes(30 * kGiB);
  edge.set_largest_free_block_bytes(30 * kGiB);
  EXPECT_EQ(store.Accept(edge, kT0), "");
  auto sparse = Push(8, "GPU-a");
  sparse.clear_reserved_bytes();
  EXPECT_EQ(store.Accept(sparse, kT0), "");
}

TEST(PushStore, BoundedPerDevice) {
  FakeProcfs procfs;
  for (uint32_t pid : {1, 2, 3}) procfs.Start(pid);
  PushStore store({.max_processes_per_device = 2, .expire_after = 30s, .procfs = procfs.path()});
  store.SetKnownDevices(TwoDevices());
  EXPECT_EQ(store.Accept(Push(1, "GPU-a"), kT0), "");
  EXPECT_EQ(store.Accept(Push(2, "GPU-a"), kT0), "");
  EXPECT_EQ(store.Accept(Push(3, "GPU-a"), kT0 + 10s), "too_many_processes");
  EXPECT_EQ(store.Accept(Push(1, "GPU-a"), kT0 + 10s), "") << "a known process may update";
  auto other_device = Push(3, "");
  other_device.set_device_index(1);
  EXPECT_EQ(store.Accept(other_device, kT0 + 10s), "") << "the bound is per device";
  // Once pid 2 is stale (30 s without a push) it no longer takes a place.
  EXPECT_EQ(store.Accept(Push(3, "GPU-a"), kT0 + 31s), "");
  EXPECT_EQ(store.Accept(Push(2, "GPU-a"), kT0 + 32s), "too_many_processes");
  EXPECT_EQ(store.rejected().at("too_many_processes"), 2u);
}

TEST(PushStore, ExpiresByTime) {
  FakeProcfs procfs;
  procfs.Start(7);
  PushStore store({.max_processes_per_device = 64, .expire_after = 30s, .procfs = procfs.path()});
  store.SetKnownDevices(TwoDevices());
  ASSERT_EQ(store.Accept(Push(7, "GPU-a"), kT0), "");
  EXPECT_EQ(store.Collect(kT0 + 30s).at("GPU-a").size(), 1u);
  ASSERT_EQ(store.Accept(Push(7, "GPU-a"), kT0 + 20s), "") << "a new push renews it";
  EXPECT_EQ(store.Collect(kT0 + 50s).at("GPU-a").size(), 1u);
  EXPECT_TRUE(store.Collect(kT0 + 51s).empty());
}

TEST(PushStore, ExpiresWhenTheProcessIsGone) {
  FakeProcfs procfs;
  procfs.Start(7);
  procfs.Start(8);
  PushStore store({.max_processes_per_device = 64, .expire_after = 30s, .procfs = procfs.path()});
  store.SetKnownDevices(TwoDevices());
  ASSERT_EQ(store.Accept(Push(7, "GPU-a"), kT0), "");
  ASSERT_EQ(store.Accept(Push(8, "GPU-a"), kT0), "");
  EXPECT_EQ(store.Collect(kT0 + 1s).at("GPU-a").size(), 2u);
  procfs.Exit(7);
  const auto left = store.Collect(kT0 + 2s).at("GPU-a");
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].pid(), 8u);
}

TEST(PushCollector, AttachesMatchedByUuidElseIndexAndDerives) {
  FakeProcfs procfs;
  for (uint32_t pid : {7, 8, 9}) procfs.Start(pid);
  PushStore store({.max_processes_per_device = 64, .expire_after = 30s, .procfs = procfs.path()});
  PushCollector collector(store);
  v1::NodeReport first = TwoDevices();
  collector.Collect(first);  // learns the devices
  EXPECT_EQ(first.devices(0).processes_size(), 0);
  EXPECT_FALSE(first.devices(0).memory().has_fragmentation_ratio());

  const auto now = PushStore::SteadyClock::now();
  ASSERT_EQ(store.Accept(Push(8, "GPU-a"), now), "");
  auto by_index = Push(9, "");  // device 0 by index: the uuid device
  by_index.set_device_index(0);
  by_index.set_reserved_bytes(2 * kGiB);
  by_index.set_allocated_bytes(2 * kGiB);
  by_index.set_largest_free_block_bytes(0);
  ASSERT_EQ(store.Accept(by_index, now), "");
  auto bad = Push(7, "GPU-zzz");
  EXPECT_EQ(store.Accept(bad, now), "unknown_device");

  v1::NodeReport r = TwoDevices();
  collector.Collect(r);
  const auto& a = r.devices(0);
  ASSERT_EQ(a.processes_size(), 2);
  EXPECT_EQ(a.processes(0).pid(), 8u);
  EXPECT_EQ(a.processes(0).job(), "job-1");
  EXPECT_EQ(a.processes(0).reserved_bytes(), 30 * kGiB);
  EXPECT_EQ(a.processes(1).pid(), 9u);
  // free 10, cached 10 + 0, largest max(4, 0, 10) = 10.
  EXPECT_EQ(a.memory().largest_free_block_bytes(), 10 * kGiB);
  EXPECT_DOUBLE_EQ(a.memory().fragmentation_ratio(), 0.5);
  const auto& b = r.devices(1);
  EXPECT_EQ(b.processes_size(), 0);
  EXPECT_FALSE(b.memory().has_largest_free_block_bytes()) << "nothing pushed: absent";
  EXPECT_FALSE(b.memory().has_fragmentation_ratio());
  EXPECT_EQ(r.agent().push_rejected_total().at("unknown_device"), 1u);
  EXPECT_EQ(r.agent().push_rejected_total().at("missing_pid"), 0u);
}

TEST(PushCollector, MergesIntoTheProcessTheDriverListedByPid) {
  FakeProcfs procfs;
  for (uint32_t pid : {8, 9}) procfs.Start(pid);
  PushStore store({.max_processes_per_device = 64, .expire_after = 30s, .procfs = procfs.path()});
  PushCollector collector(store);
  v1::NodeReport first = TwoDevices();
  collector.Collect(first);  // learns the devices

  auto stats = Push(8, "GPU-a");
  stats.set_world_size(16);
  stats.set_steps_total(1200);
  const auto now = PushStore::SteadyClock::now();
  ASSERT_EQ(store.Accept(stats, now), "");
  ASSERT_EQ(store.Accept(Push(9, "GPU-a"), now), "");

  // NVML listed pid 8 with its driver memory (and another process, 5, that pushes nothing).
  v1::NodeReport r = TwoDevices();
  auto* listed = r.mutable_devices(0)->add_processes();
  listed->set_pid(8);
  listed->set_used_bytes(31 * kGiB);
  r.mutable_devices(0)->add_processes()->set_pid(5);
  collector.Collect(r);

  const auto& a = r.devices(0);
  ASSERT_EQ(a.processes_size(), 3) << "8 merged, 5 kept, 9 appended: no duplicate pid";
  const auto& merged = a.processes(0);
  EXPECT_EQ(merged.pid(), 8u);
  EXPECT_EQ(merged.used_bytes(), 31 * kGiB) << "the driver's accounting stays";
  EXPECT_EQ(merged.reserved_bytes(), 30 * kGiB) << "the push is added";
  EXPECT_EQ(merged.job(), "job-1");
  EXPECT_EQ(merged.rank(), "0");
  EXPECT_EQ(merged.world_size(), 16u);
  EXPECT_EQ(merged.steps_total(), 1200u);
  EXPECT_EQ(a.processes(1).pid(), 5u);
  EXPECT_FALSE(a.processes(1).has_reserved_bytes());
  EXPECT_EQ(a.processes(2).pid(), 9u);
  EXPECT_FALSE(a.processes(2).has_used_bytes()) << "not listed by the driver: absent";
  EXPECT_FALSE(a.processes(2).has_world_size()) << "not pushed: absent";
  EXPECT_FALSE(a.processes(2).has_steps_total());
}

TEST(PushCollector, AZeroWorldSizeIsAbsent) {
  FakeProcfs procfs;
  procfs.Start(8);
  PushStore store({.max_processes_per_device = 64, .expire_after = 30s, .procfs = procfs.path()});
  PushCollector collector(store);
  v1::NodeReport first = TwoDevices();
  collector.Collect(first);
  auto stats = Push(8, "GPU-a");
  stats.set_world_size(0);
  stats.set_steps_total(0);
  ASSERT_EQ(store.Accept(stats, PushStore::SteadyClock::now()), "");
  v1::NodeReport r = TwoDevices();
  collector.Collect(r);
  ASSERT_EQ(r.devices(0).processes_size(), 1);
  EXPECT_FALSE(r.devices(0).processes(0).has_world_size());
  EXPECT_TRUE(r.devices(0).processes(0).has_steps_total()) << "no step yet is a count of 0";
  EXPECT_EQ(r.devices(0).processes(0).steps_total(), 0u);
}

}  // namespace
}  // namespace push_test
}  // namespace accelmon::collectors
