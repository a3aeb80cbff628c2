#include "collectors/hwmon.h"

#include <gtest/gtest.h>

namespace accelmon::collectors {
namespace hwmon_test {
namespace {

const std::string kFixtures = ACCELMON_FIXTURES_DIR;

v1::NodeReport CollectFrom(const std::string& root) {
  HwmonCollector collector(PathResolver(root + "/proc", root + "/sys"));
  v1::NodeReport report;
  collector.Collect(report);
  return report;
}

TEST(Hwmon, ReadsTemperaturesInCelsiusInChipThenIndexOrder) {
  const v1::NodeReport report = CollectFrom(kFixtures + "/host");
  const auto& t = report.host().temperatures();
  // tests/fixtures/host/sys/class/hwmon, values in millidegrees Celsius there.
  ASSERT_EQ(t.size(), 7);
  EXPECT_EQ(t[0].chip(), "hwmon0");
  EXPECT_EQ(t[0].sensor(), "coretemp Package id 0");
  EXPECT_DOUBLE_EQ(t[0].celsius(), 52.0);
  EXPECT_EQ(t[1].sensor(), "coretemp Core 0");
  EXPECT_DOUBLE_EQ(t[1].celsius(), 48.0);
  EXPECT_EQ(t[2].sensor(), "coretemp Core 1");
  EXPECT_EQ(t[3].sensor(), "coretemp Core 8") << "temp10 sorts after temp3";
  EXPECT_DOUBLE_EQ(t[3].celsius(), 47.0);
  EXPECT_EQ(t[4].chip(), "hwmon1");
  EXPECT_EQ(t[4].sensor(), "nvme Composite");
  EXPECT_DOUBLE_EQ(t[4].celsius(), 38.85);
  EXPECT_EQ(t[5].sensor(), "nvme temp2") << "no label: chip name and attribute";
  EXPECT_DOUBLE_EQ(t[5].celsius(), 41.85);
  // amdgpu's temp2 ("junction") is empty, as an unsupported sensor: absent.
  EXPECT_EQ(t[6].chip(), "hwmon2");
  EXPECT_EQ(t[6].sensor(), "amdgpu edge");
  EXPECT_DOUBLE_EQ(t[6].celsius(), 45.0);
}

TEST(Hwmon, ReadsPowerInWattsFromInputOrAverage) {
  const v1::NodeReport report = CollectFrom(kFixtures + "/host");
  const auto& p = report.host().power_sensors();
  ASSERT_EQ(p.size(), 2);
  EXPECT_EQ(p[0].chip(), "hwmon2");
  EXPECT_EQ(p[0].sensor(), "amdgpu PPT");
  EXPECT_DOUBLE_EQ(p[0].watts(), 34.25);  // power1_average, microwatts
  // acpi_power_meter keeps name and attributes under device/ (old hwmon API).
  EXPECT_EQ(p[1].chip(), "hwmon3");
  EXPECT_EQ(p[1].sensor(), "power_meter power1");
  EXPECT_DOUBLE_EQ(p[1].watts(), 183.0);  // power1_input
}

TEST(Hwmon, UnreadableValuesAreAbsentAndChipsSortNumerically) {
  const v1::NodeReport report = CollectFrom(kFixtures + "/host-variants/hwmon-unreadable");
  const auto& t = report.host().temperatures();
  ASSERT_EQ(t.size(), 2);
  // hwmon2 has no name anywhere: the chip stands in; temp1 ("garbage") is skipped.
  EXPECT_EQ(t[0].chip(), "hwmon2");
  EXPECT_EQ(t[0].sensor(), "hwmon2 temp2");
  EXPECT_DOUBLE_EQ(t[0].celsius(), 30.0);
  EXPECT_EQ(t[1].chip(), "hwmon10") << "hwmon10 sorts after hwmon2";
  EXPECT_EQ(t[1].sensor(), "k10temp Tctl");
  EXPECT_DOUBLE_EQ(t[1].celsius(), 41.25);
  // power1_input is empty, so power1_average counts; power2_input is not a number.
  const auto& p = report.host().power_sensors();
  ASSERT_EQ(p.size(), 1);
  EXPECT_EQ(p[0].sensor(), "hwmon2 power1");
  EXPECT_DOUBLE_EQ(p[0].watts(), 5.0);
}

TEST(Hwmon, ParseLabelsFallbacksAndSkips) {
  v1::HostTelemetry host;
  const HwmonAttributes attributes = {
      {"name", "nct6775\n"},           {"temp1_input", "-2500\n"},
      {"temp1_label", "  \n"},  // a blank label is no label
      {"temp2_input", "12.5"},  // millidegrees are integers
      {"temp2_label", "AUXTIN0"},      {"temp7_input", "36000"},
      {"temp7_label", "PECI Agent 0"}, {"temp7_max", "80000"},
      {"power1_input", "1500000"},     {"power1_average", "9000000"},  // input wins
      {"power3_average", "-1"},        {"power3_label", "CPU"},
  };
  EXPECT_EQ(ParseHwmonChip("hwmon5", attributes, host), 2u);
  ASSERT_EQ(host.temperatures_size(), 2);
  EXPECT_EQ(host.temperatures(0).sensor(), "nct6775 temp1");
  EXPECT_DOUBLE_EQ(host.temperatures(0).celsius(), -2.5);
  EXPECT_EQ(host.temperatures(1).sensor(), "nct6775 PECI Agent 0");
  EXPECT_EQ(host.temperatures(1).chip(), "hwmon5");
  ASSERT_EQ(host.power_sensors_size(), 1);
  EXPECT_EQ(host.power_sensors(0).sensor(), "nct6775 power1");
  EXPECT_DOUBLE_EQ(host.power_sensors(0).watts(), 1.5);
}

TEST(Hwmon, PicksTheAttributesItReadsAndParsesHwmonNumbers) {
  EXPECT_TRUE(IsHwmonAttributeOfInterest("name"));
  EXPECT_TRUE(IsHwmonAttributeOfInterest("temp10_input"));
  EXPECT_TRUE(IsHwmonAttributeOfInterest("temp1_label"));
  EXPECT_TRUE(IsHwmonAttributeOfInterest("power1_average"));
  EXPECT_TRUE(IsHwmonAttributeOfInterest("power2_input"));
  EXPECT_FALSE(IsHwmonAttributeOfInterest("temp1_max"));
  EXPECT_FALSE(IsHwmonAttributeOfInterest("temp1_average"));
  EXPECT_FALSE(IsHwmonAttributeOfInterest("power1_cap"));
  EXPECT_FALSE(IsHwmonAttributeOfInterest("power_state"));  // PCI device attribute under device/
  EXPECT_FALSE(IsHwmonAttributeOfInterest("power"));
  EXPECT_FALSE(IsHwmonAttributeOfInterest("temp_input"));
  EXPECT_FALSE(IsHwmonAttributeOfInterest("in0_input"));
  EXPECT_EQ(HwmonNumber("hwmon10"), 10u);
  EXPECT_EQ(HwmonNumber("hwmon"), std::nullopt);
  EXPECT_EQ(HwmonNumber("hwmonX"), std::nullopt);
}

TEST(Hwmon, MissingClassDirectoryIsAnErrorNamingThePath) {
  HwmonCollector collector(PathResolver("/nonexistent/proc", "/nonexistent/sys"));
  v1::NodeReport report;
  try {
    collector.Collect(report);
    FAIL() << "expected CollectorError";
  } catch (const CollectorError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/sys/class/hwmon"), std::string::npos);
  }
  EXPECT_EQ(report.host().temperatures_size(), 0);
  EXPECT_EQ(report.host().power_sensors_size(), 0);
}

}  // namespace
}  // namespace hwmon_test
}  // namespace accelmon::collectors

namespace accelmon::collectors {
namespace hwmon_test {
namespace {

// Found by the sysfs_devices fuzzer: an index with a leading zero aliased another index and was
// looked up under a name that did not exist.
TEST(HwmonParse, IndexWithLeadingZeroIsIgnored) {
  const HwmonAttributes attributes{
      {"name", "coretemp"}, {"temp09_input", "47000"}, {"temp9_label", "Core 9"}};
  v1::HostTelemetry host;
  EXPECT_NO_FATAL_FAILURE(ParseHwmonChip("hwmon0", attributes, host));
  EXPECT_EQ(host.temperatures_size(), 0);
  EXPECT_FALSE(IsHwmonAttributeOfInterest("temp09_input"));
}

}  // namespace
}  // namespace hwmon_test
}  // namespace accelmon::collectors
