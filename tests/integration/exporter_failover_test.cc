// An agent given two exporters over loopback: it streams to the one rendezvous hashing ranks first
// for its node, fails over to the other when that one goes away, and moves back when it returns.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "collectors/sim.h"
#include "daemon/agent/agent.h"
#include "daemon/agent/rendezvous.h"
#include "support/loopback_exporter.h"
#include "support/prom_text.h"
#include "support/wait.h"

namespace accelmon {
namespace exporter_failover_test {
namespace {

using namespace std::chrono_literals;
using testing::WaitFor;

constexpr char kNode[] = "failover-node";

collectors::CollectorSet SimCollectors() {
  std::vector<std::unique_ptr<collectors::Collector>> list;
  list.push_back(
      std::make_unique<collectors::SimCollector>(collectors::SimOptions{.devices = 2, .seed = 7}));
  return collectors::CollectorSet(std::move(list));
}

std::unique_ptr<testing::LoopbackExporter> StartExporter(int grpc_port) {
  return std::make_unique<testing::LoopbackExporter>(ExporterOptions{}, grpc_port);
}

uint64_t Applied(Exporter& exporter) { return exporter.stats().reports_applied.load(); }
// Applied now or before (a re-send): what this exporter settled.
uint64_t Settled(Exporter& exporter) {
  return Applied(exporter) + exporter.stats().reports_duplicate.load();
}

// Two loopback ports kept for a test, and which of them rendezvous hashing ranks first for
// kNode (it depends on the ports): the top-ranked exporter can come back on its port.
struct RankedPorts {
  testing::ReservedPort a, b;
  std::vector<std::string> addresses{a.address(), b.address()};
  std::vector<std::string> ranked = RankByRendezvous(kNode, addresses);
  int top = ranked.front() == a.address() ? a.port() : b.port();
  int next = top == a.port() ? b.port() : a.port();
};

// The agent's uplink to both, with short backoffs.
UplinkOptions FastUplink(const RankedPorts& ports, std::chrono::milliseconds return_probe) {
  UplinkOptions options;
  options.exporter_addresses = ports.addresses;
  options.node = kNode;
  options.min_backoff = 20ms;
  options.max_backoff = 100ms;
  options.return_probe_interval = return_probe;
  return options;
}

TEST(ExporterFailoverTest, FailsOverToTheNextRankedAndMovesBack) {
  const RankedPorts ports;
  const auto& ranked = ports.ranked;
  auto first = StartExporter(ports.top);
  auto second = StartExporter(ports.next);
  Uplink uplink(FastUplink(ports, 100ms));
  Agent agent(AgentOptions{.node = kNode, .interval = 20ms}, SimCollectors(), uplink);
  uplink.Start();
  agent.Start();

  // The top-ranked exporter gets the reports; the other none.
  ASSERT_TRUE(WaitFor([&] { return Applied(*first) >= 5; }, 20s));
  EXPECT_EQ(uplink.stats().exporter, ranked[0]);
  EXPECT_EQ(Applied(*second), 0u);

  // It goes away: reports continue to the next in the ranking.
  first->Stop();
  const uint64_t settled_before_stop = Settled(*first);
  first.reset();
  ASSERT_TRUE(WaitFor([&] { return Applied(*second) >= 5; }, 20s))
      << "no failover to " << ranked[1];
  EXPECT_EQ(uplink.stats().exporter, ranked[1]);

  // It returns on the same port: the agent moves back, and the other stops hearing from it.
  first = StartExporter(ports.top);
  ASSERT_TRUE(WaitFor([&] { return Applied(*first) >= 5; }, 20s)) << "never moved back";
  EXPECT_EQ(uplink.stats().exporter, ranked[0]);

  agent.Stop();
  ASSERT_TRUE(uplink.WaitUntilDrained(20s));
  uplink.Stop();
  EXPECT_EQ(uplink.stats().dropped, 0u);
  // Every report was settled by one exporter or another (a re-send across a move may be applied
  // by both: at least once).
  EXPECT_GE(settled_before_stop + Settled(*second) + Settled(*first), agent.last_sequence());
}

TEST(ExporterFailoverTest, ReportsUnacknowledgedAtAFailoverAreSentAgainAndCounted) {
  const RankedPorts ports;
  // The first exporter reads one report a minute: the agent's next ones wait in the stream,
  // written and unacknowledged, when it goes away.
  ExporterOptions slow;
  slow.max_reports_per_second = 1.0 / 60;
  auto first = std::make_unique<testing::LoopbackExporter>(slow, ports.top);
  auto second = StartExporter(ports.next);
  Uplink uplink(FastUplink(ports, 1h));  // stays on the second once there
  Agent agent(AgentOptions{.node = kNode, .interval = 20ms}, SimCollectors(), uplink);
  uplink.Start();
  agent.Start();
  ASSERT_TRUE(WaitFor([&] { return Applied(*first) == 1 && agent.last_sequence() >= 5; }, 20s));
  first.reset();
  ASSERT_TRUE(WaitFor([&] { return uplink.stats().resent >= 1; }, 20s))
      << "the reports the first exporter never acknowledged are sent to the second";
  ASSERT_TRUE(WaitFor(
      [&] {
        const auto samples = testing::Scrape(*second);
        const auto resent =
            testing::FindValue(samples, "accelmon_agent_resent_reports_total", {{"node", kNode}});
        return resent && *resent >= 1;
      },
      20s))
      << "the count reaches /metrics";
  agent.Stop();
  uplink.Stop();
}

}  // namespace
}  // namespace exporter_failover_test
}  // namespace accelmon
