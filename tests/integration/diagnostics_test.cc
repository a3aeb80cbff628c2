// Diagnostics online in a real exporter on loopback: handcrafted reports over gRPC Ingest open and
// close findings, which /metrics, GetFindings and Watch show (the rules run on their own thread,
// so tests wait for them after the acks); a slow Watch client never blocks ingest or /metrics, and
// the exporter stops cleanly with Watch streams open.
#include <grpcpp/create_channel.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <string_view>
#include <thread>

#include "accelmon/v1/diagnostics.grpc.pb.h"
#include "accelmon/v1/ingest.grpc.pb.h"
#include "collectors/sim.h"
#include "collectors/sim_scenario.h"
#include "daemon/exporter/exporter.h"
#include "daemon/exporter/query_service.h"
#include "support/http_get.h"
#include "support/loopback_exporter.h"
#include "support/prom_text.h"
#include "support/wait.h"

namespace accelmon {
namespace diagnostics_test {
namespace {

using namespace std::chrono_literals;
using testing::CountSamples;
using testing::FindValue;
using testing::HttpGet;
using testing::LoopbackExporter;
using testing::ParseExposition;
using testing::Scrape;
using testing::WaitFor;

// Reports as fast as the test sends them; nodes kept `expire_after`.
ExporterOptions Options(std::chrono::milliseconds expire_after = 10min) {
  return ExporterOptions{.node_expire_after = expire_after, .max_reports_per_second = 1e6};
}

std::shared_ptr<grpc::Channel> Channel(const Exporter& exporter) {
  // A connection of its own per client, and a flow-control window that does not grow: a client
  // that stops reading is stuck after 64 KiB.
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  return grpc::CreateCustomChannel(testing::LoopbackAddress(exporter.grpc_port()),
                                   grpc::InsecureChannelCredentials(), args);
}

// Reports one by one on one Ingest stream, each answered before the next.
class IngestClient {
 public:
  explicit IngestClient(const Exporter& exporter) : stub_(v1::Ingest::NewStub(Channel(exporter))) {
    context_.set_deadline(std::chrono::system_clock::now() + 120s);
    stream_ = stub_->Stream(&context_);
  }
  ~IngestClient() {
    stream_->WritesDone();
    v1::Ack ack;
    while (stream_->Read(&ack)) {
    }
    EXPECT_TRUE(stream_->Finish().ok());
  }

  v1::Ack::Status Send(const v1::NodeReport& report) {
    EXPECT_TRUE(stream_->Write(report));
    v1::Ack ack;
    EXPECT_TRUE(stream_->Read(&ack));
    EXPECT_EQ(ack.sequence(), report.sequence());
    return ack.status();
  }

