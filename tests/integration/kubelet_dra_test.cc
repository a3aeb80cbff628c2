// Kubernetes Dynamic Resource Allocation end to end, on a node that mixes a device plugin's pods
// with DRA claims: the real nvml collector over the fake libnvidia-ml (4 H200s, GPU 2 split into
// two MIG instances), the real kubelet collector against a fake kubelet that lists
// dynamic_resources, the CDI spec files, /proc/driver/nvidia and pod log directory of
// tests/fixtures/dra, and a real exporter on loopback whose /metrics is read back. The cases are
// the anchors' known failures: an unallocated GPU keeps its series (dcgm-exporter #569), a MIG
// device allocated through DRA is that MIG instance (#714), the pod uid is there (#718), a claim
// shared by two pods makes both holders.
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "collectors/kubelet.h"
#include "collectors/nvml.h"
#include "daemon/agent/agent.h"
#include "k8s/podresources/v1/api.pb.h"
#include "support/fake_kubelet.h"
#include "support/fake_nvml_library.h"
#include "support/http_get.h"
#include "support/log_capture.h"
#include "support/loopback_exporter.h"
#include "support/prom_text.h"
#include "support/report_tap.h"
#include "support/temp_dir.h"
#include "support/wait.h"

namespace accelmon {
namespace kubelet_dra_test {
namespace {

using namespace std::chrono_literals;
using testing::FakeKubelet;
using testing::LogCapture;
using testing::WaitFor;
namespace fs = std::filesystem;

const std::string kFixtures = std::string(ACCELMON_FIXTURES_DIR) + "/dra";
// The fake's uuids (tests/fakes/fake_nvml.cc): GPU d is GPU-fa4e000d-0000-4000-8000-00000000000d.
const std::string kGpu0 = "GPU-fa4e0000-0000-4000-8000-000000000000";
const std::string kSharedClaimCdi =
    "k8s.gpu.nvidia.com/claim=5b1c4f0e-7a1d-4c2e-9f3b-0d1e2f3a4b5c-gpu-1";
const std::string kMigClaimCdi =
    "k8s.gpu.nvidia.com/claim=8e2d6a41-3c5f-4b7e-a1d9-6f0e5c4b3a21-gpu-2-mig-1g18gb-1-0";
// The uids of tests/fixtures/dra/pods.
const std::string kTrainerUid = "0b7c0e8a-1f2d-4e3c-8a9b-1c2d3e4f5a6b";
const std::string kWorkerAUid = "2a4c6e8f-0b1d-4f3e-9c5a-7b8d9e0f1a2b";
const std::string kWorkerBUid = "3b5d7f9a-1c2e-4a4f-8d6b-8c9e0f1a2b3c";
const std::string kInferUid = "4c6e8a0b-2d3f-4b5a-9e7c-9d0f1a2b3c4d";

::v1::PodResources* AddPod(::v1::ListPodResourcesResponse& r, const std::string& ns,
                           const std::string& name) {
  auto* pod = r.add_pod_resources();
  pod->set_namespace_(ns);
  pod->set_name(name);
  return pod;
}

void AddClaim(::v1::ContainerResources& c, const std::string& ns, const std::string& claim,
              const std::string& cdi, const std::string& device) {
  auto* d = c.add_dynamic_resources();
  d->set_claim_namespace(ns);
  d->set_claim_name(claim);
  auto* resource = d->add_claim_resources();
  resource->add_cdi_devices()->set_name(cdi);
  resource->set_driver_name("gpu.nvidia.com");
  resource->set_pool_name("dra-node");
  resource->set_device_name(device);
}

// trainer-0 has GPU 0 from the device plugin; worker-a and worker-b share the claim ml/shared-gpu
// (GPU 1); infer-0's claim serving/mig-1g is GPU 2's first MIG instance; worker-a also claims an
// RDMA NIC, which is no accelerator of this node. GPU 3 and GPU 2's second MIG instance are
// allocated to nobody.
::v1::ListPodResourcesResponse MixedNode(bool with_worker_b = true) {
  ::v1::ListPodResourcesResponse r;
  auto* trainer = AddPod(r, "ml", "trainer-0")->add_containers();
  trainer->set_name("pytorch");
  auto* devices = trainer->add_devices();
  devices->set_resource_name("nvidia.com/gpu");
  devices->add_device_ids(kGpu0);
  auto* worker_a = AddPod(r, "ml", "worker-a")->add_containers();
  worker_a->set_name("worker");
  AddClaim(*worker_a, "ml", "shared-gpu", kSharedClaimCdi, "gpu-1");
  auto* nic = worker_a->add_dynamic_resources();
  nic->set_claim_namespace("ml");
  nic->set_claim_name("rdma");
  auto* nic_resource = nic->add_claim_resources();
  nic_resource->add_cdi_devices()->set_name("rdma.example.com/nic=mlx5-0");
  nic_resource->set_driver_name("rdma.example.com");
  nic_resource->set_pool_name("dra-node");
  nic_resource->set_device_name("mlx5-0");
  if (with_worker_b) {
    auto* worker_b = AddPod(r, "ml", "worker-b")->add_containers();
    worker_b->set_name("worker");
    AddClaim(*worker_b, "ml", "shared-gpu", kSharedClaimCdi, "gpu-1");
  }
  auto* infer = AddPod(r, "serving", "infer-0")->add_containers();
  infer->set_name("server");
  AddClaim(*infer, "serving", "mig-1g", kMigClaimCdi, "gpu-2-mig-1g18gb-1-0");
  return r;
}

// "ns/pod/container[claim]" of each POD holder of the device with `index`.
std::vector<std::string> PodHolders(const v1::NodeReport& r, uint32_t index) {
  std::vector<std::string> out;
  for (const v1::DeviceTelemetry& d : r.devices()) {
    if (d.identity().index() != index) continue;
    for (const v1::DeviceHolder& h : d.holders()) {
      if (h.kind() != v1::HOLDER_KIND_POD) continue;
      out.push_back(h.namespace_() + "/" + h.pod() + "/" + h.container() +
                    (h.claim().empty() ? "" : "[" + h.claim_namespace() + "/" + h.claim() + "]"));
    }
  }
  return out;
}

class DraAttribution : public ::testing::Test {
 protected:
  void SetUp() override {
    const collectors::SharedLibrary& control = testing::FakeNvmlLibrary(FAKE_NVML_PATH);
    ASSERT_TRUE(control.loaded()) << control.error();
    control.Function<void (*)()>("fake_nvml_reset")();
    control.Function<void (*)(int)>("fake_nvml_set_device_count")(4);
    const auto add_mig =
        control.Function<int (*)(int, int, const char*, unsigned, unsigned)>("fake_nvml_add_mig");
    ASSERT_GE(add_mig(2, 0, "1g.18gb", 1, 0), 0);
    ASSERT_GE(add_mig(2, 1, "1g.18gb", 2, 0), 0);
    dir_ = testing::MakeTempDir("accelmon-dra");
    socket_ = dir_ + "/kubelet.sock";
    kubelet_ = std::make_unique<FakeKubelet>([this] { return reports_.size(); });
    ASSERT_TRUE(kubelet_->Serve(socket_));
    std::string why;
    auto nvml = collectors::CreateNvmlCollector(FAKE_NVML_PATH, &why);
    ASSERT_NE(nvml, nullptr) << why;
    std::vector<std::unique_ptr<collectors::Collector>> list;
    list.push_back(std::move(nvml));
    list.push_back(std::make_unique<collectors::KubeletCollector>(collectors::KubeletOptions{
        .socket = socket_,
        .timeout = 2s,
        .cdi_spec_dirs = {dir_ + "/etc-cdi-absent", kFixtures + "/cdi"},
        .pod_logs_dir = kFixtures + "/pods",
        .paths = collectors::PathResolver(kFixtures + "/proc", kFixtures + "/sys")}));
    uplink_ = std::make_unique<Uplink>(UplinkOptions{.exporter_address = exporter_.grpc_address()});
    agent_ = std::make_unique<Agent>(AgentOptions{.node = "dra-node", .interval = 100ms},
                                     collectors::CollectorSet(std::move(list)), *uplink_);
    agent_->set_report_observer(reports_.Observer());
    uplink_->Start();
    agent_->Start();
  }
  void TearDown() override {
    if (agent_) agent_->Stop();
    if (uplink_) uplink_->Stop();
    kubelet_.reset();
    fs::remove_all(dir_);
  }

