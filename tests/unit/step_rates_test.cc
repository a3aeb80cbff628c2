#include "daemon/exporter/step_rates.h"

#include <gtest/gtest.h>

#include "daemon/exporter/node_store.h"

namespace accelmon {
namespace step_rates_test {
namespace {

constexpr int64_t kT0 = 1'700'000'000;

// A report at kT0 + `at_s` with one process per (device, pid, steps) triple.
v1::NodeReport Report(double at_s,
                      std::initializer_list<std::tuple<uint32_t, uint32_t, int64_t>> processes,
                      const std::string& instance = "i1") {
  v1::NodeReport r;
  r.set_node("n1");
  r.set_agent_instance_id(instance);
  r.mutable_timestamp()->set_seconds(kT0 + static_cast<int64_t>(at_s));
  r.mutable_timestamp()->set_nanos(static_cast<int32_t>((at_s - static_cast<int64_t>(at_s)) * 1e9));
  for (const auto& [device, pid, steps] : processes) {
    v1::DeviceTelemetry* d = nullptr;
    for (auto& existing : *r.mutable_devices()) {
      if (existing.identity().index() == device) d = &existing;
    }
    if (!d) {
      d = r.add_devices();
      d->mutable_identity()->set_index(device);
    }
    auto* pm = d->add_processes();
    pm->set_pid(pid);
    if (steps >= 0) pm->set_steps_total(static_cast<uint64_t>(steps));
  }
  return r;
}

std::vector<StepRate> Rates(const std::shared_ptr<const std::vector<StepRate>>& rates) {
  return rates ? *rates : std::vector<StepRate>{};
}

TEST(StepRates, NoRateUntilOneWindowPassedThenStepsOverElapsedNodeTime) {
  StepRateTracker t;
  EXPECT_TRUE(Rates(t.Update(Report(0, {{0, 100, 1000}}))).empty());
  // 5 s later: under the 10 s window, no rate yet.
  EXPECT_TRUE(Rates(t.Update(Report(5, {{0, 100, 1010}}))).empty());
  // 12.5 s after the first report: 25 steps in 12.5 s.
  auto rates = Rates(t.Update(Report(12.5, {{0, 100, 1025}})));
  ASSERT_EQ(rates.size(), 1u);
  EXPECT_EQ(rates[0].device_index, 0u);
  EXPECT_EQ(rates[0].pid, 100u);
  EXPECT_DOUBLE_EQ(rates[0].steps_per_second, 2.0);
  // Within the next window the rate holds; after it, it is measured from the 12.5 s report.
  rates = Rates(t.Update(Report(15, {{0, 100, 1030}})));
  ASSERT_EQ(rates.size(), 1u);
  EXPECT_DOUBLE_EQ(rates[0].steps_per_second, 2.0);
  rates = Rates(t.Update(Report(22.5, {{0, 100, 1035}})));
  ASSERT_EQ(rates.size(), 1u);
  EXPECT_DOUBLE_EQ(rates[0].steps_per_second, 1.0);
}

TEST(StepRates, ACounterThatWentBackStartsOverWithoutARate) {
  StepRateTracker t;
  t.Update(Report(0, {{0, 100, 500}}));
  ASSERT_EQ(Rates(t.Update(Report(10, {{0, 100, 600}}))).size(), 1u);
  EXPECT_TRUE(Rates(t.Update(Report(20, {{0, 100, 3}}))).empty()) << "the process restarted";
  auto rates = Rates(t.Update(Report(30, {{0, 100, 53}})));
  ASSERT_EQ(rates.size(), 1u);
  EXPECT_DOUBLE_EQ(rates[0].steps_per_second, 5.0);
}

TEST(StepRates, ProcessesGoneFromTheReportAreForgottenAndOnlyPushersCount) {
  StepRateTracker t;
  t.Update(Report(0, {{0, 100, 0}, {1, 200, 0}, {1, 201, -1}}));
  auto rates = Rates(t.Update(Report(10, {{0, 100, 10}, {1, 200, 40}, {1, 201, -1}})));
  ASSERT_EQ(rates.size(), 2u) << "pid 201 pushes no step counter";
  EXPECT_EQ(rates[1].device_index, 1u);
  EXPECT_DOUBLE_EQ(rates[1].steps_per_second, 4.0);
  // pid 200 is gone for one report: when it comes back it is a new process.
  t.Update(Report(20, {{0, 100, 20}}));
  rates = Rates(t.Update(Report(30, {{0, 100, 30}, {1, 200, 80}})));
  ASSERT_EQ(rates.size(), 1u);
  EXPECT_EQ(rates[0].pid, 100u);
}

TEST(StepRates, ANewAgentInstanceForgetsEverything) {
  StepRateTracker t;
  t.Update(Report(0, {{0, 100, 0}}));
  EXPECT_TRUE(Rates(t.Update(Report(10, {{0, 100, 50}}, "i2"))).empty());
}

TEST(StepRates, TheNodeStoreHandsTheRatesOutWithTheNodesLatestReport) {
  NodeStore store(std::chrono::minutes(10));
  const Clock::time_point now = Clock::time_point(std::chrono::seconds(kT0 + 60));
  uint64_t sequence = 0;
  for (const auto& [at, steps] : {std::pair(0.0, 0), std::pair(10.0, 30)}) {
    auto r = std::make_shared<v1::NodeReport>(Report(at, {{3, 77, steps}}));
    r->set_sequence(++sequence);
    ASSERT_EQ(store.Apply(r, now).outcome, ApplyOutcome::kApplied);
  }
  const auto snapshot = store.Snapshot(now);
  ASSERT_EQ(snapshot.size(), 1u);
  const auto rates = Rates(snapshot[0].step_rates);
  ASSERT_EQ(rates.size(), 1u);
  EXPECT_EQ(rates[0].device_index, 3u);
  EXPECT_DOUBLE_EQ(rates[0].steps_per_second, 3.0);
}

}  // namespace
}  // namespace step_rates_test
}  // namespace accelmon