 private:
  std::unique_ptr<v1::Ingest::Stub> stub_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::NodeReport, v1::Ack>> stream_;
};

// A report `sequence` seconds after a base well in the past (never ahead of the exporter's
// clock), with one sim device (firmware `firmware`) whose link nvlink0 is up or down, held by
// Slurm job train-7.
v1::NodeReport Report(const std::string& node, uint64_t sequence, bool link_up,
                      const std::string& firmware = "1.2.0", int devices = 1, int links = 1) {
  static const int64_t base_s = std::chrono::duration_cast<std::chrono::seconds>(
                                    std::chrono::system_clock::now().time_since_epoch())
                                    .count() -
                                10'000;
  v1::NodeReport r;
  r.set_node(node);
  r.set_agent_instance_id("diag-test");
  r.set_sequence(sequence);
  r.mutable_timestamp()->set_seconds(base_s + static_cast<int64_t>(sequence));
  r.mutable_interval()->set_seconds(1);
  for (int d = 0; d < devices; ++d) {
    v1::DeviceTelemetry* device = r.add_devices();
    device->mutable_identity()->set_vendor("sim");
    device->mutable_identity()->set_model("Sim Accelerator");
    device->mutable_identity()->set_index(d);
    device->mutable_identity()->set_uuid("sim-" + node + "-" + std::to_string(d));
    device->mutable_identity()->set_firmware_version(firmware);
    device->set_up(true);
    auto* holder = device->add_holders();  // a Slurm job on every device: findings carry it
    holder->set_kind(v1::HOLDER_KIND_SLURM);
    holder->set_job("train-7");
    for (int l = 0; l < links; ++l) {
      v1::Link* link = device->add_links();
      link->set_name("nvlink" + std::to_string(l));
      link->set_up(l == 0 ? link_up : true);
      link->set_transmit_bytes_total(sequence * 1000);
      link->set_receive_bytes_total(sequence * 1000);
    }
  }
  return r;
}

// Keeps every event of one Watch stream, read on a thread of its own.
class WatchClient {
 public:
  WatchClient(const Exporter& exporter, v1::WatchRequest request)
      : stub_(v1::Query::NewStub(Channel(exporter))) {
    reader_ = stub_->Watch(&context_, request);
    thread_ = std::thread([this] {
      v1::WatchEvent event;
      while (reader_->Read(&event)) {
        std::lock_guard lock(mu_);
        events_.push_back(event);
      }
      status_ = reader_->Finish();
      ended_ = true;
    });
  }
  ~WatchClient() {
    context_.TryCancel();
    thread_.join();
  }

  std::vector<v1::WatchEvent> events() {
    std::lock_guard lock(mu_);
    return events_;
  }
  // Without copying: tests poll this while thousands of events arrive.
  size_t CountFindings(std::string_view rule) {
    std::lock_guard lock(mu_);
    return std::count_if(events_.begin(), events_.end(),
                         [&](const v1::WatchEvent& e) { return e.finding().rule() == rule; });
  }
  bool ended() const { return ended_; }
  // Once ended.
  const grpc::Status& status() const { return status_; }

