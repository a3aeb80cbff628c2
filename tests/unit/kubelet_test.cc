// Kubernetes attribution without a kubelet: which device each device plugin's ids name, the POD
// holders added per (container, device), and the PROCESS holders folded into them.
#include "collectors/kubelet.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "k8s/podresources/v1/api.pb.h"

namespace accelmon::collectors {
namespace kubelet_test {
namespace {

v1::DeviceTelemetry* AddDevice(v1::NodeReport& r, const std::string& vendor, uint32_t index,
                               const std::string& uuid, const std::string& pci = "") {
  auto* d = r.add_devices();
  d->mutable_identity()->set_vendor(vendor);
  d->mutable_identity()->set_index(index);
  d->mutable_identity()->set_uuid(uuid);
  d->mutable_identity()->set_pci_bus_id(pci);
  return d;
}

// Two of each vendor, as their collectors name them.
v1::NodeReport MixedNode() {
  v1::NodeReport r;
  AddDevice(r, "nvidia", 0, "GPU-5f3c0000-1111-2222-3333-444455556666", "00000000:17:00.0");
  AddDevice(r, "nvidia", 1, "GPU-77aa0000-1111-2222-3333-444455556666", "00000000:65:00.0");
  AddDevice(r, "amd", 0, "amdgpu-0000:c1:00.0", "0000:c1:00.0");
  AddDevice(r, "amd", 1, "amdgpu-0000:c2:00.0", "0000:c2:00.0");
  AddDevice(r, "huawei", 0, "", "0000:c1:00.0");
  AddDevice(r, "huawei", 3, "", "0000:81:00.0");
  AddDevice(r, "sim", 0, "SIM-0123");
  // MIG device 1 of GPU 0: index 100 x (0 + 1) + 1 (collectors/nvml.cc).
  AddDevice(r, "nvidia", 101, "MIG-8d1e0000-1111-2222-3333-444455556666");
  return r;
}

TEST(KubeletDeviceIds, NvidiaByUuidMigUuidReplicaOrIndex) {
  const auto r = MixedNode();
  EXPECT_EQ(FindAssignedDevice(r, "nvidia.com/gpu", "GPU-77aa0000-1111-2222-3333-444455556666"), 1);
  EXPECT_EQ(FindAssignedDevice(r, "nvidia.com/gpu", "GPU-77AA0000-1111-2222-3333-444455556666"), 1)
      << "any case";
  EXPECT_EQ(
      FindAssignedDevice(r, "nvidia.com/mig-1g.10gb", "MIG-8d1e0000-1111-2222-3333-444455556666"),
      7);
  EXPECT_EQ(FindAssignedDevice(r, "nvidia.com/gpu", "GPU-5f3c0000-1111-2222-3333-444455556666::3"),
            0)
      << "a time-sliced replica is its GPU";
  EXPECT_EQ(FindAssignedDevice(r, "nvidia.com/gpu", "1"), 1) << "the index strategy";
  EXPECT_EQ(FindAssignedDevice(r, "nvidia.com/mig-1g.10gb", "0:1"), 7)
      << "the index strategy's GPU:SLOT for a MIG device";
  EXPECT_EQ(FindAssignedDevice(r, "nvidia.com/mig-1g.10gb", "0:2"), -1);
  EXPECT_EQ(FindAssignedDevice(r, "nvidia.com/mig-1g.10gb", "0:100"), -1) << "no such slot";
  EXPECT_EQ(FindAssignedDevice(r, "nvidia.com/mig-1g.10gb", "0:x"), -1);
  EXPECT_EQ(FindAssignedDevice(r, "nvidia.com/gpu", "9"), -1);
  EXPECT_EQ(FindAssignedDevice(r, "nvidia.com/gpu", "GPU-not-here"), -1);
  EXPECT_EQ(FindAssignedDevice(r, "nvidia.com/gpu", ""), -1);
}

TEST(KubeletDeviceIds, AmdByPciBusIdAnyCaseAndDomainWidth) {
  const auto r = MixedNode();
  EXPECT_EQ(FindAssignedDevice(r, "amd.com/gpu", "0000:c2:00.0"), 3);
  EXPECT_EQ(FindAssignedDevice(r, "amd.com/gpu", "0000:C2:00.0"), 3);
  EXPECT_EQ(FindAssignedDevice(r, "amd.com/gpu", "00000000:c1:00.0"), 2);
  EXPECT_EQ(FindAssignedDevice(r, "amd.com/gpu", "1"), 3) << "a plain number is the index";
  EXPECT_EQ(FindAssignedDevice(r, "amd.com/gpu", "0000:c3:00.0"), -1);
  EXPECT_EQ(FindAssignedDevice(r, "amd.com/gpu", "c1:00.0"), -1) << "no domain: not a bus id";
}

TEST(KubeletDeviceIds, AscendByTheIndexInItsName) {
  const auto r = MixedNode();
  EXPECT_EQ(FindAssignedDevice(r, "huawei.com/Ascend910", "Ascend910-3"), 5);
  EXPECT_EQ(FindAssignedDevice(r, "huawei.com/Ascend310P", "Ascend310P-0"), 4);
  EXPECT_EQ(FindAssignedDevice(r, "huawei.com/Ascend910", "Ascend910-7"), -1);
  EXPECT_EQ(FindAssignedDevice(r, "huawei.com/Ascend910", "Ascend910-2c-100-3"), -1)
      << "a virtual NPU is not one of our devices";
}

TEST(KubeletDeviceIds, OtherResourcesOnlyByUuid) {
  const auto r = MixedNode();
  EXPECT_EQ(FindAssignedDevice(r, "accelmon.io/sim", "SIM-0123"), 6);
  EXPECT_EQ(FindAssignedDevice(r, "example.com/fpga", "0"), -1)
      << "a number means nothing outside the vendors' own resources";
  EXPECT_EQ(FindAssignedDevice(r, "intel.com/sriov", "0000:c1:00.0"), -1)
      << "nor does a PCI address";
}

::v1::ContainerResources* AddContainer(::v1::ListPodResourcesResponse& pods, const std::string& ns,
                                       const std::string& pod, const std::string& container) {
  ::v1::PodResources* p = nullptr;
  for (auto& existing : *pods.mutable_pod_resources()) {
    if (existing.name() == pod && existing.namespace_() == ns) p = &existing;
  }
  if (p == nullptr) {
    p = pods.add_pod_resources();
    p->set_name(pod);
    p->set_namespace_(ns);
  }
  auto* c = p->add_containers();
  c->set_name(container);
  return c;
}

void Assign(::v1::ContainerResources& c, const std::string& resource,
            std::vector<std::string> ids) {
  auto* d = c.add_devices();
  d->set_resource_name(resource);
  for (auto& id : ids) d->add_device_ids(std::move(id));
}

TEST(AttributePods, OneHolderPerContainerAndDevice) {
  auto r = MixedNode();
  ::v1::ListPodResourcesResponse pods;
  auto* trainer = AddContainer(pods, "ml", "trainer-7", "pytorch");
  Assign(*trainer, "nvidia.com/gpu",
         {"GPU-5f3c0000-1111-2222-3333-444455556666", "GPU-77aa0000-1111-2222-3333-444455556666"});
  Assign(*trainer, "cpu", {"3"});  // not a device plugin of ours
  auto* sidecar = AddContainer(pods, "ml", "trainer-7", "sidecar");
  Assign(*sidecar, "example.com/nic", {"eth1"});
  auto* infer = AddContainer(pods, "serving", "infer-0", "server");
  Assign(*infer, "amd.com/gpu", {"0000:c1:00.0"});
  Assign(*infer, "huawei.com/Ascend910", {"Ascend910-3", "Ascend910-9"});

  EXPECT_EQ(AttributePods(pods, r), 4u);
  for (int d : {0, 1}) {
    ASSERT_EQ(r.devices(d).holders_size(), 1) << d;
    const auto& h = r.devices(d).holders(0);
    EXPECT_EQ(h.kind(), v1::HOLDER_KIND_POD);
    EXPECT_EQ(h.pod(), "trainer-7");
    EXPECT_EQ(h.namespace_(), "ml");
    EXPECT_EQ(h.container(), "pytorch");
    EXPECT_EQ(h.job(), "") << "unknown unless a process pushed it";
    EXPECT_TRUE(h.pids().empty());
    EXPECT_FALSE(h.has_memory_used_bytes());
  }
  ASSERT_EQ(r.devices(2).holders_size(), 1);
  EXPECT_EQ(r.devices(2).holders(0).pod(), "infer-0");
  EXPECT_EQ(r.devices(2).holders(0).container(), "server");
  ASSERT_EQ(r.devices(5).holders_size(), 1);
  EXPECT_EQ(r.devices(5).holders(0).namespace_(), "serving");
  for (int d : {3, 4, 6, 7}) EXPECT_EQ(r.devices(d).holders_size(), 0) << "unassigned: none";
}

TEST(AttributePods, SharedReplicasOfOneGpuAreOneHolderPerContainer) {
  auto r = MixedNode();
  ::v1::ListPodResourcesResponse pods;
  Assign(*AddContainer(pods, "a", "infer-a", "c"), "nvidia.com/gpu",
         {"GPU-5f3c0000-1111-2222-3333-444455556666::0",
          "GPU-5f3c0000-1111-2222-3333-444455556666::1"});
  Assign(*AddContainer(pods, "b", "infer-b", "c"), "nvidia.com/gpu",
         {"GPU-5f3c0000-1111-2222-3333-444455556666::2"});
  EXPECT_EQ(AttributePods(pods, r), 2u);
  ASSERT_EQ(r.devices(0).holders_size(), 2);
  EXPECT_EQ(r.devices(0).holders(0).pod(), "infer-a");
  EXPECT_EQ(r.devices(0).holders(1).pod(), "infer-b");
}

TEST(AttributePods, PodsPerDeviceAreCapped) {
  auto r = MixedNode();
  ::v1::ListPodResourcesResponse pods;
  for (size_t i = 0; i < kMaxPodHoldersPerDevice + 5; ++i) {
    Assign(*AddContainer(pods, "ns", "replica-" + std::to_string(i), "c"), "nvidia.com/gpu",
           {"GPU-5f3c0000-1111-2222-3333-444455556666::" + std::to_string(i)});
  }
  Assign(*AddContainer(pods, "ns", "other", "c"), "nvidia.com/gpu", {"1"});
  EXPECT_EQ(AttributePods(pods, r), kMaxPodHoldersPerDevice + 1);
  ASSERT_EQ(static_cast<size_t>(r.devices(0).holders_size()), kMaxPodHoldersPerDevice);
  EXPECT_EQ(r.devices(0).holders(0).pod(), "replica-0") << "the first ones are kept";
  EXPECT_EQ(r.devices(1).holders_size(), 1) << "the cap is per device";
}

v1::DeviceHolder ProcessHolder(const std::string& user, std::vector<uint32_t> pids, uint64_t memory,
                               const std::string& command) {
  v1::DeviceHolder h;
  h.set_kind(v1::HOLDER_KIND_PROCESS);
  h.set_user(user);
  for (uint32_t pid : pids) h.add_pids(pid);
  h.set_memory_used_bytes(memory);
  h.set_command(command);
  return h;
}

TEST(AttributePods, FoldsTheDevicesProcessHoldersIntoItsOnlyPod) {
  auto r = MixedNode();
  auto* gpu = r.mutable_devices(0);
  auto later = ProcessHolder("1000", {4100, 4102}, 3 << 20, "pt_data_worker");
  *gpu->add_holders() = later;
  auto first = ProcessHolder("trainer", {4001}, 40ULL << 30, "python3");
  first.set_job("run-4711");
  first.set_rank("3");
  first.set_world_size(32);
  *gpu->add_holders() = first;
  v1::DeviceHolder slurm;  // not a process holder: stays as it is
  slurm.set_kind(v1::HOLDER_KIND_SLURM);
  slurm.set_job("99");
  *gpu->add_holders() = slurm;

  ::v1::ListPodResourcesResponse pods;
  Assign(*AddContainer(pods, "ml", "trainer-7", "pytorch"), "nvidia.com/gpu", {"0"});
  EXPECT_EQ(AttributePods(pods, r), 1u);

  ASSERT_EQ(gpu->holders_size(), 2);
  EXPECT_EQ(gpu->holders(0).kind(), v1::HOLDER_KIND_SLURM);
  const auto& pod = gpu->holders(1);
  EXPECT_EQ(pod.kind(), v1::HOLDER_KIND_POD);
  EXPECT_EQ(pod.pod(), "trainer-7");
  EXPECT_EQ(std::vector<uint32_t>(pod.pids().begin(), pod.pids().end()),
            (std::vector<uint32_t>{4001, 4100, 4102}));
  EXPECT_EQ(pod.memory_used_bytes(), (40ULL << 30) + (3 << 20));
  EXPECT_EQ(pod.user(), "trainer") << "the user and command of the lowest pid";
  EXPECT_EQ(pod.command(), "python3");
  EXPECT_EQ(pod.job(), "run-4711");
  EXPECT_EQ(pod.rank(), "3");
  EXPECT_EQ(pod.world_size(), 32u);
}

TEST(AttributePods, PidsOfAFoldedPodAreCapped) {
  auto r = MixedNode();
  std::vector<uint32_t> many;
  for (uint32_t pid = 1000; pid < 1000 + 2 * kMaxPodHolderPids; ++pid) many.push_back(pid);
  *r.mutable_devices(0)->add_holders() =
      ProcessHolder("a", {many.begin(), many.begin() + kMaxPodHolderPids}, 1, "x");
  *r.mutable_devices(0)->add_holders() =
      ProcessHolder("b", {many.begin() + kMaxPodHolderPids, many.end()}, 1, "y");
  ::v1::ListPodResourcesResponse pods;
  Assign(*AddContainer(pods, "ml", "p", "c"), "nvidia.com/gpu", {"0"});
  AttributePods(pods, r);
  ASSERT_EQ(r.devices(0).holders_size(), 1);
  const auto& pids = r.devices(0).holders(0).pids();
  ASSERT_EQ(static_cast<size_t>(pids.size()), kMaxPodHolderPids);
  EXPECT_EQ(pids[0], 1000u);
  EXPECT_EQ(pids[pids.size() - 1], 1000u + kMaxPodHolderPids - 1) << "the lowest pids";
  EXPECT_FALSE(r.devices(0).holders(0).has_world_size());
}

TEST(AttributePods, SeveralPodsOnADeviceLeaveItsProcessHolders) {
  auto r = MixedNode();
  *r.mutable_devices(0)->add_holders() = ProcessHolder("u", {10}, 1, "python3");
  ::v1::ListPodResourcesResponse pods;
  Assign(*AddContainer(pods, "a", "infer-a", "c"), "nvidia.com/gpu",
         {"GPU-5f3c0000-1111-2222-3333-444455556666::0"});
  Assign(*AddContainer(pods, "b", "infer-b", "c"), "nvidia.com/gpu",
         {"GPU-5f3c0000-1111-2222-3333-444455556666::1"});
  AttributePods(pods, r);
  ASSERT_EQ(r.devices(0).holders_size(), 3) << "whose process it is is not known";
  EXPECT_EQ(r.devices(0).holders(0).kind(), v1::HOLDER_KIND_PROCESS);
  EXPECT_TRUE(r.devices(0).holders(1).pids().empty());
}

TEST(KubeletCollector, AbsentWithoutItsSocket) {
  KubeletCollector collector(
      {.socket =
           (std::filesystem::temp_directory_path() / "accelmon-no-such-kubelet.sock").string(),
       .timeout = std::chrono::milliseconds(100)});
  EXPECT_EQ(collector.name(), "kubelet");
  v1::NodeReport r = MixedNode();
  EXPECT_THROW(collector.Collect(r), SourceAbsent);
  EXPECT_THROW(collector.Collect(r), SourceAbsent) << "every tick, until it appears";
}

}  // namespace
}  // namespace kubelet_test
}  // namespace accelmon::collectors
