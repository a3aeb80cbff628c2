// Kubernetes attribution end to end: a fake kubelet (our own PodResourcesLister server on a Unix
// socket in a temp dir) assigns simulated devices to pods; a real agent with the "kubelet"
// collector streams to a real exporter on loopback, and the exporter's report names the pod,
// namespace and container of each device. Pods coming and going are followed by the first report
// collected after the change; a kubelet that is slow or gone makes the holders absent, is logged
// once, and the reports keep coming.
#include "collectors/kubelet.h"

#include <grpcpp/server.h>
#include <grpcpp/server_builder.h>
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <string>
#include <vector>

#include "collectors/sim.h"
#include "daemon/agent/agent.h"
#include "k8s/podresources/v1/api.grpc.pb.h"
#include "support/fake_kubelet.h"
#include "support/http_get.h"
#include "support/log_capture.h"
#include "support/loopback_exporter.h"
#include "support/prom_text.h"
#include "support/report_tap.h"
#include "support/temp_dir.h"
#include "support/wait.h"

namespace accelmon {
namespace kubelet_test {
namespace {

using namespace std::chrono_literals;
using testing::FakeKubelet;
using testing::LogCapture;
using testing::WaitFor;
namespace fs = std::filesystem;

struct Assignment {
  std::string ns, pod, container, device_id;
};

// The pods of a device plugin's assignments, as a real kubelet lists them.
::v1::ListPodResourcesResponse Pods(const std::vector<Assignment>& assignments) {
  ::v1::ListPodResourcesResponse response;
  for (const Assignment& a : assignments) {
    auto* pod = response.add_pod_resources();
    pod->set_name(a.pod);
    pod->set_namespace_(a.ns);
    auto* container = pod->add_containers();
    container->set_name(a.container);
    container->add_cpu_ids(2);  // what a real kubelet sends along: ignored
    auto* devices = container->add_devices();
    devices->set_resource_name("nvidia.com/gpu");
    devices->add_device_ids(a.device_id);
    devices->mutable_topology()->add_nodes()->set_id(0);
  }
  return response;
}

// (namespace/pod/container) of each device's POD holders, "" for none.
std::vector<std::string> PodsPerDevice(const v1::NodeReport& r) {
  std::vector<std::string> out;
  for (const v1::DeviceTelemetry& d : r.devices()) {
    std::string pods;
    for (const v1::DeviceHolder& h : d.holders()) {
      if (h.kind() != v1::HOLDER_KIND_POD) continue;
      if (!pods.empty()) pods += ",";
      pods += h.namespace_() + "/" + h.pod() + "/" + h.container();
    }
    out.push_back(pods);
  }
  return out;
}

const v1::CollectorStatus* Status(const v1::NodeReport& r, const std::string& name) {
  for (const auto& c : r.collectors()) {
    if (c.name() == name) return &c;
  }
  return nullptr;
}

class KubeletAttribution : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeTempDir("accelmon-kubelet");
    socket_ = dir_ + "/kubelet.sock";
    kubelet_ = std::make_unique<FakeKubelet>([this] { return tap_.size(); });
    ASSERT_TRUE(kubelet_->Serve(socket_));
    uplink_ = std::make_unique<Uplink>(UplinkOptions{.exporter_address = exporter_.grpc_address()});
    std::vector<std::unique_ptr<collectors::Collector>> list;
    list.push_back(std::make_unique<collectors::SimCollector>(
        collectors::SimOptions{.devices = 2, .seed = 18, .jobs = false}));  // pods only
    list.push_back(std::make_unique<collectors::KubeletCollector>(
        collectors::KubeletOptions{.socket = socket_, .timeout = 200ms}));
    agent_ = std::make_unique<Agent>(AgentOptions{.node = "k8s-node", .interval = 100ms},
                                     collectors::CollectorSet(std::move(list)), *uplink_);
    agent_->set_report_observer(tap_.Observer());
  }
  void Start() {
    uplink_->Start();
    agent_->Start();
    ASSERT_TRUE(WaitFor([&] { return tap_.size() > 0; }, 10s));
    uuids_ = {tap_.At(0)->devices(0).identity().uuid(), tap_.At(0)->devices(1).identity().uuid()};
  }
  void TearDown() override {
    if (agent_) agent_->Stop();
    if (uplink_) uplink_->Stop();
    kubelet_.reset();
    fs::remove_all(dir_);
  }

