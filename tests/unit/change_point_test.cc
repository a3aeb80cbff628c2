// HingeChangePoint: where a flat stretch bends into a trend (memory_leak's onset).
#include "diagnostics/change_point.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace accelmon::diagnostics {
namespace change_point_test {
namespace {

// Samples every `step` seconds: at `base` drifting `drift` per second until `bend_at`, then rising
// `slope` per second more, with Gaussian noise of `noise`.
void Hinge(std::vector<double>& t, std::vector<double>& y, int n, double step, double bend_at,
           double base, double slope, double noise, double drift = 0) {
  std::mt19937_64 rng(42);
  std::normal_distribution<double> jitter(0, noise);
  for (int i = 0; i < n; ++i) {
    const double ti = 1000 + i * step;  // not starting at 0: the times are relative inside
    t.push_back(ti);
    y.push_back(base + drift * (ti - 1000) + (ti >= bend_at ? slope * (ti - bend_at) : 0) +
                (noise > 0 ? jitter(rng) : 0));
  }
}

TEST(HingeChangePoint, FindsTheBendOfANoiselessHinge) {
  std::vector<double> t, y;
  Hinge(t, y, 100, 10, 1000 + 400, 5e10, 1e6, 0);
  EXPECT_EQ(HingeChangePoint(t, y), 40u);
}

TEST(HingeChangePoint, FindsTheBendWithinTwoSamplesUnderNoise) {
  // Memory in bytes: 60 GiB used, 0.2 GiB noise, a 32 MiB/s leak from the 120th of 360 samples.
  std::vector<double> t, y;
  Hinge(t, y, 360, 5, 1000 + 120 * 5, 60.0 * (1 << 30), 32.0 * (1 << 20), 0.2 * (1 << 30));
  const size_t k = HingeChangePoint(t, y);
  EXPECT_GE(k, 118u);
  EXPECT_LE(k, 122u);
}

TEST(HingeChangePoint, FindsTheBendAfterASlowDriftNotBeforeIt) {
  // A cache that grows 1 MiB/s before the leak: a flat fit would put the bend early.
  std::vector<double> t, y;
  Hinge(t, y, 360, 5, 1000 + 140 * 5, 95.0 * (1 << 30), 14.0 * (1 << 20), 0.2 * (1 << 30),
        1.0 * (1 << 20));
  const size_t k = HingeChangePoint(t, y);
  EXPECT_GE(k, 138u);
  EXPECT_LE(k, 142u);
}

TEST(HingeChangePoint, IsTheFirstSampleWhenTheWholeWindowIsOneTrend) {
  std::vector<double> t, y;
  Hinge(t, y, 50, 1, 0, 1e9, 1e6, 0);
  EXPECT_EQ(HingeChangePoint(t, y), 0u);
  t.clear();
  y.clear();
  Hinge(t, y, 300, 5, 0, 60.0 * (1 << 30), 16.0 * (1 << 20), 0.2 * (1 << 30));
  EXPECT_LE(HingeChangePoint(t, y), 3u) << "noise is no bend";
}

TEST(HingeChangePoint, IsTheFirstSampleWithTooFewSamples) {
  const std::vector<double> t = {1, 2};
  const std::vector<double> y = {5, 9};
  EXPECT_EQ(HingeChangePoint(t, y), 0u);
  EXPECT_EQ(HingeChangePoint({}, {}), 0u);
}

}  // namespace
}  // namespace change_point_test
}  // namespace accelmon::diagnostics
