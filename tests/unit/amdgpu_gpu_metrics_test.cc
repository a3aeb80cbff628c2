#include "collectors/amdgpu_gpu_metrics.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "collectors/amdgpu.h"

namespace accelmon::collectors {
namespace amdgpu_gpu_metrics_test {
namespace {

// A table as the driver starts it: every byte 0xff ("not filled"), then the header.
std::string Table(uint8_t format, uint8_t content, size_t size) {
  std::string blob(size, '\xff');
  const auto header_size = static_cast<uint16_t>(size);
  std::memcpy(blob.data(), &header_size, sizeof header_size);
  blob[2] = static_cast<char>(format);
  blob[3] = static_cast<char>(content);
  return blob;
}

template <typename T>
void Put(std::string& blob, size_t offset, T value) {
  std::memcpy(blob.data() + offset, &value, sizeof value);
}

std::vector<double> Dies(const AmdgpuGpuMetrics& m) {
  return {m.compute_die_ratios.begin(), m.compute_die_ratios.end()};
}

TEST(AmdgpuGpuMetrics, V1_3ActivityAtItsOwnOffsetsWithoutEnergy) {
  // MI200 (Aldebaran): average_gfx_activity at 16, average_umc_activity at 18.
  std::string blob = Table(1, 3, 120);
  Put<uint16_t>(blob, 16, 99);
  Put<uint16_t>(blob, 18, 7);
  Put<uint64_t>(blob, 24, 123456);  // energy_accumulator: units undocumented before 1.4
  AmdgpuGpuMetrics m;
  std::string why;
  ASSERT_EQ(ParseAmdgpuGpuMetrics(blob, m, why), GpuMetricsResult::kDecoded) << why;
  EXPECT_DOUBLE_EQ(*m.gfx_activity_ratio, 0.99);
  EXPECT_DOUBLE_EQ(*m.umc_activity_ratio, 0.07);
  EXPECT_FALSE(m.energy_joules);
  EXPECT_FALSE(m.pcie_replays);
  EXPECT_TRUE(m.compute_die_ratios.empty());
}

TEST(AmdgpuGpuMetrics, UnfilledFieldsAreAbsentNotZeroOrFull) {
  const std::string blob = Table(1, 4, 288);  // MI300, nothing filled
  AmdgpuGpuMetrics m;
  std::string why;
  ASSERT_EQ(ParseAmdgpuGpuMetrics(blob, m, why), GpuMetricsResult::kDecoded) << why;
  EXPECT_FALSE(m.gfx_activity_ratio);
  EXPECT_FALSE(m.umc_activity_ratio);
  EXPECT_FALSE(m.energy_joules);
  EXPECT_FALSE(m.pcie_replays);
  EXPECT_EQ(m.skipped_values, 0u) << "0xffff is 'not filled', not a malformed 65535 %";
}

TEST(AmdgpuGpuMetrics, V1_4EnergyAndReplays) {
  std::string blob = Table(1, 4, 288);
  Put<uint16_t>(blob, 12, 0);
  Put<uint64_t>(blob, 24, 65536 * 10);  // 10 J
  Put<uint64_t>(blob, 88, 3);
  AmdgpuGpuMetrics m;
  std::string why;
  ASSERT_EQ(ParseAmdgpuGpuMetrics(blob, m, why), GpuMetricsResult::kDecoded) << why;
  EXPECT_DOUBLE_EQ(*m.gfx_activity_ratio, 0.0);
  EXPECT_DOUBLE_EQ(*m.energy_joules, 10.0);
  EXPECT_EQ(*m.pcie_replays, 3u);
}

TEST(AmdgpuGpuMetrics, PartitionsInOrderEachWithItsDies) {
  // CPX mode on MI300X/MI350 (v1.7, v1.8): several partitions of one XCD each; only
  // num_partition of the eight xcp_stats entries count.
  for (const auto& [content, size, stride] :
       {std::tuple<uint8_t, size_t, size_t>{7, 2208, 232}, {8, 3360, 376}}) {
    std::string blob = Table(1, content, size);
    Put<uint16_t>(blob, 338, 3);
    Put<uint32_t>(blob, 344 + 0 * stride, 10);
    Put<uint32_t>(blob, 344 + 1 * stride, 20);
    Put<uint32_t>(blob, 344 + 2 * stride, 30);
    Put<uint32_t>(blob, 344 + 2 * stride + 4, 40);
    Put<uint32_t>(blob, 344 + 3 * stride, 99);  // beyond num_partition: not counted
    Put<uint64_t>(blob, 112, 5);
    AmdgpuGpuMetrics m;
    std::string why;
    ASSERT_EQ(ParseAmdgpuGpuMetrics(blob, m, why), GpuMetricsResult::kDecoded) << why;
    EXPECT_EQ(Dies(m), (std::vector<double>{0.1, 0.2, 0.3, 0.4})) << "v1." << int(content);
    EXPECT_EQ(*m.pcie_replays, 5u);
  }
}

TEST(AmdgpuGpuMetrics, PercentOverHundredIsSkippedAndCounted) {
  std::string blob = Table(1, 6, 1664);
  Put<uint16_t>(blob, 12, 250);
  Put<uint16_t>(blob, 14, 100);
  Put<uint16_t>(blob, 306, 1);
  Put<uint32_t>(blob, 312, 101);
  Put<uint32_t>(blob, 316, 50);
  AmdgpuGpuMetrics m;
  std::string why;
  ASSERT_EQ(ParseAmdgpuGpuMetrics(blob, m, why), GpuMetricsResult::kDecoded) << why;
  EXPECT_FALSE(m.gfx_activity_ratio);
  EXPECT_DOUBLE_EQ(*m.umc_activity_ratio, 1.0);
  EXPECT_EQ(Dies(m), (std::vector<double>{0.5}));
  EXPECT_EQ(m.skipped_values, 2u);
}

TEST(AmdgpuGpuMetrics, LayoutsThisBuildDoesNotKnowAreNamed) {
  for (const auto& [format, content] : {std::pair<uint8_t, uint8_t>{1, 0}, {1, 9}, {2, 1}}) {
    AmdgpuGpuMetrics m;
    std::string why;
    EXPECT_EQ(ParseAmdgpuGpuMetrics(Table(format, content, 120), m, why),
              GpuMetricsResult::kUnknownLayout);
    EXPECT_NE(why.find("v" + std::to_string(format) + "." + std::to_string(content)),
              std::string::npos)
        << why;
    EXPECT_FALSE(m.gfx_activity_ratio);
  }
}

TEST(AmdgpuGpuMetrics, WrongSizesAreMalformedAndDecodeNothing) {
  std::string truncated = Table(1, 6, 1664);
  Put<uint16_t>(truncated, 12, 50);
  truncated.resize(400);  // the header still says 1664
  std::string resized = Table(1, 5, 352);
  Put<uint16_t>(resized, 12, 50);
  for (const std::string& blob : {std::string("\x68\x01\x01", 3), truncated, resized}) {
    AmdgpuGpuMetrics m;
    std::string why;
    EXPECT_EQ(ParseAmdgpuGpuMetrics(blob, m, why), GpuMetricsResult::kMalformed);
    EXPECT_FALSE(why.empty());
    EXPECT_FALSE(m.gfx_activity_ratio);
  }
}

TEST(AmdgpuGpuMetrics, CardParseCountsAMalformedTableAndReportsAnUnknownOne) {
  AmdgpuAttributes attributes = {{"vendor", "0x1002"}, {"gpu_metrics", std::string(3, 'x')}};
  std::string unknown;
  const AmdgpuCardContext context{
      .card = "card4", .index = 0, .driver_version = "", .unknown_gpu_metrics = &unknown};
  v1::DeviceTelemetry d;
  EXPECT_EQ(ParseAmdgpuCard(attributes, context, d), 1u);
  EXPECT_TRUE(unknown.empty());
  EXPECT_FALSE(d.has_activity());

  attributes["gpu_metrics"] = Table(2, 1, 120);  // an APU's table
  d.Clear();
  EXPECT_EQ(ParseAmdgpuCard(attributes, context, d), 0u) << "not the driver's fault";
  EXPECT_NE(unknown.find("v2.1"), std::string::npos) << unknown;
  EXPECT_FALSE(d.has_activity());
}

}  // namespace
}  // namespace amdgpu_gpu_metrics_test
}  // namespace accelmon::collectors
