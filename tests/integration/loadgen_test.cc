// `accelmon loadgen` against a real exporter in this process (gRPC over loopback, port 0): every
// report a simulated node sends is acknowledged APPLIED and lands in the exporter's state whole.
// Nothing here is timed: rates and latencies are for bench/ingest_vs_echo.sh.
#include "daemon/clients/loadgen.h"

#include <gtest/gtest.h>

#include <thread>

#include "support/loopback_exporter.h"
#include "support/wait.h"

namespace accelmon {
namespace loadgen_test {
namespace {

class LoadgenTest : public ::testing::Test {
 protected:
  void StartExporter(double max_reports_per_second) {
    exporter_ = std::make_unique<testing::LoopbackExporter>(
        ExporterOptions{.max_reports_per_second = max_reports_per_second});
  }
  void TearDown() override {
    if (exporter_) exporter_->Stop();
  }

  std::string Address() const { return exporter_->grpc_address(); }

  // Every report sent was applied, none lost, none refused.
  static void ExpectAllApplied(const LoadgenResult& r) {
    for (const auto& e : r.errors) ADD_FAILURE() << e;
    EXPECT_GT(r.sent, 0U);
    EXPECT_EQ(r.applied, r.sent);
    EXPECT_EQ(r.duplicate, 0U);
    EXPECT_EQ(r.rejected, 0U);
    EXPECT_EQ(r.skipped, 0U);
    EXPECT_EQ(r.ack_latency.count, r.sent);
  }

  std::unique_ptr<testing::LoopbackExporter> exporter_;
};

TEST_F(LoadgenTest, EveryNodesReportsAreAppliedAtAnInterval) {
  StartExporter(50);
  const LoadgenOptions options{.exporter_address = Address(),
                               .nodes = 5,
                               .devices = 8,
                               .interval = std::chrono::milliseconds(100),
                               .duration = std::chrono::seconds(2),
                               .channels = 2};
  const LoadgenResult r = RunLoadgen(options);
  ExpectAllApplied(r);
  EXPECT_EQ(r.nodes, 5);
  EXPECT_EQ(r.links_per_device, 8);  // the simulator's mesh of 7 NVLinks plus PCIe

  const auto nodes = exporter_->store().Snapshot(Clock::now());
  ASSERT_EQ(nodes.size(), 5U);
  uint64_t last_sequences = 0;
  for (const NodeEntry& n : nodes) {
    EXPECT_EQ(n.report->node().rfind("loadgen-", 0), 0U) << n.report->node();
    EXPECT_EQ(n.report->devices_size(), 8);
    // The appended timestamp: stamped when sent, not when the report was simulated.
    EXPECT_GT(n.report->timestamp().seconds(), 0);
    last_sequences += n.report->sequence();
  }
  // Sequences start at 1 on every stream, so the last ones add up to every report sent.
  EXPECT_EQ(last_sequences, r.sent);
}

TEST_F(LoadgenTest, SaturationKeepsStreamsFullAndPadsLinks) {
  StartExporter(0);  // no per-stream rate limit
  const LoadgenOptions options{.exporter_address = Address(),
                               .nodes = 2,
                               .devices = 8,
                               .links_per_device = 18,
                               .interval = std::chrono::milliseconds(0),
                               .duration = std::chrono::seconds(1),
                               .max_in_flight = 8};
  const LoadgenResult r = RunLoadgen(options);
  ExpectAllApplied(r);
  EXPECT_EQ(r.links_per_device, 18);
  const auto nodes = exporter_->store().Snapshot(Clock::now());
  ASSERT_EQ(nodes.size(), 2U);
  for (const NodeEntry& n : nodes) {
    ASSERT_EQ(n.report->devices_size(), 8);
    EXPECT_EQ(n.report->devices(0).links_size(), 18);
  }
}

TEST_F(LoadgenTest, AnUnreachableExporterIsAnErrorNotAHang) {
  const testing::ReservedPort nothing_listens;  // and nothing else can take the port meanwhile
  const LoadgenResult r =
      RunLoadgen(LoadgenOptions{.exporter_address = nothing_listens.address(),
                                .nodes = 1,
                                .duration = std::chrono::seconds(1),
                                .connect_timeout = std::chrono::milliseconds(500)});
  EXPECT_EQ(r.sent, 0U);
  ASSERT_EQ(r.errors.size(), 1U);
  EXPECT_NE(r.errors[0].find("cannot connect"), std::string::npos) << r.errors[0];
}

TEST_F(LoadgenTest, AnExporterStoppingMidRunEndsTheStreamsWithErrors) {
  StartExporter(50);
  LoadgenResult r;
  std::thread load([&] {
    r = RunLoadgen(LoadgenOptions{.exporter_address = Address(),
                                  .nodes = 3,
                                  .interval = std::chrono::milliseconds(50),
                                  .duration = std::chrono::seconds(2)});
  });
  // Stops once some reports are applied; reports due afterwards find their streams ended.
  EXPECT_TRUE(
      testing::WaitFor([&] { return exporter_->store().size() == 3; }, std::chrono::seconds(10)));
  exporter_->Stop();
  load.join();
  EXPECT_GT(r.applied, 0U);
  EXPECT_FALSE(r.errors.empty());
}

}  // namespace
}  // namespace loadgen_test
}  // namespace accelmon
