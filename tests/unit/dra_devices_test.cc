// DRA devices to our devices (collectors/dra_devices.h) over CDI spec files and proc/sys fixture
// trees: each way a driver names its device (device nodes of NVIDIA GPUs and MIG instances, AMD
// DRM nodes, Ascend NPUs, a uuid or PCI address in a variable or annotation), specs that change,
// go or do not parse, and pod uids from the kubelet's pod log directory.
#include "collectors/dra_devices.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "collectors/cdi_specs.h"
#include "collectors/kubelet.h"
#include "collectors/pod_uids.h"
#include "k8s/podresources/v1/api.pb.h"
#include "support/log_capture.h"
#include "support/temp_dir.h"

namespace accelmon::collectors {
namespace dra_devices_test {
namespace {

namespace fs = std::filesystem;
using accelmon::testing::LogCapture;

const std::string kFixtures = std::string(ACCELMON_FIXTURES_DIR) + "/dra";

void Write(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

v1::DeviceTelemetry& AddDevice(v1::NodeReport& r, const std::string& vendor, uint32_t index,
                               const std::string& uuid, const std::string& pci) {
  auto& d = *r.add_devices();
  d.mutable_identity()->set_vendor(vendor);
  d.mutable_identity()->set_index(index);
  d.mutable_identity()->set_uuid(uuid);
  d.mutable_identity()->set_pci_bus_id(pci);
  return d;
}

// The fake NVML node of tests/fixtures/dra: GPUs 0-3 at 18, 28, 38, 48; GPU 2's MIG instances
// (GI 1, CI 0) and (GI 2, CI 0) as the nvml collector reports them.
v1::NodeReport NvidiaNode() {
  v1::NodeReport r;
  for (uint32_t i = 0; i < 4; ++i) {
    char pci[32];
    std::snprintf(pci, sizeof pci, "00000000:%02X:00.0", 0x18 + 0x10 * i);
    AddDevice(r, "nvidia", i, "GPU-" + std::to_string(i), pci);
  }
  for (uint32_t gi = 1; gi <= 2; ++gi) {
    auto& d = AddDevice(r, "nvidia", 300 + gi - 1, "MIG-2-" + std::to_string(gi), "0000:38:00.0");
    auto& mig = *d.mutable_identity()->mutable_mig();
    mig.set_parent_uuid("GPU-2");
    mig.set_parent_index(2);
    mig.set_gpu_instance_id(gi);
    mig.set_compute_instance_id(0);
  }
  return r;
}

::v1::ClaimResource Resource(std::initializer_list<std::string> cdi_names) {
  ::v1::ClaimResource r;
  for (const auto& n : cdi_names) r.add_cdi_devices()->set_name(n);
  return r;
}

int Resolve(const DraDeviceResolver& resolver, const v1::NodeReport& report,
            std::initializer_list<std::string> cdi_names, std::string* why = nullptr) {
  std::string why_not;
  const int d = resolver.Resolve(report, Resource(cdi_names), why_not);
  if (why != nullptr) *why = why_not;
  return d;
}

TEST(CdiSpec, ParsesJsonAndYamlWithTheDevicesOwnEditsOnly) {
  const auto yaml = ParseCdiSpec(R"(cdiVersion: 0.5.0
kind: k8s.gpu.nvidia.com/claim
devices:
  - name: c-gpu-1
    containerEdits:
      deviceNodes: [{path: /dev/nvidia1}, {path: /dev/x, hostPath: /dev/nvidia9}]
      env: [A=GPU-1]
containerEdits:
  deviceNodes: [{path: /dev/nvidiactl}]
)",
                                 "a.yaml");
  ASSERT_EQ(yaml.size(), 1u);
  EXPECT_EQ(yaml[0].qualified_name, "k8s.gpu.nvidia.com/claim=c-gpu-1");
  EXPECT_EQ(yaml[0].device_nodes, (std::vector<std::string>{"/dev/nvidia1", "/dev/nvidia9"}))
      << "the host path where it differs; the spec-wide /dev/nvidiactl is no device's own";
  EXPECT_EQ(yaml[0].values, std::vector<std::string>{"GPU-1"});
  const auto json = ParseCdiSpec(
      R"({"kind":"amd.com/gpu","devices":[{"name":"0","annotations":{"pci":"0000:c1:00.0"}}]})",
      "b.json");
  ASSERT_EQ(json.size(), 1u);
  EXPECT_EQ(json[0].values, std::vector<std::string>{"0000:c1:00.0"});
  EXPECT_THROW(ParseCdiSpec("kind: nokind\n", "c.yaml"), std::runtime_error);
  EXPECT_THROW(ParseCdiSpec("{not json", "d.json"), std::runtime_error);
  EXPECT_TRUE(SplitCdiName("vendor.com/gpu=0").has_value());
  EXPECT_FALSE(SplitCdiName("gpu=0").has_value());
  EXPECT_FALSE(SplitCdiName("vendor.com/gpu").has_value());
}

// Found by the cdi_spec fuzz target: a kind holding '=' made "kind=name" that did not split back.
// Kinds and names follow the CDI library's rule, and a spec that breaks it says where.
TEST(CdiSpec, RefusesAKindOrDeviceNameTheCdiLibraryRefusesAndSaysWhy) {
  auto reason = [](std::string_view text) {
    try {
      ParseCdiSpec(text, "x.yaml");
    } catch (const std::runtime_error& e) {
      return std::string(e.what());
    }
    return std::string("parsed");
  };
  EXPECT_EQ(reason("kind: a=b/c\ndevices: [{name: x}]\n"),
            "not a CDI spec: kind: vendor \"a=b\" holds a character outside [A-Za-z0-9_-.]");
  EXPECT_EQ(reason("kind: vendor.com/gpu/x\n"),
            "not a CDI spec: kind: class \"gpu/x\" holds a character outside [A-Za-z0-9_-.]");
  EXPECT_EQ(reason("kind: 9vendor/gpu\n"),
            "not a CDI spec: kind: vendor \"9vendor\" should start with a letter");
  EXPECT_EQ(reason("kind: vendor/gpu.\n"),
            "not a CDI spec: kind: class \"gpu.\" should end with a letter or digit");
  EXPECT_EQ(reason("kind: vendor.com/gpu\ndevices: [{name: gpu=0}]\n"),
            "not a valid CDI spec: device name \"gpu=0\" holds a character outside "
            "[A-Za-z0-9_-.:]");
  EXPECT_EQ(reason("kind: vendor.com/gpu\ndevices: [{name: -0}]\n"),
            "not a valid CDI spec: device name \"-0\" should start with a letter or digit");
  EXPECT_EQ(reason("kind: vendor.com/gpu\ndevices: [{name: 0}, {name: mig:1.0_a-b}]\n"), "parsed");
}

TEST(CdiSpecs, FollowsFilesThatChangeOrGoAndSkipsAMalformedOneOnce) {
  LogCapture log;
  const fs::path dir = accelmon::testing::MakeTempDir("accelmon-cdi");
  Write(dir / "a.json", R"({"kind":"x.com/gpu","devices":[{"name":"0"}]})");
  Write(dir / "broken.yaml", "kind: [unterminated\n");
  Write(dir / "notes.txt", "not a spec");
  CdiSpecs specs({dir});
  specs.Refresh();
  EXPECT_NE(specs.Find("x.com/gpu=0"), nullptr);
  specs.Refresh();
  EXPECT_EQ(log.Count("broken.yaml skipped"), 1u) << "said once while the file stays as it is";
  // Rewritten with another device (a different size: seen as changed), then removed.
  Write(dir / "a.json", R"({"kind":"x.com/gpu","devices":[{"name":"1"},{"name":"2"}]})");
  specs.Refresh();
  EXPECT_EQ(specs.Find("x.com/gpu=0"), nullptr);
  EXPECT_NE(specs.Find("x.com/gpu=2"), nullptr);
  fs::remove(dir / "a.json");
  specs.Refresh();
  EXPECT_EQ(specs.Find("x.com/gpu=2"), nullptr);
  fs::remove_all(dir);
}

TEST(CdiSpecs, TheLaterDirectoryWins) {
  const fs::path dir = accelmon::testing::MakeTempDir("accelmon-cdi");
  Write(dir / "etc/a.json",
        R"({"kind":"x.com/gpu","devices":[{"name":"0","annotations":{"a":"etc"}}]})");
  Write(dir / "run/a.json",
        R"({"kind":"x.com/gpu","devices":[{"name":"0","annotations":{"a":"run"}}]})");
  CdiSpecs specs({dir / "etc", dir / "run", dir / "absent"});
  specs.Refresh();
  ASSERT_NE(specs.Find("x.com/gpu=0"), nullptr);
  EXPECT_EQ(specs.Find("x.com/gpu=0")->values, std::vector<std::string>{"run"});
  fs::remove_all(dir);
}

TEST(NvidiaMinors, ReadsGpuMinorsAndMigCapabilities) {
  const NvidiaMinors m = ReadNvidiaMinors(PathResolver(kFixtures + "/proc", kFixtures + "/sys"));
  ASSERT_EQ(m.gpu_pci.size(), 4u);
  EXPECT_EQ(m.gpu_pci.at(2), "0000:38:00.0");
  ASSERT_TRUE(m.caps.contains(25));
  EXPECT_EQ(m.caps.at(25).gpu_minor, 2u);
  EXPECT_EQ(m.caps.at(25).gi, 1u);
  EXPECT_EQ(m.caps.at(25).ci, 0u);
  EXPECT_FALSE(m.caps.at(24).ci.has_value()) << "gpu2/gi1/access: the GPU instance's own";
  EXPECT_FALSE(m.caps.contains(1)) << "config is no MIG instance";
  const NvidiaMinors none = ReadNvidiaMinors(PathResolver("/nonexistent", "/nonexistent"));
  EXPECT_TRUE(none.gpu_pci.empty());
  EXPECT_TRUE(none.caps.empty());
}

TEST(DraDeviceResolver, NvidiaGpuAndMigInstanceByTheirDeviceNodes) {
  DraDeviceResolver resolver({kFixtures + "/cdi"},
                             PathResolver(kFixtures + "/proc", kFixtures + "/sys"));
  resolver.Refresh();
  const v1::NodeReport r = NvidiaNode();
  EXPECT_EQ(
      Resolve(resolver, r, {"k8s.gpu.nvidia.com/claim=5b1c4f0e-7a1d-4c2e-9f3b-0d1e2f3a4b5c-gpu-1"}),
      1)
      << "/dev/nvidia1: minor 1 is the GPU at 28:00.0";
  const int mig = Resolve(
      resolver, r,
      {"k8s.gpu.nvidia.com/claim=8e2d6a41-3c5f-4b7e-a1d9-6f0e5c4b3a21-gpu-2-mig-1g18gb-1-0"});
  ASSERT_GE(mig, 0);
  EXPECT_EQ(r.devices(mig).identity().uuid(), "MIG-2-1")
      << "the MIG instance (GPU 2, GI 1, CI 0), not its parent /dev/nvidia2";
}

TEST(DraDeviceResolver, AmdByItsDrmNodeAscendByItsDavinciNode) {
  const fs::path dir = accelmon::testing::MakeTempDir("accelmon-dra");
  fs::create_directories(dir / "sys/devices/pci0000:c0/0000:c1:00.0");
  fs::create_directories(dir / "sys/class/drm/renderD129");
  fs::create_symlink("../../../devices/pci0000:c0/0000:c1:00.0",
                     dir / "sys/class/drm/renderD129/device");
  Write(dir / "cdi/amd.json", R"({"kind":"k8s.gpu.amd.com/gpu","devices":[
    {"name":"common","containerEdits":{"env":["DRA_RESOURCE_DRIVER_NAME=gpu.amd.com"]}},
    {"name":"c-gpu-1","containerEdits":{"deviceNodes":[{"path":"/dev/kfd"},{"path":"/dev/dri/renderD129"}]}}]})");
  Write(dir / "cdi/ascend.yaml", R"(kind: huawei.com/npu
devices:
  - name: npu-3
    containerEdits: {deviceNodes: [{path: /dev/davinci_manager}, {path: /dev/davinci3}]}
)");
  DraDeviceResolver resolver({dir / "cdi"}, PathResolver(dir / "proc", dir / "sys"));
  resolver.Refresh();
  v1::NodeReport r;
  AddDevice(r, "amd", 0, "", "0000:C1:00.0");
  AddDevice(r, "huawei", 3, "", "0000:81:00.0");
  EXPECT_EQ(Resolve(resolver, r, {"k8s.gpu.amd.com/gpu=common", "k8s.gpu.amd.com/gpu=c-gpu-1"}), 0)
      << "the common device names nothing; the claim's own device is the GPU at c1:00.0";
  EXPECT_EQ(Resolve(resolver, r, {"huawei.com/npu=npu-3"}), 1);
  fs::remove_all(dir);
}

TEST(DraDeviceResolver, AUuidOrPciAddressInAVariableOrAnnotation) {
  const fs::path dir = accelmon::testing::MakeTempDir("accelmon-dra");
  Write(dir / "cdi/a.json", R"({"kind":"x.com/gpu","devices":[
    {"name":"by-uuid","containerEdits":{"env":["VISIBLE_DEVICES=GPU-9,mig-2-2"]}},
    {"name":"by-pci","annotations":{"x.com/pci":"0000:48:00.0"}}]})");
  DraDeviceResolver resolver({dir / "cdi"}, PathResolver(dir / "proc", dir / "sys"));
  resolver.Refresh();
  const v1::NodeReport r = NvidiaNode();
  EXPECT_EQ(Resolve(resolver, r, {"x.com/gpu=by-uuid"}), 5)
      << "MIG-2-2 in a list, any case; GPU-9 is no device here";
  EXPECT_EQ(Resolve(resolver, r, {"x.com/gpu=by-pci"}), 3)
      << "the GPU at 48:00.0 (never a MIG instance that shares its parent's address)";
  fs::remove_all(dir);
}

