// The one set of time helpers (proto/time_format.h): Timestamp conversions, RFC 3339, durations.
#include "proto/time_format.h"

#include <gtest/gtest.h>

namespace accelmon {
namespace time_format_test {
namespace {

using namespace std::chrono_literals;

TEST(TimestampConversions, RoundTripAndFloorBefore1970) {
  const int64_t ns = 1'714'532'400LL * 1'000'000'000 + 123'456'789;
  const auto t = TimestampFromNanos(ns);
  EXPECT_EQ(t.seconds(), 1'714'532'400);
  EXPECT_EQ(t.nanos(), 123'456'789);
  EXPECT_EQ(ToNanos(t), ns);
  EXPECT_EQ(ToMillis(t), 1'714'532'400'123);
  EXPECT_DOUBLE_EQ(ToSeconds(t), 1'714'532'400.123456789);

  const auto before = TimestampFromNanos(-1);  // a nanosecond before the epoch
  EXPECT_EQ(before.seconds(), -1);
  EXPECT_EQ(before.nanos(), 999'999'999);
  EXPECT_EQ(ToNanos(before), -1);
  EXPECT_EQ(ToMillis(before), -1);

  const auto ms = TimestampFromMillis(-1'500);
  EXPECT_EQ(ms.seconds(), -2);
  EXPECT_EQ(ms.nanos(), 500'000'000);
  EXPECT_EQ(ToMillis(ms), -1'500);

  const auto tp = std::chrono::system_clock::time_point(1'700'000'000s + 250ms);
  EXPECT_EQ(ToMillis(TimestampFromTimePoint(tp)), 1'700'000'000'250);
}

TEST(DurationConversions, SecondsAndNanosShareTheSign) {
  const auto d = DurationFromNanos(1'500'000'000);
  EXPECT_EQ(d.seconds(), 1);
  EXPECT_EQ(d.nanos(), 500'000'000);
  EXPECT_EQ(ToNanos(d), 1'500'000'000);
  const auto negative = DurationFromNanos(-1'500'000'000);
  EXPECT_EQ(negative.seconds(), -1);
  EXPECT_EQ(negative.nanos(), -500'000'000);
  EXPECT_EQ(ToNanos(negative), -1'500'000'000);
}

TEST(FormatRfc3339, UtcWithFlooredMilliseconds) {
  EXPECT_EQ(FormatRfc3339(1714532400LL * 1'000'000'000 + 123'456'789), "2024-05-01T03:00:00.123Z");
  EXPECT_EQ(FormatRfc3339(0), "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(FormatRfc3339(-1), "1969-12-31T23:59:59.999Z");
}

TEST(ParseRfc3339Millis, ZonesFractionsAndRejects) {
  EXPECT_EQ(ParseRfc3339Millis("2026-12-02T10:00:00Z"), 1'796'205'600'000);
  EXPECT_EQ(ParseRfc3339Millis("2026-12-02T12:00:00.5+02:00"), 1'796'205'600'500);
  EXPECT_EQ(ParseRfc3339Millis("2026-12-02 10:00:00.123456z"), 1'796'205'600'123);
  EXPECT_EQ(ParseRfc3339Millis("1970-01-01T00:00:00Z"), 0);
  for (const char* bad :
       {"", "2026-12-02", "2026-12-02T10:00:00", "2026-13-02T10:00:00Z", "2026-12-02T10:00:00.Z",
        "2026-12-02T10:00:00Zjunk", "2026-12-02T10:00:00+2"}) {
    EXPECT_FALSE(ParseRfc3339Millis(bad)) << bad;
  }
  const auto round_trip = ParseRfc3339Millis(FormatRfc3339(1'796'205'600'042'000'000));
  EXPECT_EQ(round_trip, 1'796'205'600'042);
}

TEST(FormatDuration, ForPeople) {
  EXPECT_EQ(FormatDuration(300ms), "0.3s");
  EXPECT_EQ(FormatDuration(0s), "0s");
  EXPECT_EQ(FormatDuration(7s), "7s");
  EXPECT_EQ(FormatDuration(45s), "45s");
  EXPECT_EQ(FormatDuration(12'400ms), "12s");
  EXPECT_EQ(FormatDuration(130s), "2m10s");
  EXPECT_EQ(FormatDuration(364s), "6m04s");
  EXPECT_EQ(FormatDuration(3723s), "1h02m03s");
  EXPECT_EQ(FormatDuration(std::chrono::hours(30)), "30h00m00s");
  EXPECT_EQ(FormatDuration(-5s), "0s");
  EXPECT_EQ(FormatDuration(std::chrono::nanoseconds(2'400'000'000LL)), "2.4s");
}

TEST(ParseSecondsDuration, ScenarioAndConfigDurations) {
  EXPECT_EQ(ParseSecondsDuration("500ms"), 0.5);
  EXPECT_EQ(ParseSecondsDuration("30s"), 30);
  EXPECT_EQ(ParseSecondsDuration("1.5m"), 90);
  EXPECT_EQ(ParseSecondsDuration("2h"), 7200);
  EXPECT_EQ(ParseSecondsDuration("1d"), 86400);
  EXPECT_EQ(ParseSecondsDuration("0"), 0);
  EXPECT_EQ(ParseSecondsDuration("0s"), 0);
  for (const char* bad :
       {"", "10", "m", "1x", "-1s", "1..5s", ".5s", "1 s", "5.s", "1e3s", "infs", "2 h", "1w"}) {
    EXPECT_FALSE(ParseSecondsDuration(bad)) << bad;
  }
}

TEST(FormatPrometheusDuration, TheLargestExactUnitAsFlagsTakeIt) {
  EXPECT_EQ(FormatPrometheusDuration(std::chrono::hours(24 * 7)), "7d");
  EXPECT_EQ(FormatPrometheusDuration(std::chrono::hours(2)), "2h");
  EXPECT_EQ(FormatPrometheusDuration(90s), "90s");
  EXPECT_EQ(FormatPrometheusDuration(10min), "10m");
  EXPECT_EQ(FormatPrometheusDuration(250ms), "250ms");
  EXPECT_EQ(FormatPrometheusDuration(1500ms), "1500ms");
  EXPECT_EQ(FormatPrometheusDuration(0ms), "0ms");
  // The inverse of ParseDuration.
  for (const auto d : {1ms, 250ms, 1500ms, 1000ms, 90'000ms, 3'600'000ms, 604'800'000ms}) {
    EXPECT_EQ(ParseDuration(FormatPrometheusDuration(d)), d) << d.count();
  }
}

}  // namespace
}  // namespace time_format_test
}  // namespace accelmon
