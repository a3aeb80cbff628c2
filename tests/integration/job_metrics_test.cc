// Per-job series end to end: reports with holders from two nodes over real gRPC, /metrics over
// HTTP. The exporter groups devices by their job across nodes, measures step rates from
// consecutive reports of each node, and follows holders that come and go.
#include <grpcpp/create_channel.h>
#include <gtest/gtest.h>

#include "accelmon/v1/ingest.grpc.pb.h"
#include "daemon/exporter/exporter.h"
#include "support/http_get.h"
#include "support/loopback_exporter.h"
#include "support/prom_text.h"
#include "support/wait.h"

namespace accelmon {
namespace job_metrics_test {
namespace {

using namespace std::chrono_literals;
using testing::FindValue;
using testing::LoopbackExporter;
using testing::Scrape;

struct Device {
  std::string job;  // empty: no holder at all
  double compute;
  uint32_t pid;
  uint64_t steps;
};

// A report of `node` taken `ago` before now, one holder per device that has a job.
v1::NodeReport Report(const std::string& node, uint64_t sequence, std::chrono::seconds ago,
                      const std::vector<Device>& devices) {
  v1::NodeReport r;
  r.set_node(node);
  r.set_agent_instance_id(node + "-instance");
  r.set_sequence(sequence);
  // Every report of the test is `ago` before one instant, so that a slow machine between two
  // sends does not stretch the ten seconds between them (whole seconds: truncated below).
  static const auto kNow = std::chrono::system_clock::now();
  const auto at = kNow - ago;
  r.mutable_timestamp()->set_seconds(
      std::chrono::duration_cast<std::chrono::seconds>(at.time_since_epoch()).count());
  r.mutable_interval()->set_seconds(1);
  uint32_t index = 0;
  for (const Device& spec : devices) {
    auto* d = r.add_devices();
    d->mutable_identity()->set_index(index);
    d->mutable_identity()->set_uuid(node + "-gpu" + std::to_string(index));
    d->mutable_utilization()->set_compute_ratio(spec.compute);
    auto* pm = d->add_processes();
    pm->set_pid(spec.pid);
    pm->set_used_bytes(1 << 30);
    pm->set_steps_total(spec.steps);
    if (!spec.job.empty()) {
      auto* h = d->add_holders();
      h->set_kind(v1::HOLDER_KIND_SLURM);
      h->set_job(spec.job);
      h->set_step("0");
      h->set_user("alice");
      h->add_pids(spec.pid);
      h->set_rank(std::to_string(index));
    }
    ++index;
  }
  return r;
}

class Node {
 public:
  Node(const Exporter& exporter, std::string name) : name_(std::move(name)) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // a connection of its own, as an agent
    stub_ = v1::Ingest::NewStub(grpc::CreateCustomChannel(
        testing::LoopbackAddress(exporter.grpc_port()), grpc::InsecureChannelCredentials(), args));
    context_.set_deadline(std::chrono::system_clock::now() + 60s);
    stream_ = stub_->Stream(&context_);
  }
  ~Node() {
    stream_->WritesDone();
    stream_->Finish();
  }

  void Send(std::chrono::seconds ago, const std::vector<Device>& devices) {
    ASSERT_TRUE(stream_->Write(Report(name_, ++sequence_, ago, devices)));
    v1::Ack ack;
    ASSERT_TRUE(stream_->Read(&ack));
    ASSERT_EQ(ack.status(), v1::Ack::STATUS_APPLIED) << ack.reason();
  }

 private:
  std::string name_;
  std::unique_ptr<v1::Ingest::Stub> stub_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::NodeReport, v1::Ack>> stream_;
  uint64_t sequence_ = 0;
};

TEST(JobMetrics, AJobAcrossTwoNodesHasItsDevicesUtilizationAndStepRateOnMetrics) {
  LoopbackExporter exporter;
  Node n1(exporter, "n1"), n2(exporter, "n2");
  // Job 4711 on both nodes (three devices); n2's second device runs another job. Ten seconds of
  // the nodes' clocks apart: rank 0 made 30 steps, rank 1 20, rank 2 (on n2) 10.
  n1.Send(20s, {{"4711", 0.9, 100, 1000}, {"4711", 0.8, 101, 1000}});
  n2.Send(20s, {{"4711", 0.2, 200, 500}, {"other", 0.5, 201, 0}});
  n1.Send(10s, {{"4711", 0.9, 100, 1030}, {"4711", 0.8, 101, 1020}});
  n2.Send(10s, {{"4711", 0.2, 200, 510}, {"other", 0.5, 201, 0}});

  const auto samples = Scrape(exporter);
  const std::map<std::string, std::string> job{{"job_id", "4711"}};
  EXPECT_EQ(FindValue(samples, "accelmon_job_devices", job), 3.0);
  EXPECT_EQ(FindValue(samples, "accelmon_job_nodes", job), 2.0);
  EXPECT_EQ(FindValue(samples, "accelmon_job_devices", {{"job_id", "other"}}), 1.0);
  const auto stat = [&](const char* family, const char* s) {
    return FindValue(samples, family, {{"job_id", "4711"}, {"stat", s}});
  };
  EXPECT_EQ(stat("accelmon_job_utilization_ratio", "min"), 0.2);
  EXPECT_EQ(stat("accelmon_job_utilization_ratio", "median"), 0.8);
  EXPECT_EQ(stat("accelmon_job_utilization_ratio", "max"), 0.9);
  EXPECT_DOUBLE_EQ(*stat("accelmon_job_step_rate", "min"), 1.0);
  EXPECT_DOUBLE_EQ(*stat("accelmon_job_step_rate", "median"), 2.0);
  EXPECT_DOUBLE_EQ(*stat("accelmon_job_step_rate", "max"), 3.0);
  EXPECT_EQ(FindValue(samples, "accelmon_device_job_info",
                      {{"node", "n2"},
                       {"device", "0"},
                       {"kind", "slurm"},
                       {"job_id", "4711"},
                       {"step", "0"},
                       {"user", "alice"},
                       {"rank", "0"}}),
            1.0);
  EXPECT_EQ(FindValue(samples, "accelmon_device_process_memory_used_bytes",
                      {{"node", "n1"}, {"pid", "101"}}),
            double{1 << 30});
  EXPECT_EQ(
      FindValue(samples, "accelmon_process_training_steps_total", {{"node", "n1"}, {"pid", "100"}}),
      1030.0);

  // The job leaves n2 (its holder is gone): the job shrinks to n1 at the next report.
  n2.Send(0s, {{"", 0.0, 200, 510}, {"other", 0.5, 201, 0}});
  const auto after = Scrape(exporter);
  EXPECT_EQ(FindValue(after, "accelmon_job_nodes", job), 1.0);
  EXPECT_EQ(FindValue(after, "accelmon_job_devices", job), 2.0);
  EXPECT_EQ(
      FindValue(after, "accelmon_job_utilization_ratio", {{"job_id", "4711"}, {"stat", "min"}}),
      0.8);
  EXPECT_FALSE(FindValue(after, "accelmon_device_job_info", {{"node", "n2"}, {"device", "0"}}));
  exporter.Stop();
}

}  // namespace
}  // namespace job_metrics_test
}  // namespace accelmon
