// The engine's bookkeeping, with a rule of the test's own: what opens, stays open, rises and
// closes, and what out-of-order reports and missing devices do.
#include <gtest/gtest.h>

#include <algorithm>

#include "diagnostics/engine.h"

namespace accelmon::diagnostics {
namespace diagnostics_engine_test {
namespace {

// Raises a finding on every device whose compute ratio is above 0.9 (critical above 0.99), and
// one on the node while the report carries an OOM-kill event.
class HotRule final : public Rule {
 public:
  void Observe(const v1::NodeReport& report, RuleContext& context) override {
    for (const v1::DeviceTelemetry& d : report.devices()) {
      if (!d.utilization().has_compute_ratio() || d.utilization().compute_ratio() <= 0.9) continue;
      const double ratio = d.utilization().compute_ratio();
      context.Raise(DeviceSubject(d),
                    Raised{.severity = ratio > 0.99 ? kCritical : kWarning,
                           .summary = "hot " + std::to_string(ratio),
                           .evidence = {NumberEvidence("compute", ratio, "ratio")},
                           .plot = "compute_ratio",
                           .start_ns = context.now_ns() - 5'000'000'000});
    }
    if (!report.events().empty()) {
      Raised raised;
      raised.summary = "event";
      context.Raise(Subject{}, std::move(raised));
    }
  }
};

const RuleDefinition kTestRules[] = {
    {"hot", [](const Config&) -> std::unique_ptr<Rule> { return std::make_unique<HotRule>(); },
     [](const Config&) { return true; }},
};

v1::NodeReport Report(const std::string& node, int64_t seconds, std::vector<double> compute,
                      bool event = false) {
  v1::NodeReport r;
  r.set_node(node);
  r.mutable_timestamp()->set_seconds(seconds);
  for (size_t i = 0; i < compute.size(); ++i) {
    auto& d = *r.add_devices();
    d.mutable_identity()->set_index(static_cast<uint32_t>(i));
    d.mutable_identity()->set_uuid("GPU-" + std::to_string(i));
    if (compute[i] >= 0) d.mutable_utilization()->set_compute_ratio(compute[i]);
  }
  if (event) r.add_events()->set_kind(v1::EVENT_KIND_OOM_KILL);
  return r;
}

struct Recorded {
  Change change;
  v1::Finding finding;
};

class EngineTest : public ::testing::Test {
 protected:
  EngineTest() : engine_(Config{}, kTestRules) {
    engine_.set_listener([this](Change c, const v1::Finding& f) { changes_.push_back({c, f}); });
  }
  Engine engine_;
  std::vector<Recorded> changes_;
};

TEST_F(EngineTest, OpensOnceKeepsEvidenceAndClosesWhenNotRaisedAgain) {
  engine_.Process(Report("n1", 100, {0.5, 0.95}));
  ASSERT_EQ(changes_.size(), 1u);
  EXPECT_EQ(changes_[0].change, Change::kOpened);
  const v1::Finding& f = changes_[0].finding;
  EXPECT_EQ(f.rule(), "hot");
  EXPECT_EQ(f.node(), "n1");
  EXPECT_EQ(f.device(), "1");
  EXPECT_EQ(f.device_uuid(), "GPU-1");
  EXPECT_EQ(f.severity(), "warning");
  EXPECT_EQ(f.start().seconds(), 95) << "the rule's start, before the report that fired";
  EXPECT_FALSE(f.has_end());
  EXPECT_EQ(f.plot(), "compute_ratio");
  ASSERT_EQ(f.evidence_size(), 1);
  EXPECT_DOUBLE_EQ(f.evidence(0).value(), 0.95);

  engine_.Process(Report("n1", 110, {0.5, 0.96}));
  EXPECT_EQ(changes_.size(), 1u) << "still open: no change";
  ASSERT_EQ(engine_.OpenFindings().size(), 1u);
  EXPECT_DOUBLE_EQ(engine_.OpenFindings()[0].evidence(0).value(), 0.95) << "evidence of opening";

  engine_.Process(Report("n1", 120, {0.5, 0.5}));
  ASSERT_EQ(changes_.size(), 2u);
  EXPECT_EQ(changes_[1].change, Change::kClosed);
  EXPECT_EQ(changes_[1].finding.end().seconds(), 120);
  EXPECT_TRUE(engine_.OpenFindings().empty());
  EXPECT_EQ(engine_.stats().opened, 1u);
  EXPECT_EQ(engine_.stats().closed, 1u);
}

TEST_F(EngineTest, SeverityOnlyRises) {
  engine_.Process(Report("n1", 100, {0.95}));
  engine_.Process(Report("n1", 101, {0.995}));
  engine_.Process(Report("n1", 102, {0.95}));
  ASSERT_EQ(changes_.size(), 2u);
  EXPECT_EQ(changes_[1].change, Change::kEscalated);
  EXPECT_EQ(changes_[1].finding.severity(), "critical");
  EXPECT_EQ(engine_.OpenFindings().at(0).severity(), "critical");
}

TEST_F(EngineTest, ADeviceMissingFromOneReportKeepsItsFindingOpen) {
  engine_.Process(Report("n1", 100, {0.95, 0.95}));
  v1::NodeReport partial = Report("n1", 110, {0.5});  // device 1 not reported this tick
  engine_.Process(partial);
  ASSERT_EQ(engine_.OpenFindings().size(), 1u);
  EXPECT_EQ(engine_.OpenFindings()[0].device(), "1");
  engine_.Process(Report("n1", 120, {0.5, 0.5}));
  EXPECT_TRUE(engine_.OpenFindings().empty());
}

TEST_F(EngineTest, NodesAreIndependentAndOldReportsAreSkipped) {
  engine_.Process(Report("n1", 100, {0.95}));
  engine_.Process(Report("n2", 50, {0.95}, /*event=*/true));  // older, but another node
  EXPECT_EQ(engine_.OpenFindings().size(), 3u);
  engine_.Process(Report("n1", 100, {0.1}));  // same time as n1's last: skipped
  engine_.Process(Report("n1", 90, {0.1}));   // older: skipped
  EXPECT_EQ(engine_.stats().out_of_order, 2u);
  EXPECT_EQ(engine_.stats().reports, 2u);
  EXPECT_EQ(engine_.OpenFindings().size(), 3u);
  // Sorted by node, then start.
  const auto open = engine_.OpenFindings();
  EXPECT_EQ(open[0].node(), "n1");
  EXPECT_EQ(open[1].node(), "n2");
  EXPECT_EQ(open[2].node(), "n2");
  EXPECT_EQ(open[1].start().seconds(), 45);
  EXPECT_EQ(open[2].device(), "") << "the node's own finding";
}

TEST_F(EngineTest, ForgettingANodeClosesItsFindings) {
  engine_.Process(Report("n1", 100, {0.95}, true));
  engine_.ForgetNode("n1", 700'000'000'000);
  ASSERT_EQ(changes_.size(), 4u);
  EXPECT_EQ(changes_[2].change, Change::kClosed);
  EXPECT_EQ(changes_[3].finding.end().seconds(), 700);
  EXPECT_TRUE(engine_.OpenFindings().empty());
  engine_.Process(Report("n1", 50, {0.1}));  // a fresh start for the node: not out of order
  EXPECT_EQ(engine_.stats().out_of_order, 0u);
}

TEST(EngineRules, EveryRuleHasAnIdAndRunsUnlessDisabled) {
  EXPECT_EQ(AllRules().size(), 15u);
  Config config;
  EXPECT_EQ(Engine(config).rule_ids().size(), 15u);
  config.job_stall.enabled = false;
  config.xid_error.enabled = false;
  const auto ids = Engine(config).rule_ids();
  EXPECT_EQ(ids.size(), 13u);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), "job_stall"), 0);
  EXPECT_EQ(ids.front(), "memory_fragmentation");
  EXPECT_EQ(ids.back(), "device_lost");
}

// A device 40 % fragmented with most of its memory free, at `seconds`.
v1::NodeReport FragmentedReport(int64_t seconds) {
  v1::NodeReport r;
  r.set_node("n1");
  r.mutable_timestamp()->set_seconds(seconds);
  auto& d = *r.add_devices();
  d.mutable_identity()->set_index(0);
  d.mutable_identity()->set_uuid("GPU-0");
  d.mutable_memory()->set_total_bytes(80ull << 30);
  d.mutable_memory()->set_free_bytes(60ull << 30);
  d.mutable_memory()->set_fragmentation_ratio(0.4);
  return r;
}

struct Reconfigured : ::testing::Test {
  Reconfigured() {
    engine.set_listener([this](Change c, const v1::Finding& f) { changes.push_back({c, f}); });
  }
  Engine engine{Config{}};
  std::vector<Recorded> changes;
};

TEST_F(Reconfigured, ALowerThresholdJudgesTheNextReport) {
  engine.Process(FragmentedReport(100));
  EXPECT_TRUE(changes.empty()) << "0.4 is under the default ratio 0.5";
  Config lower;
  lower.memory_fragmentation.ratio = 0.3;
  engine.Reconfigure(lower);
  EXPECT_TRUE(changes.empty()) << "nothing is judged until a report comes";
  engine.Process(FragmentedReport(101));
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].change, Change::kOpened);
  EXPECT_EQ(changes[0].finding.rule(), "memory_fragmentation");
  EXPECT_EQ(engine.config().memory_fragmentation.ratio, 0.3);
}

TEST_F(Reconfigured, RulesThatStayKeepTheirStateAndOpenFindings) {
  // link_flapping counts changes over its window: 3 flaps open it (changes: 3).
  const auto flap = [&](int64_t seconds, bool up) {
    v1::NodeReport r = FragmentedReport(seconds);
    auto& link = *r.mutable_devices(0)->add_links();
    link.set_name("nvlink0");
    link.set_up(up);
    engine.Process(r);
  };
  Config config;
  config.link_flapping.changes = 3;
  engine.Reconfigure(config);
  flap(100, true);
  flap(101, false);
  flap(102, true);
  flap(103, false);
  const auto flapping = [&] {
    return std::count_if(changes.begin(), changes.end(),
                         [](const Recorded& r) { return r.finding.rule() == "link_flapping"; });
  };
  ASSERT_EQ(flapping(), 1) << "opened";
  config.memory_fragmentation.ratio = 0.45;  // another rule's threshold
  engine.Reconfigure(config);
  flap(104, false);
  EXPECT_EQ(flapping(), 1) << "still open: the rule kept its window of changes";
  config.link_flapping.changes = 5;  // its own: judged on the window it kept
  engine.Reconfigure(config);
  flap(105, true);
  ASSERT_EQ(flapping(), 2);
  EXPECT_EQ(changes.back().change, Change::kClosed) << "4 changes are fewer than 5 now";
}

TEST_F(Reconfigured, ADisabledRuleClosesItsFindingsAndAnEnabledOneStarts) {
  Config config;
  config.memory_fragmentation.ratio = 0.3;
  engine.Reconfigure(config);
  engine.Process(FragmentedReport(100));
  ASSERT_EQ(changes.size(), 1u);

  config.memory_fragmentation.enabled = false;
  engine.Reconfigure(config);
  ASSERT_EQ(changes.size(), 2u);
  EXPECT_EQ(changes[1].change, Change::kClosed);
  EXPECT_EQ(changes[1].finding.end().seconds(), 100) << "at the node's last report";
  EXPECT_TRUE(engine.OpenFindings().empty());
  const auto ids = engine.rule_ids();
  EXPECT_EQ(std::count(ids.begin(), ids.end(), "memory_fragmentation"), 0);
  engine.Process(FragmentedReport(101));
  EXPECT_EQ(changes.size(), 2u);

  config.memory_fragmentation.enabled = true;
  engine.Reconfigure(config);
  engine.Process(FragmentedReport(102));
  ASSERT_EQ(changes.size(), 3u);
  EXPECT_EQ(changes[2].change, Change::kOpened);
  EXPECT_EQ(changes[2].finding.start().seconds(), 102) << "a fresh start";
}

}  // namespace
}  // namespace diagnostics_engine_test
}  // namespace accelmon::diagnostics
