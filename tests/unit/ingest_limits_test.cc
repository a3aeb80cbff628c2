// The small parts behind the exporter's limits: log limiting, the timer queue, and how the agent
// reads the exporter's message size limit out of gRPC's error.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "daemon/agent/uplink.h"
#include "daemon/common/log_limiter.h"
#include "daemon/exporter/timer_queue.h"
#include "support/wait.h"

namespace accelmon {
namespace ingest_limits_test {
namespace {

using namespace std::chrono_literals;

TEST(LogLimiter, OneLinePerKeyAndPeriodCountingTheSuppressed) {
  LogLimiter limiter(60s);
  const auto t0 = std::chrono::steady_clock::time_point(1h);
  EXPECT_EQ(limiter.Admit("peer-a label_too_long", t0), 0u);
  EXPECT_EQ(limiter.Admit("peer-a label_too_long", t0 + 1s), std::nullopt);
  EXPECT_EQ(limiter.Admit("peer-a label_too_long", t0 + 59s), std::nullopt);
  // Other keys are independent.
  EXPECT_EQ(limiter.Admit("peer-b label_too_long", t0 + 1s), 0u);
  EXPECT_EQ(limiter.Admit("peer-a invalid_utf8", t0 + 1s), 0u);
  // A minute on, the next line says how many were not logged.
  EXPECT_EQ(limiter.Admit("peer-a label_too_long", t0 + 60s), 2u);
  EXPECT_EQ(limiter.Admit("peer-a label_too_long", t0 + 61s), std::nullopt);
  EXPECT_EQ(limiter.Admit("peer-a label_too_long", t0 + 121s), 1u);
}

TEST(LogLimiter, ManyKeysShareAnOverflowKey) {
  LogLimiter limiter(60s, 2);
  const auto t0 = std::chrono::steady_clock::time_point(1h);
  EXPECT_EQ(limiter.Admit("a", t0), 0u);
  EXPECT_EQ(limiter.Admit("b", t0), 0u);
  EXPECT_EQ(limiter.Admit("c", t0), 0u);  // the overflow key's first line
  EXPECT_EQ(limiter.Admit("d", t0), std::nullopt);
  // Quiet keys are forgotten once their period has passed.
  EXPECT_EQ(limiter.Admit("e", t0 + 61s), 0u);
}

TEST(TimerQueue, RunsTasksInTimeOrder) {
  std::mutex mu;
  std::vector<int> order;
  std::atomic<int> ran{0};
  {
    TimerQueue timers;
    const auto now = std::chrono::steady_clock::now();
    for (int i : {3, 1, 2}) {
      timers.Schedule(now + i * 20ms, [&, i] {
        std::lock_guard lock(mu);
        order.push_back(i);
        ++ran;
      });
    }
    EXPECT_TRUE(testing::WaitFor([&] { return ran == 3; }, 10s));
  }
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
}

TEST(TimerQueue, RunsWhatIsLeftWhenDestroyed) {
  bool ran = false;
  {
    TimerQueue timers;
    timers.Schedule(std::chrono::steady_clock::now() + 1h, [&] { ran = true; });
  }
  EXPECT_TRUE(ran) << "a task may own something that must be released";
}

TEST(Uplink, ReadsTheExportersMessageSizeLimit) {
  EXPECT_EQ(ParseMessageSizeLimit("Received message larger than max (1048677 vs. 1048576)"),
            1048576u);
  EXPECT_EQ(ParseMessageSizeLimit("Received message larger than max (5 vs. 4"), std::nullopt);
  EXPECT_EQ(ParseMessageSizeLimit("Resource quota exhausted"), std::nullopt);
}

}  // namespace
}  // namespace ingest_limits_test
}  // namespace accelmon
