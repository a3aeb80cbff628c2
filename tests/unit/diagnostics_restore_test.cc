// Open findings across an exporter restart (Engine::Save, Engine::Restore): a latching rule
// (xid_error, link_down) takes its finding back and keeps it exactly as long as it would have
// without the restart; any other rule's finding is held until the rule raises it again or has
// watched the node for its settle time without.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "diagnostics/engine.h"

namespace accelmon::diagnostics {
namespace diagnostics_restore_test {
namespace {

constexpr int64_t kT0 = 1'700'000'000;

// A node with one device (UUID GPU-0) and one NVLink, at `seconds` after kT0.
v1::NodeReport Report(int64_t seconds, bool link_up = true, bool xid = false,
                      bool throttled = false) {
  v1::NodeReport r;
  r.set_node("n1");
  r.mutable_timestamp()->set_seconds(kT0 + seconds);
  r.mutable_interval()->set_seconds(1);
  v1::DeviceTelemetry* d = r.add_devices();
  d->mutable_identity()->set_vendor("test");
  d->mutable_identity()->set_uuid("GPU-0");
  d->mutable_identity()->set_index(0);
  v1::Link* link = d->add_links();
  link->set_name("nvlink0");
  link->set_kind(v1::LINK_KIND_NVLINK);
  link->set_up(link_up);
  if (throttled) (*d->mutable_thermal()->mutable_throttle_reasons())["hw_thermal"] = true;
  if (xid) {
    v1::Event* e = r.add_events();
    e->set_kind(v1::EVENT_KIND_XID);
    e->set_code(79);
    e->set_device_uuid("GPU-0");
    *e->mutable_time() = r.timestamp();
  }
  return r;
}

struct Recorded {
  Change change;
  v1::Finding finding;
};

// One engine before the restart and one after, as the exporter has them.
class Restart : public ::testing::Test {
 protected:
  // Feeds `before` from kT0 + 1 s, one report a second, then saves and restores into `after_`.
  std::vector<v1::SavedFinding> SaveAndRestore(Engine& before) {
    std::vector<v1::SavedFinding> saved = before.Save();
    after_.set_listener([this](Change c, const v1::Finding& f) { changes_.push_back({c, f}); });
    restored_ = after_.Restore(saved);
    return saved;
  }

  bool Open(std::string_view rule) const {
    for (const v1::Finding& f : after_.OpenFindings()) {
      if (f.rule() == rule) return true;
    }
    return false;
  }

  std::vector<v1::Finding> Closed() const {
    std::vector<v1::Finding> out;
    for (const Recorded& r : changes_) {
      if (r.change == Change::kClosed) out.push_back(r.finding);
    }
    return out;
  }

