// The uplink with a disk spool against a real exporter over loopback: reports that memory cannot
// hold, or that an earlier agent run left unacknowledged, are read back from disk and delivered;
// those the disk refused are delivered from the spool's memory, in order with the rest.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <thread>

#include "collectors/sim.h"
#include "daemon/agent/agent.h"
#include "daemon/agent/spool.h"
#include "recording/segment_writer.h"
#include "support/loopback_exporter.h"
#include "support/temp_dir.h"
#include "support/wait.h"

namespace accelmon {
namespace spool_uplink_test {
namespace {

using namespace std::chrono_literals;

collectors::CollectorSet SimCollectors() {
  std::vector<std::unique_ptr<collectors::Collector>> list;
  list.push_back(
      std::make_unique<collectors::SimCollector>(collectors::SimOptions{.devices = 2, .seed = 7}));
  return collectors::CollectorSet(std::move(list));
}

using testing::WaitFor;

class SpoolUplinkTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = ::accelmon::testing::MakeTempDir("accelmon-spool-it"); }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::unique_ptr<testing::LoopbackExporter> StartExporter() {
    return std::make_unique<testing::LoopbackExporter>(ExporterOptions{}, port_.port());
  }

  UplinkOptions Options(Spool* spool) const {
    UplinkOptions options;
    options.exporter_address = port_.address();
    options.max_pending = 5;  // memory holds little; the spool holds the rest
    options.min_backoff = 20ms;
    options.max_backoff = 100ms;
    options.spool = spool;
    return options;
  }

  std::string dir_;
  // The exporter's address, known (and refusing connections) while the agent runs without it.
  const testing::ReservedPort port_;
};

TEST_F(SpoolUplinkTest, DeliversWhatMemoryCouldNotHold) {
  Spool spool(SpoolOptions{.dir = dir_}, NewAgentInstanceId());
  Uplink uplink(Options(&spool));
  Agent agent(AgentOptions{.node = "spool-node", .instance_id = spool.instance_id()},
              SimCollectors(), uplink);
  uplink.Start();
  for (int i = 0; i < 50; ++i) uplink.Submit(agent.CollectOnce());
  EXPECT_EQ(uplink.stats().pending, 50u);
  EXPECT_EQ(uplink.stats().dropped, 0u) << "beyond memory is not dropped with a spool";

  auto exporter = StartExporter();
  ASSERT_TRUE(uplink.WaitUntilDrained(20s));
  uplink.Stop();
  EXPECT_EQ(exporter->stats().reports_applied.load(), 50u);
  EXPECT_EQ(uplink.stats().dropped, 0u);
  EXPECT_EQ(spool.acknowledged(), 50u);
}

TEST_F(SpoolUplinkTest, DeliversWhatTheDiskRefusedInOrder) {
  if (!std::filesystem::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  Spool spool(SpoolOptions{.dir = dir_}, NewAgentInstanceId());
  // The first 10 segments the spool opens take no write: each refuses one report.
  for (uint64_t index = 1; index <= 10; ++index) {
    std::filesystem::create_symlink("/dev/full", recording::SegmentFilePath(dir_, index));
  }
  Uplink uplink(Options(&spool));
  Agent agent(AgentOptions{.node = "spool-node", .instance_id = spool.instance_id()},
              SimCollectors(), uplink);
  uplink.Start();
  for (int i = 0; i < 30; ++i) uplink.Submit(agent.CollectOnce());
  EXPECT_EQ(spool.tail_reports(), 10u);
  EXPECT_EQ(uplink.stats().pending, 30u);
  EXPECT_EQ(uplink.stats().dropped, 0u);

  auto exporter = StartExporter();
  ASSERT_TRUE(uplink.WaitUntilDrained(20s));
  uplink.Stop();
  EXPECT_EQ(exporter->stats().reports_applied.load(), 30u);
  EXPECT_EQ(exporter->stats().reports_duplicate.load(), 0u) << "sent in sequence order";
  EXPECT_EQ(uplink.stats().dropped, 0u);
  EXPECT_EQ(uplink.stats().pending, 0u);
  EXPECT_EQ(spool.tail_reports(), 0u);
  EXPECT_EQ(spool.acknowledged(), 30u);
}

TEST_F(SpoolUplinkTest, NextRunResendsWhatTheLastLeftBeforeNewReports) {
  std::string instance;
  {
    Spool spool(SpoolOptions{.dir = dir_}, NewAgentInstanceId());
    instance = spool.instance_id();
    Uplink uplink(Options(&spool));
    Agent agent(AgentOptions{.node = "spool-node", .instance_id = instance}, SimCollectors(),
                uplink);
    uplink.Start();
    for (int i = 0; i < 30; ++i) uplink.Submit(agent.CollectOnce());
    uplink.Stop();
  }  // the exporter never saw them

  Spool spool(SpoolOptions{.dir = dir_}, NewAgentInstanceId());
  EXPECT_EQ(spool.instance_id(), instance);
  EXPECT_EQ(spool.last_sequence(), 30u);
  EXPECT_EQ(spool.unacknowledged(), 30u);
  Uplink uplink(Options(&spool));
  Agent agent(AgentOptions{.node = "spool-node",
                           .instance_id = spool.instance_id(),
                           .last_sequence = spool.last_sequence()},
              SimCollectors(), uplink);
  auto exporter = StartExporter();
  uplink.Start();
  for (int i = 0; i < 5; ++i) uplink.Submit(agent.CollectOnce());
  EXPECT_EQ(agent.last_sequence(), 35u);
  ASSERT_TRUE(uplink.WaitUntilDrained(20s));
  uplink.Stop();
  // Applied in order: a new report first would have made the spooled ones duplicates.
  EXPECT_EQ(exporter->stats().reports_applied.load(), 35u);
  EXPECT_EQ(exporter->stats().reports_duplicate.load(), 0u);
}

}  // namespace
}  // namespace spool_uplink_test
}  // namespace accelmon
