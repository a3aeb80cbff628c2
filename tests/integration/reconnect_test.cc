// After a short exporter outage the agent reconnects within one step of its documented backoff
// (docs/delivery.md), not gRPC's channel backoff on top of its own.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <vector>

#include "collectors/sim.h"
#include "daemon/agent/agent.h"
#include "support/loopback_exporter.h"
#include "support/wait.h"

namespace accelmon {
namespace reconnect_test {
namespace {

using namespace std::chrono_literals;
using testing::WaitFor;

constexpr std::chrono::milliseconds kInterval{50};

collectors::CollectorSet SimCollectors() {
  std::vector<std::unique_ptr<collectors::Collector>> list;
  list.push_back(
      std::make_unique<collectors::SimCollector>(collectors::SimOptions{.devices = 1, .seed = 3}));
  return collectors::CollectorSet(std::move(list));
}

TEST(ReconnectTest, AfterShortOutagesTheAgentIsBackWithinOneBackoffStep) {
  const testing::ReservedPort port;
  auto exporter = std::make_unique<testing::LoopbackExporter>(ExporterOptions{}, port.port());
  UplinkOptions options;  // the defaults the agent runs with: 100 ms doubling up to 5 s
  options.exporter_address = port.address();
  options.node = "reconnect-node";
  Uplink uplink(options);
  Agent agent(AgentOptions{.node = "reconnect-node", .interval = kInterval}, SimCollectors(),
              uplink);
  uplink.Start();
  agent.Start();
  ASSERT_TRUE(WaitFor([&] { return exporter->stats().reports_applied.load() >= 3; }, 20s));

  // Outages of 1, 1 and 3 s. The channel tries to
  // connect 0.1, 0.26, 0.52, 0.93, 1.6, 2.6, 4.3 s ... into an outage (each step 1.6 times the
  // last, jittered by a fifth, at most 5 s), and the agent starts its stream as soon as one
  // succeeds: back within 0.7 s of a 1 s outage and 1.7 s of a 3 s one; the bounds leave room
  // for a slow machine. gRPC's own timer on top of the agent's waits took 2-5 s for 3 s.
  struct Outage {
    std::chrono::milliseconds length, bound;
  };
  for (const Outage& outage :
       {Outage{1000ms, 1200ms}, Outage{1000ms, 1200ms}, Outage{3000ms, 2500ms}}) {
    exporter.reset();
    // The outage lasts as many collection intervals as it is long: the agent has that many
    // reports waiting for an acknowledgement.
    const uint64_t pending = static_cast<uint64_t>(outage.length / kInterval);
    ASSERT_TRUE(WaitFor([&] { return uplink.stats().pending >= pending; }, 30s));
    exporter = std::make_unique<testing::LoopbackExporter>(ExporterOptions{}, port.port());
    const auto back = std::chrono::steady_clock::now();
    ASSERT_TRUE(WaitFor([&] { return exporter->stats().reports_applied.load() >= 1; }, 30s));
    const auto reconnect = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::steady_clock::now() - back);
    EXPECT_LT(reconnect, outage.bound)
        << "after a " << outage.length.count() << " ms outage: reconnected after "
        << reconnect.count() << " ms";
  }
  agent.Stop();
  uplink.Stop();
}

}  // namespace
}  // namespace reconnect_test
}  // namespace accelmon
