#include "collectors/thermal_zone.h"

#include <gtest/gtest.h>

namespace accelmon::collectors {
namespace thermal_zone_test {
namespace {

const std::string kFixtures = ACCELMON_FIXTURES_DIR;

v1::NodeReport CollectFrom(const std::string& root) {
  ThermalZoneCollector collector(PathResolver(root + "/proc", root + "/sys"));
  v1::NodeReport report;
  collector.Collect(report);
  return report;
}

TEST(ThermalZone, ReadsZonesInCelsiusSortedByZoneNumber) {
  const v1::NodeReport report = CollectFrom(kFixtures + "/host");
  const auto& t = report.host().temperatures();
  // tests/fixtures/host/sys/class/thermal: temp in millidegrees Celsius.
  ASSERT_EQ(t.size(), 3);
  EXPECT_EQ(t[0].chip(), "thermal_zone0");
  EXPECT_EQ(t[0].sensor(), "x86_pkg_temp");
  EXPECT_DOUBLE_EQ(t[0].celsius(), 52.0);
  // Two zones of the same type stay apart by chip.
  EXPECT_EQ(t[1].chip(), "thermal_zone1");
  EXPECT_EQ(t[1].sensor(), "acpitz");
  EXPECT_DOUBLE_EQ(t[1].celsius(), 27.8);
  EXPECT_EQ(t[2].chip(), "thermal_zone2");
  EXPECT_EQ(t[2].sensor(), "acpitz");
  EXPECT_DOUBLE_EQ(t[2].celsius(), 29.8);
  EXPECT_EQ(report.host().power_sensors_size(), 0) << "cooling devices are not sensors";
}

TEST(ThermalZone, UnreadableZonesAreAbsentAndOrderIsNumeric) {
  // thermal_zone3: empty temp (what ENODATA looks like in a fixture), 4: "N/A", 5: no temp file.
  const v1::NodeReport report = CollectFrom(kFixtures + "/host-variants/thermal-unreadable");
  const auto& t = report.host().temperatures();
  ASSERT_EQ(t.size(), 3);
  EXPECT_EQ(t[0].chip(), "thermal_zone1");
  EXPECT_EQ(t[1].chip(), "thermal_zone2");
  EXPECT_EQ(t[2].chip(), "thermal_zone10") << "zone 10 sorts after zone 2";
  EXPECT_DOUBLE_EQ(t[2].celsius(), 30.5);
  for (const auto& sensor : t) {
    EXPECT_NE(sensor.sensor(), "iwlwifi_1");
    EXPECT_NE(sensor.sensor(), "pch_skylake");
    EXPECT_NE(sensor.sensor(), "INT3400");
  }
}

TEST(ThermalZone, ParseConvertsAndRejects) {
  v1::HostTelemetry host;
  EXPECT_TRUE(ParseThermalZone("thermal_zone7", "acpitz\n", "-5500\n", host));
  EXPECT_FALSE(ParseThermalZone("thermal_zone8", "acpitz\n", "", host));
  EXPECT_FALSE(ParseThermalZone("thermal_zone8", "acpitz\n", "42.5", host));
  EXPECT_FALSE(ParseThermalZone("thermal_zone8", "acpitz\n", "45000 C", host));
  EXPECT_FALSE(ParseThermalZone("thermal_zone8", "\n", "45000", host)) << "a zone needs a type";
  ASSERT_EQ(host.temperatures_size(), 1);
  EXPECT_EQ(host.temperatures(0).chip(), "thermal_zone7");
  EXPECT_EQ(host.temperatures(0).sensor(), "acpitz");
  EXPECT_DOUBLE_EQ(host.temperatures(0).celsius(), -5.5);
}

TEST(ThermalZone, ZoneNumberComesOnlyFromThermalZoneDigits) {
  EXPECT_EQ(ThermalZoneNumber("thermal_zone0"), 0u);
  EXPECT_EQ(ThermalZoneNumber("thermal_zone12"), 12u);
  EXPECT_EQ(ThermalZoneNumber("cooling_device0"), std::nullopt);
  EXPECT_EQ(ThermalZoneNumber("thermal_zone"), std::nullopt);
  EXPECT_EQ(ThermalZoneNumber("thermal_zone+1"), std::nullopt);
  EXPECT_EQ(ThermalZoneNumber("thermal_zone1a"), std::nullopt);
}

TEST(ThermalZone, MissingClassDirectoryIsAnErrorNamingThePath) {
  ThermalZoneCollector collector(PathResolver("/nonexistent/proc", "/nonexistent/sys"));
  v1::NodeReport report;
  try {
    collector.Collect(report);
    FAIL() << "expected CollectorError";
  } catch (const CollectorError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/sys/class/thermal"), std::string::npos);
  }
  EXPECT_EQ(report.host().temperatures_size(), 0);
}

}  // namespace
}  // namespace thermal_zone_test
}  // namespace accelmon::collectors