  Engine after_;
  size_t restored_ = 0;
  std::vector<Recorded> changes_;
};

TEST_F(Restart, AnXidFindingStaysOpenForItsHoldTimeAfterTheLastXidThenCloses) {
  Engine before;
  before.Process(Report(1));
  before.Process(Report(2, true, /*xid=*/true));
  before.Process(Report(100, true, /*xid=*/true));  // a second XID: the hold counts from here
  before.Process(Report(101));
  const auto saved = SaveAndRestore(before);
  ASSERT_EQ(saved.size(), 1u);
  EXPECT_EQ(saved[0].latch(),
            "last_ns=" + std::to_string((kT0 + 100) * 1'000'000'000) + " critical=1");
  EXPECT_EQ(restored_, 1u);
  ASSERT_TRUE(Open("xid_error"));
  EXPECT_EQ(after_.OpenFindings()[0].start().seconds(), kT0 + 2) << "its start is kept";
  EXPECT_EQ(after_.OpenFindings()[0].severity(), "critical");
  EXPECT_TRUE(changes_.empty()) << "restoring announces nothing again";

  after_.Process(Report(300));  // no XID since the restart: held still (hold_seconds 600)
  EXPECT_TRUE(Open("xid_error"));
  after_.Process(Report(699));
  EXPECT_TRUE(Open("xid_error"));
  after_.Process(Report(700));  // 600 s after the last XID, as without the restart
  EXPECT_FALSE(Open("xid_error"));
  ASSERT_EQ(Closed().size(), 1u);
  EXPECT_EQ(Closed()[0].end().seconds(), kT0 + 700);
}

TEST_F(Restart, ALinkDownFindingStaysOpenWhileTheLinkIsDownAndClosesWhenItIsUp) {
  Engine before;
  before.Process(Report(1));
  before.Process(Report(2, /*link_up=*/false));
  SaveAndRestore(before);
  ASSERT_TRUE(Open("link_down"));
  // A fresh link_down rule never saw the link up; taken back, it knows it was.
  for (int64_t t = 3; t < 20; ++t) after_.Process(Report(t, false));
  EXPECT_TRUE(Open("link_down"));
  after_.Process(Report(20, true));
  EXPECT_FALSE(Open("link_down"));
  ASSERT_EQ(Closed().size(), 1u);
  EXPECT_EQ(Closed()[0].start().seconds(), kT0 + 2);
}

TEST_F(Restart, AWindowedFindingIsHeldForTheRulesSettleTimeThenJudgedAfresh) {
  Engine before;
  for (int64_t t = 1; t <= 40; ++t) before.Process(Report(t, true, false, /*throttled=*/true));
  SaveAndRestore(before);
  ASSERT_TRUE(Open("thermal_throttling"));
  const int64_t start = after_.OpenFindings()[0].start().seconds();
  // Throttling goes on: a fresh rule needs its 30 s again, and the finding stays open meanwhile
  // and afterwards, with its start from before the restart.
  for (int64_t t = 41; t <= 100; ++t) after_.Process(Report(t, true, false, true));
  ASSERT_TRUE(Open("thermal_throttling"));
  EXPECT_EQ(after_.OpenFindings()[0].start().seconds(), start);
  EXPECT_TRUE(Closed().empty());
}

TEST_F(Restart, AWindowedFindingWhoseConditionClearedClosesAfterTheSettleTime) {
  Engine before;
  for (int64_t t = 1; t <= 40; ++t) before.Process(Report(t, true, false, /*throttled=*/true));
  SaveAndRestore(before);
  after_.Process(Report(41));  // not throttled any more: the settle time starts here
  after_.Process(Report(70));
  EXPECT_TRUE(Open("thermal_throttling")) << "held for the rule's 30 s";
  after_.Process(Report(71));
  EXPECT_FALSE(Open("thermal_throttling"));
  ASSERT_EQ(Closed().size(), 1u);
  EXPECT_EQ(Closed()[0].end().seconds(), kT0 + 71);
}

TEST_F(Restart, FindingsOfARuleThatIsOffNowAreDropped) {
  Engine before;
  before.Process(Report(1));
  before.Process(Report(2, true, /*xid=*/true));
  const std::vector<v1::SavedFinding> saved = before.Save();
  Config config;
  config.xid_error.enabled = false;
  Engine after(config);
  EXPECT_EQ(after.Restore(saved), 0u);
  EXPECT_TRUE(after.OpenFindings().empty());
}

TEST_F(Restart, ASavedStateRestoresTheSameWayTwice) {
  Engine before;
  before.Process(Report(1));
  before.Process(Report(2, true, /*xid=*/true));
  SaveAndRestore(before);
  // A second restart before the node reports again: the taken-back latch is saved again.
  const std::vector<v1::SavedFinding> again = after_.Save();
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].latch(), before.Save()[0].latch());
  EXPECT_EQ(again[0].finding().DebugString(), before.Save()[0].finding().DebugString());
}

}  // namespace
}  // namespace diagnostics_restore_test
}  // namespace accelmon::diagnostics

namespace accelmon::diagnostics {
namespace diagnostics_restore_test {
namespace {

// A lost device keeps its last known job across a restart too: its open finding names the job,
// and the device keeps it while it stays down without holders, so a finding that opens on it
// after the restart carries the same job.
TEST_F(Restart, ALostDeviceKeepsItsLastKnownJobAcrossARestart) {
  Engine before;
  for (int64_t s = 1; s <= 5; ++s) {
    v1::NodeReport r = Report(s);
    v1::DeviceHolder* h = r.mutable_devices(0)->add_holders();
    h->set_kind(v1::HOLDER_KIND_SLURM);
    h->set_job("4711");
    before.Process(r);
  }
  // It stops answering: up=false, no holders.
  v1::NodeReport lost = Report(6);
  lost.mutable_devices(0)->set_up(false);
  before.Process(lost);
  std::vector<v1::Finding> open = before.OpenFindings();
  ASSERT_EQ(open.size(), 1u);
  EXPECT_EQ(open[0].rule(), "device_lost");
  EXPECT_EQ(open[0].job(), "4711") << "the job of its last report with holders";

  SaveAndRestore(before);
  v1::NodeReport after = Report(7, true, /*xid=*/true);
  after.mutable_devices(0)->set_up(false);
  after_.Process(after);
  bool xid = false;
  for (const v1::Finding& f : after_.OpenFindings()) {
    if (f.rule() != "xid_error") continue;
    xid = true;
    EXPECT_EQ(f.job(), "4711") << "after the restart, from the restored finding's job";
  }
  EXPECT_TRUE(xid);
}

}  // namespace
}  // namespace diagnostics_restore_test
}  // namespace accelmon::diagnostics
