// The uplink's book without a disk spool: a bounded queue in memory.
#include "daemon/agent/report_log.h"

#include <gtest/gtest.h>

#include <vector>

#include "support/report_sequences.h"

namespace accelmon {
namespace report_log_test {
namespace {

using testing::Sequences;

std::shared_ptr<const v1::NodeReport> Report(uint64_t sequence) {
  auto r = std::make_shared<v1::NodeReport>();
  r->set_node("node-a");
  r->set_sequence(sequence);
  return r;
}

TEST(MemoryReportLog, KeepsTheNewestAndReadsWindows) {
  MemoryReportLog log(5);
  for (uint64_t s = 1; s <= 8; ++s) log.Append(Report(s));
  EXPECT_EQ(log.last_sequence(), 8u);
  EXPECT_EQ(log.unacknowledged(), 5u);
  EXPECT_EQ(log.dropped_reports(), 3u) << "the oldest go first";
  uint64_t scanned = 0;
  EXPECT_EQ(Sequences(log.Read(0, UINT64_MAX, 100, &scanned)),
            (std::vector<uint64_t>{4, 5, 6, 7, 8}));
  EXPECT_EQ(scanned, 8u);
  EXPECT_EQ(Sequences(log.Read(4, 8, 100, &scanned)), (std::vector<uint64_t>{5, 6, 7}));
  EXPECT_EQ(scanned, 7u);
  EXPECT_EQ(Sequences(log.Read(4, UINT64_MAX, 2, &scanned)), (std::vector<uint64_t>{5, 6}));
  EXPECT_EQ(scanned, 6u);
  EXPECT_TRUE(log.Read(8, UINT64_MAX, 100, &scanned).empty());
  EXPECT_EQ(scanned, 8u);
}

TEST(MemoryReportLog, AcknowledgedAndGivenUpAreSettled) {
  MemoryReportLog log(100);
  for (uint64_t s = 1; s <= 6; ++s) log.Append(Report(s));
  log.Acknowledge(2);
  EXPECT_EQ(log.acknowledged(), 2u);
  EXPECT_EQ(log.unacknowledged(), 4u);
  log.Acknowledge(1);  // late: changes nothing
  EXPECT_EQ(log.acknowledged(), 2u);
  log.GiveUp(4);
  EXPECT_EQ(log.acknowledged(), 4u);
  EXPECT_EQ(log.dropped_reports(), 1u);
  EXPECT_EQ(Sequences(log.Read(0, UINT64_MAX, 100, nullptr)), (std::vector<uint64_t>{5, 6}));
  log.Acknowledge(6);
  EXPECT_EQ(log.unacknowledged(), 0u);
}

}  // namespace
}  // namespace report_log_test
}  // namespace accelmon
