// A real exporter and a real agent in one process, talking gRPC over loopback (port 0), scraped
// over real HTTP: what the agent sent is what /metrics shows.
#include <grpcpp/create_channel.h>
#include <gtest/gtest.h>

#include <mutex>
#include <optional>
#include <thread>

#include "collectors/meminfo.h"
#include "collectors/sim.h"
#include "daemon/agent/agent.h"
#include "daemon/exporter/exporter.h"
#include "support/http_get.h"
#include "support/loopback_exporter.h"
#include "support/prom_text.h"
#include "support/report_tap.h"
#include "support/wait.h"

namespace accelmon {
namespace agent_exporter_test {
namespace {

using namespace std::chrono_literals;
using testing::FindValue;
using testing::HttpGet;
using testing::LoopbackExporter;
using testing::ParseExposition;
using testing::ReservedPort;

const std::string kFixtures = ACCELMON_FIXTURES_DIR;

collectors::CollectorSet FixtureCollectors(int sim_devices) {
  std::vector<std::unique_ptr<collectors::Collector>> list;
  list.push_back(std::make_unique<collectors::MeminfoCollector>(
      collectors::PathResolver(kFixtures + "/host/proc", kFixtures + "/host/sys")));
  list.push_back(std::make_unique<collectors::SimCollector>(
      collectors::SimOptions{.devices = sim_devices, .seed = 11}));
  return collectors::CollectorSet(std::move(list));
}

using testing::WaitFor;

TEST(AgentExporter, MetricsShowExactlyWhatTheAgentSent) {
  LoopbackExporter exporter;
  ASSERT_GT(exporter.grpc_port(), 0);
  ASSERT_GT(exporter.web_port(), 0);

  Uplink uplink(UplinkOptions{.exporter_address = exporter.grpc_address()});
  Agent agent(AgentOptions{.node = "it-node", .interval = 50ms}, FixtureCollectors(4), uplink);
  testing::ReportTap tap;
  agent.set_report_observer(tap.Observer());
  uplink.Start();
  agent.Start();

  ASSERT_TRUE(WaitFor([&] { return exporter.stats().reports_applied.load() >= 5; }, 10s));
  // The node is up while its agent reports, and down three intervals (150 ms) after it stops:
  // both read as conditions, since a sanitizer build on a busy machine can take longer than
  // that between the agent's last report and a scrape.
  auto node_up = [&] {
    const auto r = HttpGet("127.0.0.1", exporter.web_port(), "/metrics");
    return r.status == 200
               ? FindValue(ParseExposition(r.body), "accelmon_node_up", {{"node", "it-node"}})
               : std::nullopt;
  };
  EXPECT_TRUE(WaitFor([&] { return node_up() == 1.0; }, 10s)) << "up while the agent reports";
  agent.Stop();
  ASSERT_TRUE(uplink.WaitUntilDrained(10s)) << "every report is acknowledged";
  uplink.Stop();

  const auto sent = tap.reports();
  ASSERT_GE(sent.size(), 5u);
  EXPECT_EQ(exporter.stats().reports_applied.load(), sent.size());
  EXPECT_EQ(exporter.stats().reports_duplicate.load(), 0u);
  const v1::NodeReport& last = sent.back();

  const auto response = HttpGet("127.0.0.1", exporter.web_port(), "/metrics");
  ASSERT_EQ(response.status, 200);
  const auto samples = ParseExposition(response.body);

  const double ts = static_cast<double>(last.timestamp().seconds()) +
                    static_cast<double>(last.timestamp().nanos()) / 1e9;
  EXPECT_DOUBLE_EQ(*FindValue(samples, "accelmon_node_last_report_timestamp_seconds"), ts);
  EXPECT_EQ(FindValue(samples, "accelmon_host_memory_total_bytes", {{"node", "it-node"}}),
            24683584.0 * 1024);
  EXPECT_EQ(FindValue(samples, "accelmon_agent_collector_success", {{"collector", "meminfo"}}),
            1.0);

  ASSERT_EQ(last.devices_size(), 4);
  for (const auto& d : last.devices()) {
    const std::map<std::string, std::string> labels{
        {"node", "it-node"},
        {"device", std::to_string(d.identity().index())},
        {"uuid", d.identity().uuid()}};
    SCOPED_TRACE(d.identity().uuid());
    EXPECT_EQ(FindValue(samples, "accelmon_device_memory_used_bytes", labels),
              static_cast<double>(d.memory().used_bytes()));
    EXPECT_EQ(FindValue(samples, "accelmon_device_memory_free_bytes", labels),
              static_cast<double>(d.memory().free_bytes()));
    // prometheus-cpp's text serializer prints 16 significant digits: equal to within 4 ULPs.
    EXPECT_DOUBLE_EQ(*FindValue(samples, "accelmon_device_memory_fragmentation_ratio", labels),
                     d.memory().fragmentation_ratio());
    auto with = [&](std::string k, std::string v) {
      auto l = labels;
      l[k] = v;
      return l;
    };
    EXPECT_DOUBLE_EQ(
        *FindValue(samples, "accelmon_device_temperature_celsius", with("sensor", "core")),
        d.thermal().core_celsius());
    EXPECT_DOUBLE_EQ(*FindValue(samples, "accelmon_device_power_watts", labels),
                     d.power().usage_watts());
    EXPECT_DOUBLE_EQ(*FindValue(samples, "accelmon_device_energy_joules_total", labels),
                     d.power().energy_joules_total());
    EXPECT_DOUBLE_EQ(
        *FindValue(samples, "accelmon_device_utilization_ratio", with("kind", "compute")),
        d.utilization().compute_ratio());
    for (const auto& l : d.links()) {
      EXPECT_EQ(
          FindValue(samples, "accelmon_device_link_transmit_bytes_total", with("link", l.name())),
          static_cast<double>(l.transmit_bytes_total()))
          << l.name();
      EXPECT_EQ(
          FindValue(samples, "accelmon_device_link_receive_bytes_total", with("link", l.name())),
          static_cast<double>(l.receive_bytes_total()))
          << l.name();
    }
  }

  const auto health = HttpGet("127.0.0.1", exporter.web_port(), "/healthz");
  EXPECT_EQ(health.status, 200);
  EXPECT_EQ(health.body, "ok\n");
  EXPECT_TRUE(WaitFor([&] { return node_up() == 0.0; }, 10s))
      << "down three missed intervals after the agent stopped";
  exporter.Stop();
}

TEST(AgentExporter, AgentRidesOutAnExporterRestartWithoutLosingReports) {
  // The second exporter listens where the first did; the port stays ours in between.
  const ReservedPort port;
  auto first = std::make_unique<LoopbackExporter>(ExporterOptions{}, port.port());

  Uplink uplink(
      UplinkOptions{.exporter_address = port.address(), .min_backoff = 20ms, .max_backoff = 200ms});
  Agent agent(AgentOptions{.node = "restart-node", .interval = 20ms}, FixtureCollectors(2), uplink);
  testing::ReportTap tap;
  agent.set_report_observer(tap.Observer());
  uplink.Start();
  agent.Start();
  ASSERT_TRUE(WaitFor([&] { return first->stats().reports_applied.load() >= 3; }, 10s));

  first->Stop();
  first.reset();
  // Collection goes on while the exporter is away; reports wait in the uplink.
  ASSERT_TRUE(WaitFor([&] { return uplink.stats().pending >= 10; }, 10s));

  LoopbackExporter second({}, port.port());
  ASSERT_TRUE(WaitFor([&] { return uplink.stats().connected; }, 10s));
  agent.Stop();
  ASSERT_TRUE(uplink.WaitUntilDrained(10s));
  uplink.Stop();

  EXPECT_EQ(uplink.stats().dropped, 0u);
  const auto sent = tap.reports();
  const auto samples = ParseExposition(HttpGet("127.0.0.1", second.web_port(), "/metrics").body);
  const double ts = static_cast<double>(sent.back().timestamp().seconds()) +
                    static_cast<double>(sent.back().timestamp().nanos()) / 1e9;
  EXPECT_DOUBLE_EQ(*FindValue(samples, "accelmon_node_last_report_timestamp_seconds",
                              {{"node", "restart-node"}}),
                   ts);
  // The second exporter saw every report the first did not acknowledge.
  EXPECT_GE(second.stats().reports_applied.load() + second.stats().reports_duplicate.load(), 10u);
}

TEST(AgentExporter, AgentStartedBeforeTheExporterConnectsLater) {
  // The exporter's address is known, and nothing listens there, while the agent starts.
  const ReservedPort port;
  Uplink uplink(
      UplinkOptions{.exporter_address = port.address(), .min_backoff = 20ms, .max_backoff = 100ms});
  Agent agent(AgentOptions{.node = "early-node", .interval = 20ms}, FixtureCollectors(1), uplink);
  uplink.Start();
  agent.Start();
  // Reports queue up while nothing listens: several ticks' worth, none delivered.
  ASSERT_TRUE(WaitFor([&] { return uplink.stats().pending >= 3; }, 10s));
  EXPECT_FALSE(uplink.stats().connected);

  LoopbackExporter exporter({}, port.port());
  ASSERT_TRUE(WaitFor([&] { return exporter.store().size() == 1; }, 10s));
  agent.Stop();
  uplink.Stop();
}

// A raw client on the real stream: a bad report is refused with a reason and the stream goes on.
TEST(IngestStream, RejectsBadReportsAndKeepsTheStreamOpen) {
  LoopbackExporter exporter;
  auto channel = grpc::CreateChannel(exporter.grpc_address(), grpc::InsecureChannelCredentials());
  auto stub = v1::Ingest::NewStub(channel);
  grpc::ClientContext context;
  auto stream = stub->Stream(&context);

  v1::NodeReport good;
  good.set_node("raw-node");
  good.set_agent_instance_id("raw");
  good.set_sequence(1);
  good.mutable_timestamp()->set_seconds(1'700'000'000);
  v1::NodeReport nameless = good;
  nameless.clear_node();
  nameless.set_sequence(2);
  v1::NodeReport next = good;
  next.set_sequence(3);

  v1::Ack ack;
  ASSERT_TRUE(stream->Write(good));
  ASSERT_TRUE(stream->Read(&ack));
  EXPECT_EQ(ack.sequence(), 1u);
  EXPECT_EQ(ack.status(), v1::Ack::STATUS_APPLIED);

  ASSERT_TRUE(stream->Write(nameless));
  ASSERT_TRUE(stream->Read(&ack));
  EXPECT_EQ(ack.sequence(), 2u);
  EXPECT_EQ(ack.status(), v1::Ack::STATUS_REJECTED);
  EXPECT_EQ(ack.reason(), "missing_node");

  ASSERT_TRUE(stream->Write(good));  // re-sent after a (pretend) reconnect
  ASSERT_TRUE(stream->Read(&ack));
  EXPECT_EQ(ack.status(), v1::Ack::STATUS_DUPLICATE);

  ASSERT_TRUE(stream->Write(next));
  ASSERT_TRUE(stream->Read(&ack));
  EXPECT_EQ(ack.sequence(), 3u);
  EXPECT_EQ(ack.status(), v1::Ack::STATUS_APPLIED);

  stream->WritesDone();
  EXPECT_FALSE(stream->Read(&ack));
  EXPECT_TRUE(stream->Finish().ok());

  const auto samples = ParseExposition(HttpGet("127.0.0.1", exporter.web_port(), "/metrics").body);
  EXPECT_EQ(
      FindValue(samples, "accelmon_exporter_reports_rejected_total", {{"reason", "missing_node"}}),
      1.0);
  EXPECT_EQ(FindValue(samples, "accelmon_exporter_reports_duplicate_total"), 1.0);
  EXPECT_EQ(FindValue(samples, "accelmon_exporter_reports_ingested_total"), 2.0);
  exporter.Stop();
}

TEST(Exporter, APortInUseIsAClearStartupError) {
  LoopbackExporter first;
  Exporter second(
      ExporterOptions{.web_listen_address = "127.0.0.1:" + std::to_string(first.web_port()),
                      .grpc_listen_address = "127.0.0.1:0",
                      .node_expire_after = std::chrono::minutes(1)});
  try {
    second.Start();
    FAIL() << "expected a startup error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot listen for HTTP on 127.0.0.1:"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace agent_exporter_test
}  // namespace accelmon