 private:
  std::unique_ptr<v1::Query::Stub> stub_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReader<v1::WatchEvent>> reader_;
  std::thread thread_;
  std::mutex mu_;
  std::vector<v1::WatchEvent> events_;
  grpc::Status status_;
  std::atomic<bool> ended_{false};
};

// "R<seq>" for a report, "open:<rule>" / "closed:<rule>" for a finding of `rule` (other rules'
// findings are left out: the test is about one rule).
std::vector<std::string> Describe(const std::vector<v1::WatchEvent>& events,
                                  const std::string& rule) {
  std::vector<std::string> out;
  for (const v1::WatchEvent& e : events) {
    if (e.has_report()) {
      out.push_back("R" + std::to_string(e.report().sequence()));
    } else if (e.finding().rule() == rule) {
      out.push_back((e.finding().has_end() ? "closed:" : "open:") + e.finding().rule());
    }
  }
  return out;
}

const std::map<std::string, std::string> kLinkDown{{"rule", "link_down"},
                                                   {"node", "n1"},
                                                   {"device", "0"},
                                                   {"link", "nvlink0"},
                                                   {"severity", "critical"}};

TEST(DiagnosticsOnline, LinkDownOpensAndClosesInMetricsQueryAndWatch) {
  LoopbackExporter exporter(Options());

  // Before any finding, every rule's counters are there at 0.
  auto samples = Scrape(exporter);
  EXPECT_EQ(FindValue(samples, "accelmon_diagnosis_findings_total",
                      {{"rule", "link_down"}, {"severity", "critical"}}),
            0.0);
  EXPECT_EQ(FindValue(samples, "accelmon_diagnosis_findings_total",
                      {{"rule", "firmware_below_minimum"}, {"severity", "warning"}}),
            0.0);
  EXPECT_EQ(CountSamples(samples, "accelmon_diagnosis_active"), 0u);

  v1::WatchRequest request;
  request.set_reports(true);
  WatchClient watch(exporter, request);
  ASSERT_TRUE(WaitFor([&] { return exporter.query()->watchers() == 1; }, 10s));

  auto ingest = std::make_unique<IngestClient>(exporter);
  EXPECT_EQ(ingest->Send(Report("n1", 1, /*link_up=*/true)), v1::Ack::STATUS_APPLIED);
  EXPECT_EQ(ingest->Send(Report("n1", 2, /*link_up=*/false)), v1::Ack::STATUS_APPLIED);

  // The rules run on their own thread, after the acks: wait for them to have seen both.
  ASSERT_TRUE(WaitFor(
      [&] {
        samples = Scrape(exporter);
        return FindValue(samples, "accelmon_exporter_diagnosis_reports_total") == 2.0;
      },
      10s));
  EXPECT_EQ(FindValue(samples, "accelmon_diagnosis_active", kLinkDown), 1.0);
  EXPECT_EQ(FindValue(samples, "accelmon_diagnosis_active",
                      {{"rule", "link_down"}, {"job_id", "train-7"}}),
            1.0)
      << "the finding's series carries its device's job";
  EXPECT_EQ(FindValue(samples, "accelmon_diagnosis_findings_total",
                      {{"rule", "link_down"}, {"severity", "critical"}}),
            1.0);
  EXPECT_EQ(FindValue(samples, "accelmon_exporter_diagnosis_dropped_reports_total"), 0.0);
  EXPECT_EQ(FindValue(samples, "accelmon_exporter_diagnosis_out_of_order_total"), 0.0);

  // Sent again (an agent reconnecting): a duplicate changes nothing.
  EXPECT_EQ(ingest->Send(Report("n1", 2, /*link_up=*/false)), v1::Ack::STATUS_DUPLICATE);
  samples = Scrape(exporter);
  EXPECT_EQ(FindValue(samples, "accelmon_diagnosis_findings_total",
                      {{"rule", "link_down"}, {"severity", "critical"}}),
            1.0);
  EXPECT_EQ(FindValue(samples, "accelmon_exporter_diagnosis_reports_total"), 2.0);

  EXPECT_EQ(ingest->Send(Report("n1", 3, /*link_up=*/true)), v1::Ack::STATUS_APPLIED);
  ingest.reset();
  ASSERT_TRUE(WaitFor(
      [&] {
        samples = Scrape(exporter);
        return FindValue(samples, "accelmon_exporter_diagnosis_reports_total") == 3.0;
      },
      10s));
  EXPECT_EQ(FindValue(samples, "accelmon_diagnosis_active", {{"rule", "link_down"}}), std::nullopt);
  EXPECT_EQ(FindValue(samples, "accelmon_diagnosis_findings_total",
                      {{"rule", "link_down"}, {"severity", "critical"}}),
            1.0);

  // Watch saw each report and, right after the report that caused it, each change.
  ASSERT_TRUE(WaitFor([&] { return Describe(watch.events(), "link_down").size() >= 5; }, 10s));
  EXPECT_EQ(Describe(watch.events(), "link_down"),
            (std::vector<std::string>{"R1", "R2", "open:link_down", "R3", "closed:link_down"}));
  v1::Finding opened;
  for (const v1::WatchEvent& e : watch.events()) {
    if (e.finding().rule() == "link_down") {
      opened = e.finding();
      break;
    }
  }
  EXPECT_EQ(opened.severity(), "critical");
  EXPECT_EQ(opened.node(), "n1");
  EXPECT_EQ(opened.device(), "0");
  EXPECT_EQ(opened.link(), "nvlink0");
  EXPECT_EQ(opened.job(), "train-7") << "Watch findings carry their device's job";
  EXPECT_EQ(opened.consequence_of(), "") << "the job's first finding";
  EXPECT_FALSE(opened.summary().empty());

  auto query = v1::Query::NewStub(Channel(exporter));
  {
    grpc::ClientContext context;
    v1::GetNodesRequest nodes;
    v1::GetNodesResponse response;
    ASSERT_TRUE(query->GetNodes(&context, nodes, &response).ok());
    ASSERT_EQ(response.reports_size(), 1);
    EXPECT_EQ(response.reports(0).node(), "n1");
    EXPECT_EQ(response.reports(0).sequence(), 3u);
  }
  {
    grpc::ClientContext context;
    v1::GetNodesRequest nodes;
    nodes.add_nodes("someone-else");
    v1::GetNodesResponse response;
    ASSERT_TRUE(query->GetNodes(&context, nodes, &response).ok());
    EXPECT_EQ(response.reports_size(), 0);
  }
  {
    grpc::ClientContext context;
    v1::GetFindingsResponse response;
    ASSERT_TRUE(query->GetFindings(&context, v1::GetFindingsRequest(), &response).ok());
    for (const v1::Finding& f : response.findings()) EXPECT_NE(f.rule(), "link_down");
  }
  {
    grpc::ClientContext context;
    v1::GetFindingsRequest findings;
    findings.set_include_closed(true);
    findings.add_nodes("n1");
    v1::GetFindingsResponse response;
    ASSERT_TRUE(query->GetFindings(&context, findings, &response).ok());
    ASSERT_GE(response.findings_size(), 1);
    EXPECT_EQ(response.findings(0).rule(), "link_down");
    EXPECT_TRUE(response.findings(0).has_end());
    EXPECT_LT(response.findings(0).start().seconds(), response.findings(0).end().seconds());
  }
  exporter.Stop();
  EXPECT_TRUE(WaitFor([&] { return watch.ended(); }, 10s));
}

TEST(DiagnosticsOnline, FirmwareBelowMinimumFiresAndWatchStartsWithIt) {
  LoopbackExporter exporter(Options());
  {
    IngestClient ingest(exporter);
    EXPECT_EQ(ingest.Send(Report("n2", 1, true, "0.9.0")), v1::Ack::STATUS_APPLIED);
    EXPECT_EQ(ingest.Send(Report("n2", 2, true, "0.9.0")), v1::Ack::STATUS_APPLIED);
  }
  std::vector<testing::Sample> samples;
  ASSERT_TRUE(WaitFor(
      [&] {
        samples = Scrape(exporter);
        return FindValue(samples, "accelmon_exporter_diagnosis_reports_total") == 2.0;
      },
      10s));
  EXPECT_EQ(FindValue(samples, "accelmon_diagnosis_active",
                      {{"rule", "firmware_below_minimum"},
                       {"node", "n2"},
                       {"device", "0"},
                       {"link", ""},
                       {"severity", "warning"}}),
            1.0);
  EXPECT_EQ(FindValue(samples, "accelmon_diagnosis_findings_total",
                      {{"rule", "firmware_below_minimum"}, {"severity", "warning"}}),
            1.0);

  // A watcher arriving later starts with the latest report and the open finding.
  v1::WatchRequest request;
  request.set_reports(true);
  request.set_initial_state(true);
  request.add_nodes("n2");
  WatchClient watch(exporter, request);
  ASSERT_TRUE(
      WaitFor([&] { return Describe(watch.events(), "firmware_below_minimum").size() >= 2; }, 10s));
  EXPECT_EQ(Describe(watch.events(), "firmware_below_minimum"),
            (std::vector<std::string>{"R2", "open:firmware_below_minimum"}));

  // Another node's events are filtered out.
  v1::WatchRequest other;
  other.set_initial_state(true);
  other.add_nodes("n3");
  WatchClient none(exporter, other);
  ASSERT_TRUE(WaitFor([&] { return exporter.query()->watchers() == 2; }, 10s));
  // n3's first finding reaches that watcher after whatever it was sent before: it must be the
  // first event there, or n2's state leaked through the filter.
  {
    IngestClient ingest(exporter);
    EXPECT_EQ(ingest.Send(Report("n3", 1, true, "0.9.0")), v1::Ack::STATUS_APPLIED);
    EXPECT_EQ(ingest.Send(Report("n3", 2, true, "0.9.0")), v1::Ack::STATUS_APPLIED);
  }
  ASSERT_TRUE(WaitFor([&] { return !none.events().empty(); }, 10s));
  for (const v1::WatchEvent& e : none.events()) {
    ASSERT_TRUE(e.has_finding()) << e.ShortDebugString();
    EXPECT_EQ(e.finding().node(), "n3") << e.ShortDebugString();
  }
}

TEST(DiagnosticsOnline, ExpiredNodesCloseTheirFindings) {
  LoopbackExporter exporter(Options(/*expire_after=*/2s));
  {
    IngestClient ingest(exporter);
    ingest.Send(Report("n4", 1, true));
    ingest.Send(Report("n4", 2, false));
  }
  EXPECT_TRUE(WaitFor(
      [&] {
        return FindValue(Scrape(exporter), "accelmon_diagnosis_active",
                         {{"node", "n4"}, {"rule", "link_down"}}) == 1.0;
      },
      10s));
  ASSERT_TRUE(WaitFor(
      [&] { return CountSamples(Scrape(exporter), "accelmon_diagnosis_active") == 0; }, 10s))
      << "the node expired: its findings closed";
  auto query = v1::Query::NewStub(Channel(exporter));
  grpc::ClientContext context;
  v1::GetFindingsRequest findings;
  findings.set_include_closed(true);
  v1::GetFindingsResponse response;
  ASSERT_TRUE(query->GetFindings(&context, findings, &response).ok());
  ASSERT_GE(response.findings_size(), 1);
  for (const v1::Finding& f : response.findings()) EXPECT_TRUE(f.has_end()) << f.rule();
}

TEST(DiagnosticsOnline, SlowWatcherNeverBlocksIngestAndStopIsClean) {
  LoopbackExporter exporter(Options());

  // Never reads: its window fills and its queue overflows.
  auto stub = v1::Query::NewStub(Channel(exporter));
  grpc::ClientContext stuck_context;
  v1::WatchRequest request;
  request.set_reports(true);
  auto stuck = stub->Watch(&stuck_context, request);
  // Reads every finding, until the server ends the stream.
  WatchClient reading(exporter, v1::WatchRequest());
  ASSERT_TRUE(WaitFor([&] { return exporter.query()->watchers() == 2; }, 10s));

  // In batches that the reading watcher's queue holds whole (8 findings a report, 64 reports
  // < kWatchQueueCapacity events): on a loaded machine an unpaced reader may fall a queue behind
  // and lose events by design. The stuck watcher never reads, so it overflows all the same.
  constexpr int kReports = 2000;
  constexpr int kBatch = 64;
  static_assert(8 * kBatch < QueryService::kWatchQueueCapacity);
  // Each device's nvlink0 goes down at 3, 5, ... 1999 and up at 4, ... 2000: one finding event
  // per device and report from the third on.
  const auto link_events_until = [](int seq) {
    return 8u * static_cast<size_t>(std::max(0, seq - 2));
  };
  {
    IngestClient ingest(exporter);
    for (int i = 1; i <= kReports; ++i) {
      // 8 devices of 16 links: about 20 KiB a report, far beyond the stuck client's window.
      ASSERT_EQ(ingest.Send(Report("n5", i, i % 2 == 0, "1.2.0", 8, 16)), v1::Ack::STATUS_APPLIED);
      if (i % kBatch == 0 || i == kReports) {
        ASSERT_TRUE(WaitFor(
            [&] { return reading.CountFindings("link_down") == link_events_until(i); }, 30s))
            << "after report " << i << ": " << reading.CountFindings("link_down");
      }
    }
  }
  EXPECT_EQ(exporter.stats().reports_applied.load(), static_cast<uint64_t>(kReports));
  EXPECT_GT(exporter.query()->dropped(), 0u) << "the stuck watcher lost its oldest events";

  // Stop returns (a hang fails the test by its ctest timeout) and ends every stream.
  exporter.Stop();
  EXPECT_EQ(exporter.query()->watchers(), 0u);
  ASSERT_TRUE(WaitFor([&] { return reading.ended(); }, 10s));
  EXPECT_TRUE(reading.status().ok()) << reading.status().error_message();
  stuck_context.TryCancel();
}

TEST(DiagnosticsOnline, WatchClientThatNeverReadsHoldsNeitherAcksNorScrapes) {
  LoopbackExporter exporter(Options());

  // Opens the stream and never reads: its flow-control window fills after a few reports.
  auto stub = v1::Query::NewStub(Channel(exporter));
  grpc::ClientContext stuck_context;
  v1::WatchRequest request;
  request.set_reports(true);
  auto stuck = stub->Watch(&stuck_context, request);
  ASSERT_TRUE(WaitFor([&] { return exporter.query()->watchers() == 1; }, 10s));

  // More reports than the diagnostics queue and the watcher's queue hold together: had either
  // waited for the stuck client, ingest would stall and acks stop.
  constexpr int kReports = 2500;
  // Checked at run time: clang 14 cannot evaluate DiagnosticsOptions{} (it holds std::strings)
  // in a constant expression.
  ASSERT_GT(kReports, DiagnosticsOptions{}.queue_capacity + QueryService::kWatchQueueCapacity);
  int applied = 0;
  {
    IngestClient ingest(exporter);
    for (int i = 1; i <= kReports; ++i) {
      // 4 devices of 8 links (a few KiB a report), nvlink0 flapping: findings on every report.
      applied += ingest.Send(Report("n6", i, i % 2 == 0, "1.2.0", 4, 8)) == v1::Ack::STATUS_APPLIED;
      if (i % 500 == 0) {
        // /metrics answers meanwhile, and already counts every acknowledged report.
        const auto response = HttpGet("127.0.0.1", exporter.web_port(), "/metrics");
        ASSERT_EQ(response.status, 200);
        EXPECT_EQ(
            FindValue(ParseExposition(response.body), "accelmon_exporter_reports_ingested_total"),
            static_cast<double>(i));
      }
    }
  }
  EXPECT_EQ(applied, kReports);

  // Every acknowledged report was diagnosed or counted dropped; the stuck client lost events.
  std::vector<testing::Sample> samples;
  EXPECT_TRUE(WaitFor(
      [&] {
        samples = Scrape(exporter);
        const auto diagnosed = FindValue(samples, "accelmon_exporter_diagnosis_reports_total");
        const auto dropped =
            FindValue(samples, "accelmon_exporter_diagnosis_dropped_reports_total");
        return diagnosed && dropped && *diagnosed + *dropped == kReports;
      },
      30s))
      << "diagnosed "
      << FindValue(samples, "accelmon_exporter_diagnosis_reports_total").value_or(-1)
      << ", dropped "
      << FindValue(samples, "accelmon_exporter_diagnosis_dropped_reports_total").value_or(-1);
  EXPECT_EQ(FindValue(samples, "accelmon_exporter_reports_ingested_total"), kReports);
  EXPECT_GT(exporter.query()->dropped(), 0u) << "the stuck watcher lost its oldest events";
  EXPECT_EQ(exporter.query()->watchers(), 1u) << "and is still subscribed";

  exporter.Stop();
  EXPECT_EQ(exporter.query()->watchers(), 0u);
  stuck_context.TryCancel();
}

}  // namespace
}  // namespace diagnostics_test
}  // namespace accelmon