  std::vector<testing::Sample> Scrape() {
    const auto scrape = testing::HttpGet("127.0.0.1", exporter_.web_port(), "/metrics");
    EXPECT_EQ(scrape.status, 200);
    return testing::ParseExposition(scrape.body);
  }

  std::optional<v1::NodeReport> WaitForExporter(
      const std::function<bool(const v1::NodeReport&)>& pred) {
    return testing::WaitForLatestReport(exporter_, pred, 20s);
  }
  std::optional<v1::NodeReport> FirstReportServing(int generation) {
    return testing::FirstReportServing(*kubelet_, reports_, generation, 20s);
  }

  std::string dir_, socket_;
  testing::LoopbackExporter exporter_;
  testing::ReportTap reports_;
  std::unique_ptr<FakeKubelet> kubelet_;
  std::unique_ptr<Uplink> uplink_;
  std::unique_ptr<Agent> agent_;
};

// The MIG instances of GPU 2 have index 100 x (2 + 1) + slot (collectors/nvml.cc).
constexpr uint32_t kMigSlot0 = 300, kMigSlot1 = 301;

bool AllShown(const v1::NodeReport& r) {
  return PodHolders(r, 0) == std::vector<std::string>{"ml/trainer-0/pytorch"} &&
         PodHolders(r, 1) == std::vector<std::string>{"ml/worker-a/worker[ml/shared-gpu]",
                                                      "ml/worker-b/worker[ml/shared-gpu]"} &&
         PodHolders(r, kMigSlot0) ==
             std::vector<std::string>{"serving/infer-0/server[serving/mig-1g]"};
}

TEST_F(DraAttribution, ClaimsNameTheirDevicesBesideTheDevicePluginsAndAPodThatLeavesIsDropped) {
  LogCapture log;
  kubelet_->Set(MixedNode());
  const auto shown = WaitForExporter(AllShown);
  ASSERT_TRUE(shown.has_value()) << "the exporter never showed every pod on its device";
  EXPECT_TRUE(PodHolders(*shown, 2).empty()) << "the MIG parent is not the MIG device's holder";
  EXPECT_TRUE(PodHolders(*shown, kMigSlot1).empty()) << "the other MIG instance is nobody's";
  EXPECT_TRUE(PodHolders(*shown, 3).empty()) << "GPU 3 is allocated to nobody";

  const auto samples = Scrape();
  // The device plugin's pod: its uid, no claim.
  EXPECT_EQ(testing::FindValue(samples, "accelmon_device_job_info",
                               {{"device", "0"},
                                {"uuid", kGpu0},
                                {"kind", "pod"},
                                {"pod", "trainer-0"},
                                {"namespace", "ml"},
                                {"container", "pytorch"},
                                {"pod_uid", kTrainerUid}}),
            1.0);
  // A claim shared by two pods: both are holders, each with its own uid and the claim.
  for (const auto& [pod, uid] : {std::pair{"worker-a", kWorkerAUid}, {"worker-b", kWorkerBUid}}) {
    EXPECT_EQ(testing::FindValue(samples, "accelmon_device_job_info",
                                 {{"device", "1"},
                                  {"kind", "pod"},
                                  {"pod", pod},
                                  {"namespace", "ml"},
                                  {"container", "worker"},
                                  {"claim", "shared-gpu"},
                                  {"claim_namespace", "ml"},
                                  {"pod_uid", uid}}),
              1.0)
        << pod;
  }
  // The MIG instance allocated through DRA is that instance, with its uuid.
  const std::string mig_uuid = [&] {
    for (const auto& d : shown->devices()) {
      if (d.identity().index() == kMigSlot0) return d.identity().uuid();
    }
    return std::string();
  }();
  ASSERT_EQ(mig_uuid.substr(0, 4), "MIG-");
  EXPECT_EQ(testing::FindValue(samples, "accelmon_device_job_info",
                               {{"device", std::to_string(kMigSlot0)},
                                {"uuid", mig_uuid},
                                {"pod", "infer-0"},
                                {"claim", "mig-1g"},
                                {"claim_namespace", "serving"},
                                {"pod_uid", kInferUid}}),
            1.0);
  // Allocated to nobody: every series of its own, no holder.
  for (const std::string& device : {std::string("3"), std::to_string(kMigSlot1)}) {
    EXPECT_TRUE(
        testing::FindValue(samples, "accelmon_device_memory_used_bytes", {{"device", device}})
            .has_value())
        << "device " << device << " lost its series";
    EXPECT_FALSE(
        testing::FindValue(samples, "accelmon_device_job_info", {{"device", device}}).has_value())
        << "device " << device << " has a holder";
  }
  // The claim is on the info series only, never on a device's own series.
  for (const testing::Sample& s : samples) {
    if (s.name == "accelmon_device_job_info") continue;
    EXPECT_EQ(s.labels.count("claim"), 0u) << s.name;
    EXPECT_EQ(s.labels.count("pod_uid"), 0u) << s.name;
  }
  // The NIC's claim names no device here: said once, however many ticks list it.
  ASSERT_TRUE(WaitFor([&] { return reports_.size() > 10; }, 20s));
  EXPECT_EQ(
      log.Count("DRA device rdma.example.com/dra-node/mlx5-0 (claim ml/rdma, pod ml/worker-a) "
                "is none of this node's devices"),
      1u);
  EXPECT_EQ(log.Count("rdma.example.com/nic=mlx5-0: no CDI spec defines it"), 1u);
  EXPECT_EQ(log.Count("shared-gpu"), 0u) << "a resolved claim is not logged";

  // worker-b leaves: the first report collected after that has worker-a alone on GPU 1.
  kubelet_->Set(MixedNode(/*with_worker_b=*/false));
  const auto after = FirstReportServing(kubelet_->generation());
  ASSERT_TRUE(after.has_value());
  EXPECT_EQ(PodHolders(*after, 1), std::vector<std::string>{"ml/worker-a/worker[ml/shared-gpu]"});
  EXPECT_EQ(PodHolders(*after, kMigSlot0),
            std::vector<std::string>{"serving/infer-0/server[serving/mig-1g]"});
}

TEST_F(DraAttribution, AKubeletWithoutTheNewerFieldsOrWithUnknownOnesStillWorks) {
  // A kubelet before 1.32: claim resources carry their CDI devices only.
  kubelet_->SetVersion(FakeKubelet::Version::kWithoutDraDeviceNames);
  kubelet_->Set(MixedNode());
  const auto older = FirstReportServing(kubelet_->generation());
  ASSERT_TRUE(older.has_value());
  EXPECT_TRUE(AllShown(*older)) << "resolved from the CDI devices alone";

  // A newer kubelet: fields this build does not know are skipped.
  kubelet_->SetVersion(FakeKubelet::Version::kWithUnknownFields);
  const auto newer = FirstReportServing(kubelet_->generation());
  ASSERT_TRUE(newer.has_value());
  EXPECT_TRUE(AllShown(*newer));
  const v1::CollectorStatus* status = nullptr;
  for (const auto& c : newer->collectors()) {
    if (c.name() == "kubelet") status = &c;
  }
  ASSERT_NE(status, nullptr);
  EXPECT_TRUE(status->success()) << status->error();

  // A kubelet with no DRA at all (before 1.27, or its gate off): the device plugin's pods only.
  ::v1::ListPodResourcesResponse plugin_only;
  *plugin_only.add_pod_resources() = MixedNode().pod_resources(0);
  kubelet_->SetVersion(FakeKubelet::Version::kCurrent);
  kubelet_->Set(plugin_only);
  const auto plain = FirstReportServing(kubelet_->generation());
  ASSERT_TRUE(plain.has_value());
  EXPECT_EQ(PodHolders(*plain, 0), std::vector<std::string>{"ml/trainer-0/pytorch"});
  EXPECT_TRUE(PodHolders(*plain, 1).empty());
}

}  // namespace
}  // namespace kubelet_dra_test
}  // namespace accelmon