TEST(DraDeviceResolver, SaysWhatItLookedAtWhenNothingMatches) {
  DraDeviceResolver resolver({kFixtures + "/cdi"},
                             PathResolver(kFixtures + "/proc", kFixtures + "/sys"));
  resolver.Refresh();
  v1::NodeReport r;  // no NVIDIA devices at all
  AddDevice(r, "sim", 0, "SIM-0", "0000:99:00.0");
  std::string why;
  EXPECT_EQ(Resolve(resolver, r,
                    {"k8s.gpu.nvidia.com/claim=5b1c4f0e-7a1d-4c2e-9f3b-0d1e2f3a4b5c-gpu-1",
                     "rdma.example.com/nic=mlx5-0"},
                    &why),
            -1);
  EXPECT_NE(why.find("names no uuid, PCI address or device node of this node's devices"),
            std::string::npos)
      << why;
  EXPECT_NE(why.find("rdma.example.com/nic=mlx5-0: no CDI spec defines it"), std::string::npos)
      << why;
  EXPECT_EQ(Resolve(resolver, r, {}, &why), -1);
  EXPECT_EQ(why, "the kubelet gave no CDI device");
}

TEST(PodUids, FromThePodLogDirectoryTheNewerOfTwo) {
  const PodUids fixtures = ReadPodUids(kFixtures + "/pods");
  EXPECT_EQ(fixtures.at({"ml", "worker-a"}), "2a4c6e8f-0b1d-4f3e-9c5a-7b8d9e0f1a2b");
  EXPECT_EQ(fixtures.size(), 4u);
  const fs::path dir = accelmon::testing::MakeTempDir("accelmon-pods");
  fs::create_directories(dir / "ml_db-0_old-uid");
  fs::create_directories(dir / "ml_db-0_new-uid");
  fs::last_write_time(dir / "ml_db-0_old-uid",
                      fs::last_write_time(dir / "ml_db-0_new-uid") - std::chrono::hours(1));
  fs::create_directories(dir / "not-a-pod");
  fs::create_directories(dir / "a_b_c_d");
  const PodUids uids = ReadPodUids(dir);
  EXPECT_EQ(uids.size(), 1u);
  EXPECT_EQ(uids.at({"ml", "db-0"}), "new-uid") << "a recreated StatefulSet pod: the newer";
  EXPECT_TRUE(ReadPodUids(dir / "absent").empty());
  fs::remove_all(dir);
}

