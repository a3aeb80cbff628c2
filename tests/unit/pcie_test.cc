// The one PCIe table (collectors/pcie.h): every generation's rate, encoding and capacity.
#include "collectors/pcie.h"

#include <gtest/gtest.h>

namespace accelmon::collectors {
namespace pcie_test {
namespace {

struct Expected {
  uint32_t generation;
  double gts;
  double lane_bytes_per_second;  // one direction, after the line code / FLIT overhead
};

// Per PCIe spec: 8b/10b for gen1-2, 128b/130b for gen3-5, FLIT mode (242 of 256 bytes) at gen6.
constexpr Expected kExpected[] = {
    {1, 2.5, 250e6},                  // 2.5e9 * 8/10 / 8
    {2, 5.0, 500e6},                  // 5e9 * 8/10 / 8
    {3, 8.0, 8e9 * 128 / 130 / 8},    // 984.6 MB/s
    {4, 16.0, 16e9 * 128 / 130 / 8},  // 1.969 GB/s
    {5, 32.0, 32e9 * 128 / 130 / 8},  // 3.938 GB/s
    {6, 64.0, 7.5625e9},              // 64e9 * 242/256 / 8
};

class PcieGenerationTest : public ::testing::TestWithParam<Expected> {};

TEST_P(PcieGenerationTest, RateEncodingAndCapacity) {
  const Expected e = GetParam();
  EXPECT_EQ(PcieLaneGts(e.generation), e.gts);
  EXPECT_EQ(PcieGeneration(e.gts), e.generation);
  ASSERT_TRUE(PcieLaneBytesPerSecond(e.generation));
  EXPECT_DOUBLE_EQ(*PcieLaneBytesPerSecond(e.generation), e.lane_bytes_per_second);
  EXPECT_DOUBLE_EQ(*PcieMaxBytesPerSecond(e.generation, 16), 16 * e.lane_bytes_per_second);
  EXPECT_DOUBLE_EQ(*PcieMaxBytesPerSecond(e.generation, 1), e.lane_bytes_per_second);
}

INSTANTIATE_TEST_SUITE_P(EveryGeneration, PcieGenerationTest, ::testing::ValuesIn(kExpected),
                         [](const auto& param_info) {
                           return "gen" + std::to_string(param_info.param.generation);
                         });

TEST(Pcie, KnownX16Figures) {
  EXPECT_NEAR(*PcieMaxBytesPerSecond(3, 16), 15.754e9, 0.001e9);
  EXPECT_NEAR(*PcieMaxBytesPerSecond(4, 16), 31.508e9, 0.001e9);
  EXPECT_NEAR(*PcieMaxBytesPerSecond(5, 16), 63.015e9, 0.001e9);
  EXPECT_DOUBLE_EQ(*PcieMaxBytesPerSecond(6, 16), 121e9);
  // Gen6 is not 64 GT/s under 128b/130b (FLIT mode drops it).
  EXPECT_LT(*PcieLaneBytesPerSecond(6), 64e9 * 128 / 130 / 8);
}

TEST(Pcie, UnknownGenerationsRatesAndUntrainedLinksAreAbsent) {
  for (const uint32_t generation : {0u, 7u, 9u}) {
    EXPECT_FALSE(PcieLaneGts(generation)) << generation;
    EXPECT_FALSE(PcieLaneBytesPerSecond(generation)) << generation;
    EXPECT_FALSE(PcieMaxBytesPerSecond(generation, 16)) << generation;
  }
  for (const double gts : {0.0, 2.0, 10.0, 128.0}) EXPECT_FALSE(PcieGeneration(gts)) << gts;
  EXPECT_FALSE(PcieMaxBytesPerSecond(4, 0));
}

}  // namespace
}  // namespace pcie_test
}  // namespace accelmon::collectors