namespace accelmon {
namespace diagnostics_test {
namespace {

// Issue 45 online: the job_stall_after_device_lost scenario (4 simulated nodes of job 4711, a GPU
// of sim-2 lost with XID 79, every rank stalled after it, the job torn down node by node) played
// through a real exporter over gRPC, each node on its own stream. The exporter's findings: the
// lost device's carry its last known job, and the job has one job_stall, a consequence of the
// XID, ended once the job is gone.
TEST(DiagnosticsOnline, ALostDeviceKeepsItsJobAndTheJobStallsOnceAfterIt) {
  LoopbackExporter exporter(Options());
  const auto scenario = std::make_shared<collectors::Scenario>(collectors::LoadScenario(
      std::string(ACCELMON_FIXTURES_DIR) + "/scenarios/job_stall_after_device_lost.yaml"));
  constexpr int kNodes = 4;
  std::vector<collectors::SimCollector> sims;
  std::vector<std::unique_ptr<IngestClient>> streams;
  for (int n = 0; n < kNodes; ++n) {
    const std::string node = "sim-" + std::to_string(n);
    sims.emplace_back(collectors::SimOptions{.devices = 8,
                                             .seed = collectors::SimSeedForNode(node),
                                             .scenario = scenario,
                                             .node = node,
                                             .node_index = n,
                                             .nodes = kNodes});
    streams.push_back(std::make_unique<IngestClient>(exporter));
  }
  // 50 simulated minutes at 10 s, stamped from a base in the past.
  const int64_t base_s = std::chrono::duration_cast<std::chrono::seconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count() -
                         10'000;
  uint64_t sent = 0;
  for (uint64_t seq = 1; seq <= 301; ++seq) {
    for (int n = 0; n < kNodes; ++n) {
      v1::NodeReport r;
      r.set_node("sim-" + std::to_string(n));
      r.set_agent_instance_id("lost-device-test");
      r.set_sequence(seq);
      r.mutable_timestamp()->set_seconds(base_s + static_cast<int64_t>(seq - 1) * 10);
      r.mutable_interval()->set_seconds(10);
      sims[static_cast<size_t>(n)].Collect(r);
      ASSERT_EQ(streams[static_cast<size_t>(n)]->Send(r), v1::Ack::STATUS_APPLIED);
      ++sent;
    }
  }
  ASSERT_TRUE(WaitFor(
      [&] {
        return FindValue(Scrape(exporter), "accelmon_exporter_diagnosis_reports_total", {}) ==
               static_cast<double>(sent);
      },
      30s))
      << "the diagnostics thread did not get to every report";

  auto query = v1::Query::NewStub(Channel(exporter));
  grpc::ClientContext context;
  v1::GetFindingsRequest request;
  request.set_include_closed(true);
  v1::GetFindingsResponse response;
  ASSERT_TRUE(query->GetFindings(&context, request, &response).ok());
  std::vector<v1::Finding> stalls;
  bool lost = false;
  bool xid = false;
  for (const v1::Finding& f : response.findings()) {
    if (f.rule() == "job_stall") stalls.push_back(f);
    if (f.node() == "sim-2" && f.device() == "3" && f.rule() == "device_lost") {
      lost = true;
      EXPECT_EQ(f.job(), "4711") << "the lost device's last known job";
    }
    if (f.node() == "sim-2" && f.device() == "3" && f.rule() == "xid_error") {
      xid = true;
      EXPECT_EQ(f.job(), "4711");
    }
  }
  EXPECT_TRUE(lost);
  EXPECT_TRUE(xid);
  ASSERT_EQ(stalls.size(), 1u) << "one job_stall for the episode";
  EXPECT_EQ(stalls[0].job(), "4711");
  EXPECT_EQ(stalls[0].consequence_of(), "xid_error on sim-2 device 3");
  EXPECT_TRUE(stalls[0].has_end()) << "ended once the job was gone";
  EXPECT_EQ(FindValue(Scrape(exporter), "accelmon_diagnosis_findings_total",
                      {{"rule", "job_stall"}, {"severity", "critical"}}),
            1.0);
  streams.clear();
  exporter.Stop();
}

}  // namespace
}  // namespace diagnostics_test
}  // namespace accelmon
