#include "collectors/deadline_collector.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "support/wait.h"

namespace accelmon::collectors {
namespace deadline_collector_test {
namespace {

using namespace std::chrono_literals;
using ::accelmon::testing::WaitFor;

// Where a stand-in vendor call blocks: while closed, every call waits for it to open, as a
// driver call blocks on a GPU that fell off the bus. The test decides when the call returns,
// instead of guessing how long a sleep must be.
class Gate {
 public:
  explicit Gate(bool open) : open_(open) {}
  void Open() {
    std::lock_guard lock(mu_);
    open_ = true;
    cv_.notify_all();
  }
  // Called by the collector: waits while closed, then counts the call as returned.
  void Pass() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return open_; });
    ++returned_;
  }
  int returned() {
    std::lock_guard lock(mu_);
    return returned_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_;
  int returned_ = 0;
};

// A device collector whose vendor call passes `gate` first. Call n reports device "dev-n".
class GatedCollector final : public Collector {
 public:
  explicit GatedCollector(std::shared_ptr<Gate> gate, bool absent = false)
      : gate_(std::move(gate)), absent_(absent) {}
  std::string_view name() const override { return "gated"; }
  void Collect(v1::NodeReport& report) override {
    const int call = ++calls_;
    gate_->Pass();
    if (absent_) throw SourceAbsent("no such device here");
    report.add_devices()->mutable_identity()->set_uuid("dev-" + std::to_string(call));
    report.add_events()->set_kind(v1::EVENT_KIND_XID);
  }

 private:
  std::shared_ptr<Gate> gate_;  // shared: a hung worker may outlive the test's collector
  bool absent_;
  std::atomic<int> calls_{0};
};

std::string ErrorOf(DeadlineCollector& collector, v1::NodeReport& report) {
  try {
    collector.Collect(report);
  } catch (const CollectorError& e) {
    return e.what();
  }
  return "";
}

TEST(DeadlineCollector, MergesWhatTheCollectorReportedInTime) {
  DeadlineCollector collector(std::make_unique<GatedCollector>(std::make_shared<Gate>(true)),
                              1000ms);
  EXPECT_EQ(collector.name(), "gated");
  v1::NodeReport report;
  report.add_devices()->mutable_identity()->set_uuid("already-there");
  collector.Collect(report);
  ASSERT_EQ(report.devices_size(), 2);
  EXPECT_EQ(report.devices(1).identity().uuid(), "dev-1");
  EXPECT_EQ(report.events_size(), 1);
  collector.Collect(report);
  EXPECT_EQ(report.devices(2).identity().uuid(), "dev-2");
}

TEST(DeadlineCollector, AHungCallTimesOutAndLaterTicksFailAtOnceWithoutWaiting) {
  auto gate = std::make_shared<Gate>(false);
  DeadlineCollector collector(std::make_unique<GatedCollector>(gate), 100ms);
  v1::NodeReport report;
  EXPECT_NE(ErrorOf(collector, report).find("timed out after 100ms"), std::string::npos);
  // While the call is still hung, the next tick fails before waiting another deadline: had it
  // waited, it would have timed out instead.
  const std::string second = ErrorOf(collector, report);
  EXPECT_NE(second.find("still blocked"), std::string::npos) << second;
  EXPECT_EQ(report.devices_size(), 0) << "nothing from a hung call leaks into the report";
  gate->Open();
  ASSERT_TRUE(WaitFor([&] { return gate->returned() == 1; }, 10s));
}

TEST(DeadlineCollector, TheTickAfterAHungCallReturnsCollectsAgain) {
  auto gate = std::make_shared<Gate>(false);
  DeadlineCollector collector(std::make_unique<GatedCollector>(gate), 100ms);
  v1::NodeReport report;
  EXPECT_NE(ErrorOf(collector, report).find("timed out"), std::string::npos);

  gate->Open();  // the driver call returns, long after its tick gave up on it
  ASSERT_TRUE(WaitFor([&] { return gate->returned() == 1; }, 10s));
  // The worker takes the next request once it has put the late call's result aside; until then
  // a tick may still be told "still blocked". Any other outcome, or no recovery, fails.
  v1::NodeReport next;
  std::string error;
  ASSERT_TRUE(WaitFor(
      [&] {
        next.Clear();
        error = ErrorOf(collector, next);
        return error.find("still blocked") == std::string::npos;
      },
      10s))
      << "the collector never recovered from the hung call: " << error;
  EXPECT_EQ(error, "") << "the tick after recovery failed";
  ASSERT_EQ(next.devices_size(), 1) << "the tick after recovery reported no data";
  EXPECT_EQ(next.devices(0).identity().uuid(), "dev-2")
      << "the new call's data, not the late one's";
  EXPECT_EQ(next.events_size(), 1);
  EXPECT_EQ(report.devices_size(), 0) << "the late call's data went nowhere";
}

TEST(DeadlineCollector, PassesSourceAbsentThrough) {
  DeadlineCollector collector(
      std::make_unique<GatedCollector>(std::make_shared<Gate>(true), /*absent=*/true), 1000ms);
  v1::NodeReport report;
  EXPECT_THROW(collector.Collect(report), SourceAbsent);
}

TEST(DeadlineCollector, DestroyingWhileHungDoesNotWaitForTheCall) {
  auto gate = std::make_shared<Gate>(false);
  auto collector =
      std::make_unique<DeadlineCollector>(std::make_unique<GatedCollector>(gate), 50ms);
  v1::NodeReport report;
  EXPECT_THROW(collector->Collect(report), CollectorError);
  std::atomic<bool> destroyed{false};
  std::thread destroy([&] {
    collector.reset();
    destroyed = true;
  });
  // The gate stays closed: only a destructor that leaves the hung call behind can finish.
  EXPECT_TRUE(WaitFor([&] { return destroyed.load(); }, 10s))
      << "the destructor waits for the hung call";
  gate->Open();
  destroy.join();
  // The left-behind worker's call returns before the test ends.
  EXPECT_TRUE(WaitFor([&] { return gate->returned() == 1; }, 10s));
}

}  // namespace
}  // namespace deadline_collector_test
}  // namespace accelmon::collectors