  // The exporter's latest report from the agent, once one newer than `after` (a sequence) came.
  std::optional<v1::NodeReport> ExporterReportAfter(uint64_t after) {
    std::optional<v1::NodeReport> latest;
    WaitFor(
        [&] {
          const auto nodes = exporter_.store().Snapshot(std::chrono::system_clock::now());
          if (nodes.empty() || nodes[0].report->sequence() <= after) return false;
          latest = *nodes[0].report;
          return true;
        },
        10s);
    return latest;
  }

  std::optional<v1::NodeReport> WaitForExporter(
      const std::function<bool(const v1::NodeReport&)>& pred) {
    return testing::WaitForLatestReport(exporter_, pred, 10s);
  }
  std::optional<v1::NodeReport> FirstReportServing(int generation) {
    return testing::FirstReportServing(*kubelet_, tap_, generation, 10s);
  }

  std::string dir_, socket_;
  testing::LoopbackExporter exporter_;
  testing::ReportTap tap_;
  std::unique_ptr<FakeKubelet> kubelet_;
  std::unique_ptr<Uplink> uplink_;
  std::unique_ptr<Agent> agent_;
  std::vector<std::string> uuids_;
};

TEST_F(KubeletAttribution, HoldersNameThePodOfEachDeviceAndFollowItsChanges) {
  Start();
  kubelet_->Set(
      Pods({{"ml", "trainer-0", "pytorch", uuids_[0]}, {"ml", "trainer-1", "pytorch", uuids_[1]}}));
  const auto shown = WaitForExporter([](const v1::NodeReport& r) {
    return PodsPerDevice(r) ==
           std::vector<std::string>{"ml/trainer-0/pytorch", "ml/trainer-1/pytorch"};
  });
  ASSERT_TRUE(shown.has_value()) << "the exporter never got the pods";
  const v1::DeviceHolder& holder = shown->devices(0).holders(0);
  EXPECT_EQ(holder.kind(), v1::HOLDER_KIND_POD);
  EXPECT_EQ(holder.job(), "") << "no process pushed a job: absent";
  ASSERT_NE(Status(*shown, "kubelet"), nullptr);
  EXPECT_TRUE(Status(*shown, "kubelet")->success());
  EXPECT_EQ(Status(*shown, "kubelet")->error(), "");
  // And on /metrics: one info series per device and pod, with the pod's labels.
  const auto scrape = testing::HttpGet("127.0.0.1", exporter_.web_port(), "/metrics");
  ASSERT_EQ(scrape.status, 200);
  const auto samples = testing::ParseExposition(scrape.body);
  EXPECT_EQ(testing::FindValue(samples, "accelmon_device_job_info",
                               {{"device", "1"},
                                {"kind", "pod"},
                                {"pod", "trainer-1"},
                                {"namespace", "ml"},
                                {"container", "pytorch"}}),
            1.0)
      << scrape.body;

  // trainer-1 goes and infer-0 comes, given device 1 as a time-sliced replica of it.
  kubelet_->Set(Pods({{"ml", "trainer-0", "pytorch", uuids_[0]},
                      {"serving", "infer-0", "server", uuids_[1] + "::0"}}));
  const int changed = kubelet_->generation();
  const auto next = FirstReportServing(changed);
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(PodsPerDevice(*next),
            (std::vector<std::string>{"ml/trainer-0/pytorch", "serving/infer-0/server"}))
      << "the first report collected after the change follows it";
  EXPECT_TRUE(WaitForExporter([&](const v1::NodeReport& r) {
                return r.sequence() >= next->sequence() &&
                       PodsPerDevice(r)[1] == "serving/infer-0/server";
              }).has_value());

  // Every pod gone: no holders at all.
  kubelet_->Set(Pods({}));
  const auto empty = FirstReportServing(kubelet_->generation());
  ASSERT_TRUE(empty.has_value());
  EXPECT_EQ(PodsPerDevice(*empty), (std::vector<std::string>{"", ""}));
}

TEST_F(KubeletAttribution, ASlowOrStoppedKubeletMakesHoldersAbsentAndReportsGoOn) {
  LogCapture log;
  Start();
  kubelet_->Set(Pods({{"ml", "trainer-0", "pytorch", uuids_[0]}}));
  ASSERT_TRUE(WaitForExporter([](const v1::NodeReport& r) {
                return PodsPerDevice(r)[0] == "ml/trainer-0/pytorch";
              }).has_value());

  // Slow: List answers later than the collector's deadline.
  kubelet_->Hang();
  auto failed = WaitForExporter([](const v1::NodeReport& r) {
    return Status(r, "kubelet") != nullptr && !Status(r, "kubelet")->success();
  });
  ASSERT_TRUE(failed.has_value()) << "the kubelet collector never failed";
  EXPECT_NE(Status(*failed, "kubelet")->error().find("no answer within 200 ms"), std::string::npos)
      << Status(*failed, "kubelet")->error();
  EXPECT_EQ(PodsPerDevice(*failed), (std::vector<std::string>{"", ""})) << "absent, not stale";
  EXPECT_TRUE(Status(*failed, "sim")->success()) << "the rest of the report as always";
  // Reports keep coming while it hangs, each without the pods, and without waiting for the
  // kubelet again: only the first tick of the hang spent its 200 ms.
  for (int i = 0; i < 3; ++i) {
    failed = ExporterReportAfter(failed->sequence());
    ASSERT_TRUE(failed.has_value()) << "reports stopped while the kubelet hangs";
    EXPECT_FALSE(Status(*failed, "kubelet")->success());
    EXPECT_EQ(PodsPerDevice(*failed)[0], "");
    EXPECT_NE(Status(*failed, "kubelet")->error().find("the call goes on"), std::string::npos)
        << Status(*failed, "kubelet")->error();
    EXPECT_LT(Status(*failed, "kubelet")->duration_seconds(), 0.1)
        << "a tick waited for a kubelet known to be slow";
  }
  EXPECT_EQ(log.Count("collector kubelet: no data"), 1u) << "logged once, not every tick";

  // Back: the pods again, and that is logged once too.
  kubelet_->Release();
  ASSERT_TRUE(WaitForExporter([](const v1::NodeReport& r) {
                return PodsPerDevice(r)[0] == "ml/trainer-0/pytorch";
              }).has_value());
  EXPECT_EQ(log.Count("collector kubelet: data again"), 1u);

  // Stopped: nothing serves the socket (a socket file that refuses connections).
  kubelet_->Shutdown();
  if (!fs::exists(socket_)) {
    // gRPC removed its socket file: leave one behind as a crashed kubelet does.
    const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, socket_.c_str(), sizeof addr.sun_path - 1);
    ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    close(fd);
  }
  failed = WaitForExporter([](const v1::NodeReport& r) {
    return !Status(r, "kubelet")->success() &&
           Status(r, "kubelet")->error().find("no answer") == std::string::npos;
  });
  ASSERT_TRUE(failed.has_value()) << "a stopped kubelet is not a failure";
  EXPECT_EQ(PodsPerDevice(*failed)[0], "");
  failed = ExporterReportAfter(failed->sequence());
  ASSERT_TRUE(failed.has_value()) << "reports stopped with the kubelet";
  EXPECT_EQ(log.Count("collector kubelet: no data"), 2u) << "once for the hang, once for the stop";

  // Gone altogether (no socket file): absent, which is not a failure.
  fs::remove(socket_);
  const auto absent = WaitForExporter([](const v1::NodeReport& r) {
    return Status(r, "kubelet")->success() &&
           Status(r, "kubelet")->error().find("no kubelet pod-resources socket") !=
               std::string::npos;
  });
  ASSERT_TRUE(absent.has_value());
  EXPECT_EQ(PodsPerDevice(*absent)[0], "");
  EXPECT_EQ(log.Count("Kubernetes attribution off until it appears"), 1u);

  // A new kubelet on the same socket: followed again.
  kubelet_ = std::make_unique<FakeKubelet>([this] { return tap_.size(); });
  kubelet_->Set(Pods({{"ml", "trainer-9", "pytorch", uuids_[1]}}));
  ASSERT_TRUE(kubelet_->Serve(socket_));
  EXPECT_TRUE(WaitForExporter([](const v1::NodeReport& r) {
                return PodsPerDevice(r)[1] == "ml/trainer-9/pytorch";
              }).has_value());
}

}  // namespace
}  // namespace kubelet_test
}  // namespace accelmon
