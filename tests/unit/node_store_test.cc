#include "daemon/exporter/node_store.h"

#include <gtest/gtest.h>

namespace accelmon {
namespace node_store_test {
namespace {

using std::chrono::minutes;
using std::chrono::seconds;

std::shared_ptr<const v1::NodeReport> Report(const std::string& node, const std::string& instance,
                                             uint64_t seq) {
  auto r = std::make_shared<v1::NodeReport>();
  r->set_node(node);
  r->set_agent_instance_id(instance);
  r->set_sequence(seq);
  r->mutable_timestamp()->set_seconds(1'700'000'000);  // kT0: not in the future
  return r;
}

const Clock::time_point kT0 = Clock::time_point(seconds(1'700'000'000));

TEST(NodeStore, KeepsTheLatestReportPerNode) {
  NodeStore store(minutes(10));
  EXPECT_EQ(store.Apply(Report("a", "i1", 1), kT0).outcome, ApplyOutcome::kApplied);
  EXPECT_EQ(store.Apply(Report("b", "i2", 1), kT0).outcome, ApplyOutcome::kApplied);
  EXPECT_EQ(store.Apply(Report("a", "i1", 2), kT0).outcome, ApplyOutcome::kApplied);
  const auto snap = store.Snapshot(kT0);
  ASSERT_EQ(snap.size(), 2u);
  EXPECT_EQ(snap[0].report->node(), "a");
  EXPECT_EQ(snap[0].report->sequence(), 2u);
  EXPECT_EQ(snap[1].report->node(), "b");
}

TEST(NodeStore, ResentReportsAreDuplicates) {
  NodeStore store(minutes(10));
  ASSERT_EQ(store.Apply(Report("a", "i1", 5), kT0).outcome, ApplyOutcome::kApplied);
  EXPECT_EQ(store.Apply(Report("a", "i1", 5), kT0).outcome, ApplyOutcome::kDuplicate);
  EXPECT_EQ(store.Apply(Report("a", "i1", 3), kT0).outcome, ApplyOutcome::kDuplicate);
  EXPECT_EQ(store.Snapshot(kT0)[0].report->sequence(), 5u);
}

// A full recording disk: reports past a stream's read-ahead are shown, not applied; sent again
// once the recording works, they are applied for the record only, and the newer report shown
// stays the node's latest until the last one shown is recorded too.
TEST(NodeStore, ReportsShownWhileTheRecordingFailsAreRecordedOnceWhenSentAgain) {
  NodeStore store(minutes(10));
  ASSERT_EQ(store.Apply(Report("a", "i1", 1), kT0).outcome, ApplyOutcome::kApplied);
  EXPECT_EQ(store.Show(Report("a", "i1", 1), kT0).outcome, ApplyOutcome::kDuplicate);
  ASSERT_EQ(store.Show(Report("a", "i1", 2), kT0).outcome, ApplyOutcome::kApplied);
  ASSERT_EQ(store.Show(Report("a", "i1", 3), kT0).outcome, ApplyOutcome::kApplied);
  EXPECT_EQ(store.Show(Report("a", "i1", 3), kT0).outcome, ApplyOutcome::kDuplicate);
  auto snap = store.Snapshot(kT0);
  ASSERT_EQ(snap.size(), 1u);
  EXPECT_EQ(snap[0].report->sequence(), 3u);
  EXPECT_TRUE(snap[0].unrecorded);

  // Sent again: applied (to be recorded and acknowledged), but nothing shown changes.
  const ApplyResult second = store.Apply(Report("a", "i1", 2), kT0);
  EXPECT_EQ(second.outcome, ApplyOutcome::kApplied);
  EXPECT_TRUE(second.shown_before);
  snap = store.Snapshot(kT0);
  EXPECT_EQ(snap[0].report->sequence(), 3u);
  EXPECT_TRUE(snap[0].unrecorded);
  const ApplyResult third = store.Apply(Report("a", "i1", 3), kT0);
  EXPECT_TRUE(third.shown_before);
  snap = store.Snapshot(kT0);
  EXPECT_EQ(snap[0].report->sequence(), 3u);
  EXPECT_FALSE(snap[0].unrecorded);
  // Each was applied once: a third copy is a duplicate, and the next report is new.
  EXPECT_EQ(store.Apply(Report("a", "i1", 3), kT0).outcome, ApplyOutcome::kDuplicate);
  const ApplyResult next = store.Apply(Report("a", "i1", 4), kT0);
  EXPECT_EQ(next.outcome, ApplyOutcome::kApplied);
  EXPECT_FALSE(next.shown_before);
  EXPECT_EQ(store.Snapshot(kT0)[0].report->sequence(), 4u);
}

TEST(NodeStore, ARestartedAgentStartsAFreshSequence) {
  NodeStore store(minutes(10));
  ASSERT_EQ(store.Apply(Report("a", "old", 500), kT0).outcome, ApplyOutcome::kApplied);
  EXPECT_EQ(store.Apply(Report("a", "new", 1), kT0).outcome, ApplyOutcome::kApplied);
  EXPECT_EQ(store.Snapshot(kT0)[0].report->agent_instance_id(), "new");
}

TEST(NodeStore, ARestoredNodeIsDownUntilItReportsAndDedupStaysAsSeeded) {
  NodeStore store(minutes(10));
  store.Seed("a", "i1", 7, kT0 + seconds(30));  // the recording's watermark
  ASSERT_TRUE(store.Restore(Report("a", "i1", 5), kT0 + seconds(30)));
  auto snap = store.Snapshot(kT0 + seconds(30));
  ASSERT_EQ(snap.size(), 1u);
  EXPECT_TRUE(snap[0].restored);
  EXPECT_EQ(snap[0].received_at, kT0) << "the report's own time, not the restart's";
  EXPECT_EQ(store.Apply(Report("a", "i1", 7), kT0 + seconds(31)).outcome, ApplyOutcome::kDuplicate)
      << "dedup follows the watermark, not the restored report";
  ASSERT_EQ(store.Apply(Report("a", "i1", 8), kT0 + seconds(31)).outcome, ApplyOutcome::kApplied);
  snap = store.Snapshot(kT0 + seconds(31));
  EXPECT_FALSE(snap[0].restored);
  EXPECT_FALSE(store.Restore(Report("a", "i1", 6), kT0 + seconds(31)))
      << "a node that reported is left alone";
  EXPECT_EQ(store.Snapshot(kT0 + seconds(31))[0].report->sequence(), 8u);
}

TEST(NodeStore, ARestoredNodeExpiresByItsReportsTime) {
  NodeStore store(minutes(10));
  ASSERT_TRUE(store.Restore(Report("a", "i1", 5), kT0 + minutes(9)));
  EXPECT_EQ(store.Snapshot(kT0 + minutes(9)).size(), 1u);
  EXPECT_EQ(store.Snapshot(kT0 + minutes(10) + seconds(1)).size(), 0u)
      << "10 minutes after its report, not after the restart";
  ASSERT_TRUE(store.Restore(Report("b", "i2", 1), kT0));
  EXPECT_EQ(store.Apply(Report("b", "i2", 1), kT0).outcome, ApplyOutcome::kDuplicate)
      << "without a watermark, the restored report's own key";
}

TEST(NodeStore, RejectsReportsThatCannotBeAttributed) {
  NodeStore store(minutes(10));
  EXPECT_EQ(store.Apply(Report("", "i", 1), kT0).reason, "missing_node");
  EXPECT_EQ(store.Apply(Report("a", "", 1), kT0).reason, "missing_instance");
  EXPECT_EQ(store.Apply(Report("a", "i", 0), kT0).reason, "missing_sequence");
  auto no_time = std::make_shared<v1::NodeReport>(*Report("a", "i", 1));
  no_time->clear_timestamp();
  const auto result = store.Apply(no_time, kT0);
  EXPECT_EQ(result.outcome, ApplyOutcome::kRejected);
  EXPECT_EQ(result.reason, "missing_timestamp");
  EXPECT_EQ(store.size(), 0u);
}

TEST(NodeStore, RejectsReportsOutsideItsLimits) {
  NodeStore store(minutes(10), ValidationLimits{.max_devices = 1});
  auto two = std::make_shared<v1::NodeReport>(*Report("a", "i", 1));
  two->add_devices();
  two->add_devices();
  EXPECT_EQ(store.Apply(two, kT0).reason, "too_many_devices");
  auto future = std::make_shared<v1::NodeReport>(*Report("a", "i", 1));
  future->mutable_timestamp()->set_seconds(1'700'000'000 + 3600);
  EXPECT_EQ(store.Apply(future, kT0).reason, "timestamp_in_future");
  EXPECT_EQ(store.size(), 0u);
}

TEST(NodeStore, SilentNodesExpire) {
  NodeStore store(minutes(10));
  store.Apply(Report("a", "i", 1), kT0);
  store.Apply(Report("b", "i", 1), kT0 + minutes(5));
  EXPECT_EQ(store.Snapshot(kT0 + minutes(10)).size(), 2u);
  const auto later = store.Snapshot(kT0 + minutes(11));
  ASSERT_EQ(later.size(), 1u);
  EXPECT_EQ(later[0].report->node(), "b");
  EXPECT_EQ(store.size(), 1u);
  // A node that comes back after expiring is simply new again.
  EXPECT_EQ(store.Apply(Report("a", "i", 2), kT0 + minutes(12)).outcome, ApplyOutcome::kApplied);
}

TEST(NodeStore, AReloadsExpiryAndLimitsApplyFromTheNextSnapshotAndReport) {
  NodeStore store(minutes(10));
  store.Apply(Report("a", "i", 1), kT0);
  EXPECT_EQ(store.Snapshot(kT0 + minutes(3)).size(), 1u);
  store.Reconfigure(minutes(2), ValidationLimits{.max_devices = 1});
  EXPECT_EQ(store.expire_after(), minutes(2));
  EXPECT_EQ(store.Snapshot(kT0 + minutes(3)).size(), 0u) << "silent for longer than the new 2m";
  auto two = std::make_shared<v1::NodeReport>(*Report("a", "i", 2));
  two->add_devices();
  two->add_devices();
  EXPECT_EQ(store.Apply(two, kT0).reason, "too_many_devices");
}

}  // namespace
}  // namespace node_store_test
}  // namespace accelmon
