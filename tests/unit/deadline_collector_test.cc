#include "collectors/deadline_collector.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace accelmon::collectors {
namespace {

using namespace std::chrono_literals;

// A device collector whose vendor call takes `delay` (a hung driver when long).
class SlowCollector final : public Collector {
 public:
  explicit SlowCollector(std::chrono::milliseconds delay, bool absent = false)
      : delay_(delay), absent_(absent) {}
  std::string_view name() const override { return "slow"; }
  void Collect(v1::NodeReport& report) override {
    ++calls;
    std::this_thread::sleep_for(delay_);
    if (absent_) throw SourceAbsent("no such device here");
    report.add_devices()->mutable_identity()->set_uuid("dev-" + std::to_string(calls.load()));
    report.add_events()->set_kind(v1::EVENT_KIND_XID);
  }
  std::atomic<int> calls{0};

 private:
  std::chrono::milliseconds delay_;
  bool absent_;
};

TEST(DeadlineCollector, MergesWhatTheCollectorReportedInTime) {
  DeadlineCollector collector(std::make_unique<SlowCollector>(0ms), 1000ms);
  EXPECT_EQ(collector.name(), "slow");
  v1::NodeReport report;
  report.add_devices()->mutable_identity()->set_uuid("already-there");
  collector.Collect(report);
  ASSERT_EQ(report.devices_size(), 2);
  EXPECT_EQ(report.devices(1).identity().uuid(), "dev-1");
  EXPECT_EQ(report.events_size(), 1);
  collector.Collect(report);
  EXPECT_EQ(report.devices(2).identity().uuid(), "dev-2");
}

TEST(DeadlineCollector, AHungCallTimesOutAndLaterTicksFailAtOnce) {
  auto inner = std::make_unique<SlowCollector>(1500ms);
  DeadlineCollector collector(std::move(inner), 100ms);
  v1::NodeReport report;
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THROW(collector.Collect(report), CollectorError);
  // While the call is still hung, the next tick does not wait another deadline.
  try {
    collector.Collect(report);
    FAIL() << "expected CollectorError";
  } catch (const CollectorError& e) {
    EXPECT_NE(std::string(e.what()).find("still blocked"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1000ms);
  EXPECT_EQ(report.devices_size(), 0) << "nothing from a late call leaks into the report";
  // Once the call returns, collection works again.
  std::this_thread::sleep_for(1600ms);
  EXPECT_THROW(collector.Collect(report), CollectorError);  // 1.5 s again: times out again
}

TEST(DeadlineCollector, PassesSourceAbsentThrough) {
  DeadlineCollector collector(std::make_unique<SlowCollector>(0ms, /*absent=*/true), 1000ms);
  v1::NodeReport report;
  EXPECT_THROW(collector.Collect(report), SourceAbsent);
}

TEST(DeadlineCollector, DestroyingWhileHungDoesNotBlock) {
  const auto start = std::chrono::steady_clock::now();
  {
    DeadlineCollector collector(std::make_unique<SlowCollector>(800ms), 50ms);
    v1::NodeReport report;
    EXPECT_THROW(collector.Collect(report), CollectorError);
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, 700ms);
  std::this_thread::sleep_for(900ms);  // let the detached worker finish before the test ends
}

}  // namespace
}  // namespace accelmon::collectors
