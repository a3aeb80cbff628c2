#include "collectors/pressure.h"

#include <gtest/gtest.h>

namespace accelmon::collectors {
namespace pressure_test {
namespace {

const std::string kFixtures = ACCELMON_FIXTURES_DIR;

TEST(Pressure, ReadsFixtureInMicroseconds) {
  PressureCollector collector(PathResolver(kFixtures + "/host/proc", kFixtures + "/host/sys"));
  v1::NodeReport report;
  collector.Collect(report);
  // tests/fixtures/host/proc/pressure/memory: the `total=` fields, raw microseconds.
  const auto& p = report.host().memory_pressure();
  EXPECT_EQ(p.some_total_us(), 48211376u);
  EXPECT_EQ(p.full_total_us(), 21534790u);
}

TEST(Pressure, ZeroTotalsArePresent) {
  // What an idle machine reports: zero stall time, reported, so not absent.
  v1::HostPressure p;
  EXPECT_EQ(ParsePressure("some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
                          "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
                          p),
            0u);
  EXPECT_TRUE(p.has_some_total_us());
  EXPECT_TRUE(p.has_full_total_us());
  EXPECT_EQ(p.some_total_us(), 0u);
}

TEST(Pressure, SkipsMalformedLinesAndKeepsTheRest) {
  v1::HostPressure p;
  const std::string text =
      "some avg10=0.12 avg60=0.31 avg300=0.08 total=48211376\n"
      "full avg10=0.00 avg60=0.17 avg300=0.04 total=-3\n"
      "full avg10=0.00 avg60=0.17 avg300=0.04\n"
      "partial avg10=0.00 total=5\n"
      "\n";
  EXPECT_EQ(ParsePressure(text, p), 3u);
  EXPECT_EQ(p.some_total_us(), 48211376u);
  EXPECT_FALSE(p.has_full_total_us()) << "an unparsable value is absent, not zero";
}

TEST(Pressure, OnlySomeLineLeavesFullAbsent) {
  // Kernels before 5.13 print no "full" line for cpu; treat memory the same way if it happens.
  v1::HostPressure p;
  EXPECT_EQ(ParsePressure("some avg10=1.00 avg60=0.50 avg300=0.10 total=99", p), 0u);
  EXPECT_EQ(p.some_total_us(), 99u);
  EXPECT_FALSE(p.has_full_total_us());
}

TEST(Pressure, CountersNear2To64ParseExactly) {
  v1::HostPressure p;
  EXPECT_EQ(ParsePressure("some avg10=0.00 avg60=0.00 avg300=0.00 total=18446744073709551000\n"
                          "full avg10=0.00 avg60=0.00 avg300=0.00 total=18446744073709551615\n",
                          p),
            0u);
  EXPECT_EQ(p.some_total_us(), 18446744073709551000ULL);
  EXPECT_EQ(p.full_total_us(), 18446744073709551615ULL);
}

TEST(Pressure, MissingFileIsAnErrorNamingThePath) {
  // A kernel without PSI (CONFIG_PSI=n or psi=0) has no /proc/pressure.
  PressureCollector collector(PathResolver("/nonexistent/proc", "/nonexistent/sys"));
  v1::NodeReport report;
  try {
    collector.Collect(report);
    FAIL() << "expected CollectorError";
  } catch (const CollectorError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/proc/pressure/memory"), std::string::npos);
  }
  EXPECT_FALSE(report.host().has_memory_pressure());
}

}  // namespace
}  // namespace pressure_test
}  // namespace accelmon::collectors