TEST(PodLogDirectory, FollowsPodsThatComeAndGo) {
  const fs::path dir = accelmon::testing::MakeTempDir("accelmon-pods");
  PodLogDirectory logs(dir);
  bool exists = false;
  EXPECT_TRUE(logs.Refresh(exists).empty());
  EXPECT_TRUE(exists);
  fs::create_directories(dir / "ml_a_uid-a");
  EXPECT_EQ(logs.Refresh(exists).at({"ml", "a"}), "uid-a") << "a new pod changes the mtime";
  fs::remove_all(dir / "ml_a_uid-a");
  fs::create_directories(dir / "ml_b_uid-b");
  const PodUids& now = logs.Refresh(exists);
  EXPECT_FALSE(now.contains({"ml", "a"}));
  EXPECT_EQ(now.at({"ml", "b"}), "uid-b");
  fs::remove_all(dir);
  EXPECT_TRUE(logs.Refresh(exists).empty());
  EXPECT_FALSE(exists);
}

TEST(AttributePods, AClaimSharedByTwoPodsGivesBothAndCarriesTheClaimAndUid) {
  DraDeviceResolver resolver({kFixtures + "/cdi"},
                             PathResolver(kFixtures + "/proc", kFixtures + "/sys"));
  resolver.Refresh();
  v1::NodeReport r = NvidiaNode();
  ::v1::ListPodResourcesResponse pods;
  for (const char* name : {"worker-a", "worker-b"}) {
    auto* pod = pods.add_pod_resources();
    pod->set_namespace_("ml");
    pod->set_name(name);
    auto* c = pod->add_containers();
    c->set_name("worker");
    auto* claim = c->add_dynamic_resources();
    claim->set_claim_namespace("ml");
    claim->set_claim_name("shared-gpu");
    *claim->add_claim_resources() =
        Resource({"k8s.gpu.nvidia.com/claim=5b1c4f0e-7a1d-4c2e-9f3b-0d1e2f3a4b5c-gpu-1"});
  }
  const PodUids uids = ReadPodUids(kFixtures + "/pods");
  std::map<std::string, std::string> unresolved;
  EXPECT_EQ(AttributePods(pods, r, {.dra = &resolver, .uids = &uids, .unresolved = &unresolved}),
            2u);
  ASSERT_EQ(r.devices(1).holders_size(), 2);
  for (const auto& h : r.devices(1).holders()) {
    EXPECT_EQ(h.claim(), "shared-gpu");
    EXPECT_EQ(h.claim_namespace(), "ml");
  }
  EXPECT_EQ(r.devices(1).holders(0).pod_uid(), "2a4c6e8f-0b1d-4f3e-9c5a-7b8d9e0f1a2b");
  EXPECT_EQ(r.devices(1).holders(1).pod_uid(), "3b5d7f9a-1c2e-4a4f-8d6b-8c9e0f1a2b3c");
  EXPECT_TRUE(unresolved.empty());
  // Without a resolver (no CDI spec dirs) DRA devices are left out; the uid needs none.
  v1::NodeReport plain = NvidiaNode();
  EXPECT_EQ(AttributePods(pods, plain, {.uids = &uids}), 0u);
}

}  // namespace
}  // namespace dra_devices_test
}  // namespace accelmon::collectors
