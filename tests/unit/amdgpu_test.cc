#include "collectors/amdgpu.h"

#include <gtest/gtest.h>
#include <prometheus/text_serializer.h>
#include <stdlib.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <vector>

#include "collectors/file_reader.h"
#include "daemon/exporter/metrics_renderer.h"
#include "support/golden.h"

namespace accelmon::collectors {
namespace amdgpu_test {
namespace {

// tests/fixtures/amdgpu/sys/class/drm: card0 a Radeon RX 580 (Polaris), card1 an NVIDIA H200,
// card2 and card10 two MI300X in one xGMI hive; render nodes and connectors beside them.
const std::string kRoot = std::string(ACCELMON_FIXTURES_DIR) + "/amdgpu";
const std::string kVariants = std::string(ACCELMON_FIXTURES_DIR) + "/amdgpu-variants";

PathResolver Paths(const std::string& root) { return PathResolver(root + "/proc", root + "/sys"); }

v1::NodeReport CollectOnce(AmdgpuCollector& collector, int64_t seconds = 1'700'000'000) {
  v1::NodeReport report;
  report.mutable_timestamp()->set_seconds(seconds);
  collector.Collect(report);
  return report;
}

v1::NodeReport CollectFrom(const std::string& root) {
  AmdgpuCollector collector(Paths(root));
  return CollectOnce(collector);
}

TEST(Amdgpu, Mi300xValuesInBaseUnits) {
  const v1::NodeReport report = CollectFrom(kRoot);
  ASSERT_EQ(report.devices_size(), 3);
  const v1::DeviceTelemetry& d = report.devices(1);  // card2

  const auto& id = d.identity();
  EXPECT_EQ(id.vendor(), "amd");
  EXPECT_EQ(id.model(), "AMD Instinct MI300X OAM");  // product_name
  EXPECT_EQ(id.uuid(), "4fa1c6e2b0d35e71");          // unique_id
  EXPECT_EQ(id.index(), 1u);
  EXPECT_EQ(id.pci_bus_id(), "0000:05:00.0");  // uevent PCI_SLOT_NAME
  EXPECT_EQ(id.firmware_version(), "113-M3000100-102");
  EXPECT_EQ(id.driver_version(), "6.8.5");  // /sys/module/amdgpu/version
  EXPECT_EQ(id.serial(), "692251001234");
  ASSERT_TRUE(d.has_up());
  EXPECT_TRUE(d.up());

  EXPECT_EQ(d.memory().total_bytes(), 205822885888u);
  EXPECT_EQ(d.memory().used_bytes(), 54116544512u);
  EXPECT_EQ(d.memory().free_bytes(), 205822885888u - 54116544512u);
  EXPECT_FALSE(d.memory().has_reserved_bytes());

  EXPECT_DOUBLE_EQ(d.utilization().compute_ratio(), 0.98);  // gpu_busy_percent 98
  EXPECT_DOUBLE_EQ(d.utilization().memory_bandwidth_ratio(), 0.61);

  // No edge sensor on MI300 (GC 9.4.3): junction is the core, with its own limits.
  EXPECT_DOUBLE_EQ(d.thermal().core_celsius(), 71.0);    // temp2_input 71000 "junction"
  EXPECT_DOUBLE_EQ(d.thermal().memory_celsius(), 58.0);  // temp3_input "mem"
  EXPECT_DOUBLE_EQ(d.thermal().slowdown_threshold_celsius(), 100.0);  // temp2_crit
  EXPECT_DOUBLE_EQ(d.thermal().shutdown_threshold_celsius(), 110.0);  // temp2_emergency
  EXPECT_TRUE(d.thermal().throttle_reasons().empty());

  EXPECT_DOUBLE_EQ(d.power().usage_watts(), 612.0);               // power1_input, microwatts
  EXPECT_DOUBLE_EQ(d.power().limit_watts(), 750.0);               // power1_cap
  EXPECT_DOUBLE_EQ(d.power().energy_joules_total(), 1234567.25);  // gpu_metrics, 2^-16 J units
  EXPECT_FALSE(d.thermal().has_fan_speed_ratio()) << "no pwm1: a fanless OAM module";

  EXPECT_DOUBLE_EQ(d.clocks().compute_hz(), 2.1e9);  // freq1 "sclk", hertz
  EXPECT_DOUBLE_EQ(d.clocks().memory_hz(), 1.3e9);   // freq2 "mclk"

  EXPECT_EQ(d.errors().ecc_uncorrected_total(), 0u);  // ras/umc_err_count "ue: 0\nce: 3"
  EXPECT_EQ(d.errors().ecc_corrected_total(), 3u);
  ASSERT_EQ(d.errors().ecc_by_location_size(), 1) << "the memory controller's: DRAM";
  EXPECT_EQ(d.errors().ecc_by_location(0).location(), v1::MEMORY_LOCATION_DRAM);
  EXPECT_EQ(d.errors().ecc_by_location(0).corrected_total(), 3u);
  EXPECT_EQ(d.errors().ecc_by_location(0).uncorrected_total(), 0u);
  EXPECT_FALSE(d.errors().ecc_by_location(0).has_corrected_lifetime_total());
  EXPECT_FALSE(d.errors().has_remapped_rows_correctable());

  ASSERT_GE(d.links_size(), 1);
  const v1::Link& pcie = d.links(0);
  EXPECT_EQ(pcie.kind(), v1::LINK_KIND_PCIE);
  EXPECT_EQ(pcie.name(), "pcie");
  EXPECT_EQ(pcie.peer(), "host");
  EXPECT_EQ(pcie.pcie_generation(), 5u);  // "32.0 GT/s PCIe"
  EXPECT_EQ(pcie.pcie_width(), 16u);
  EXPECT_DOUBLE_EQ(pcie.max_bandwidth_bytes_per_second(), 32e9 * 16 * 128 / 130 / 8);
  EXPECT_FALSE(pcie.has_up());
  EXPECT_FALSE(pcie.has_transmit_bytes_total());
  EXPECT_EQ(pcie.errors_total().at("replay"), 17u);  // gpu_metrics pcie_replay_count_acc

  // gpu_metrics v1.6: the firmware's averages, and each of the eight XCDs of its one partition.
  const v1::DeviceActivity& a = d.activity();
  EXPECT_DOUBLE_EQ(a.graphics_engine_ratio(), 0.63);
  EXPECT_DOUBLE_EQ(a.dram_bandwidth_ratio(), 0.41);
  EXPECT_EQ(std::vector<double>(a.compute_die_ratios().begin(), a.compute_die_ratios().end()),
            (std::vector<double>{0.70, 0.65, 0.60, 0.55, 0.72, 0.68, 0.66, 0.50}));
  EXPECT_FALSE(a.has_sm_ratio()) << "NVIDIA-only kinds stay absent";
}

TEST(Amdgpu, ConsumerCardReportsWhatItHasAndNothingElse) {
  const v1::NodeReport report = CollectFrom(kRoot);
  ASSERT_EQ(report.devices_size(), 3);
  const v1::DeviceTelemetry& d = report.devices(0);  // card0, Polaris

  const auto& id = d.identity();
  EXPECT_EQ(id.model(), "0x67df") << "no product_name: the PCI device id";
  EXPECT_EQ(id.uuid(), "amdgpu-0000:0b:00.0") << "no unique_id: derived from the PCI bus id";
  EXPECT_EQ(id.index(), 0u);
  EXPECT_EQ(id.firmware_version(), "113-1E3660U-O4E");
  EXPECT_EQ(id.serial(), "");

  EXPECT_EQ(d.memory().total_bytes(), 8589934592u);
  EXPECT_EQ(d.memory().free_bytes(), 8589934592u - 1342177280u);
  EXPECT_DOUBLE_EQ(d.utilization().compute_ratio(), 0.37);
  EXPECT_FALSE(d.utilization().has_memory_bandwidth_ratio()) << "no mem_busy_percent";

  // Edge only: the core temperature, with temp1_crit; no emergency, no memory sensor.
  EXPECT_DOUBLE_EQ(d.thermal().core_celsius(), 54.0);
  EXPECT_DOUBLE_EQ(d.thermal().slowdown_threshold_celsius(), 94.0);
  EXPECT_FALSE(d.thermal().has_shutdown_threshold_celsius());
  EXPECT_FALSE(d.thermal().has_memory_celsius());

  EXPECT_DOUBLE_EQ(d.power().usage_watts(), 87.125);  // power1_average
  EXPECT_DOUBLE_EQ(d.power().limit_watts(), 145.0);
  EXPECT_FALSE(d.power().has_energy_joules_total());
  EXPECT_DOUBLE_EQ(d.thermal().fan_speed_ratio(), 0.4);  // pwm1 102 of 255
  EXPECT_FALSE(d.has_activity()) << "no gpu_metrics on Polaris (SMU7)";

  EXPECT_FALSE(d.has_errors()) << "no ras/: ECC absent, not 0";
  ASSERT_EQ(d.links_size(), 1) << "no xGMI";
  EXPECT_EQ(d.links(0).pcie_generation(), 3u);
  EXPECT_DOUBLE_EQ(d.links(0).max_bandwidth_bytes_per_second(), 8e9 * 16 * 128 / 130 / 8);
}

TEST(Amdgpu, OnlyAmdCardsInCardNumberOrder) {
  const v1::NodeReport report = CollectFrom(kRoot);
  // card1 (NVIDIA), renderD128/130 and the connectors are not AMD cards; card10 after card2.
  ASSERT_EQ(report.devices_size(), 3);
  EXPECT_EQ(report.devices(0).identity().pci_bus_id(), "0000:0b:00.0");
  EXPECT_EQ(report.devices(1).identity().pci_bus_id(), "0000:05:00.0");
  EXPECT_EQ(report.devices(2).identity().pci_bus_id(), "0000:25:00.0");
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(report.devices(i).identity().index(), static_cast<uint32_t>(i));
    EXPECT_EQ(report.devices(i).identity().vendor(), "amd");
  }
  EXPECT_EQ(report.events_size(), 0);
  // card10: an idle MI300X; zeros the driver reports are kept.
  const v1::DeviceTelemetry& d = report.devices(2);
  EXPECT_TRUE(d.utilization().has_compute_ratio());
  EXPECT_DOUBLE_EQ(d.utilization().compute_ratio(), 0.0);
  EXPECT_EQ(d.errors().ecc_uncorrected_total(), 1u);
  EXPECT_EQ(d.errors().ecc_corrected_total(), 0u);
  // Its gpu_metrics is v1.5: activity 0 is kept; the unfilled UMC activity (all ones) is
  // absent, and so are per-die values, which v1.5 does not have.
  EXPECT_TRUE(d.activity().has_graphics_engine_ratio());
  EXPECT_DOUBLE_EQ(d.activity().graphics_engine_ratio(), 0.0);
  EXPECT_FALSE(d.activity().has_dram_bandwidth_ratio());
  EXPECT_EQ(d.activity().compute_die_ratios_size(), 0);
  EXPECT_DOUBLE_EQ(d.power().energy_joules_total(), 2000.5);
  EXPECT_EQ(d.links(0).errors_total().at("replay"), 0u);
}

TEST(Amdgpu, XgmiPeersAreTheOtherCardsOfTheHive) {
  const v1::NodeReport report = CollectFrom(kRoot);
  ASSERT_EQ(report.devices_size(), 3);
  const auto xgmi = [](const v1::DeviceTelemetry& d) {
    std::vector<const v1::Link*> links;
    for (const v1::Link& l : d.links()) {
      if (l.kind() == v1::LINK_KIND_XGMI) links.push_back(&l);
    }
    return links;
  };
  EXPECT_TRUE(xgmi(report.devices(0)).empty());
  const auto a = xgmi(report.devices(1));
  const auto b = xgmi(report.devices(2));
  ASSERT_EQ(a.size(), 1u);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(a[0]->name(), "xgmi0");
  EXPECT_EQ(a[0]->peer(), "0000:25:00.0");
  EXPECT_EQ(b[0]->peer(), "0000:05:00.0");
  // sysfs has no per-link state or counters: nothing measured is claimed.
  EXPECT_FALSE(a[0]->has_up());
  EXPECT_FALSE(a[0]->has_transmit_bytes_total());
  EXPECT_FALSE(a[0]->has_max_bandwidth_bytes_per_second());
}

TEST(Amdgpu, FactoryFindsAmdgpuCards) {
  std::string why_not;
  EXPECT_NE(CreateAmdgpuCollector(Paths(kRoot), &why_not), nullptr);
  EXPECT_EQ(why_not, "");
}

TEST(Amdgpu, FactoryWithoutAmdgpuCardSaysWhy) {
  // An NVIDIA card, a Radeon on the radeon driver and an orphan amdgpu render node.
  std::string why_not;
  EXPECT_EQ(CreateAmdgpuCollector(Paths(kVariants + "/no-amd"), &why_not), nullptr);
  EXPECT_NE(why_not.find("no card with PCI vendor 0x1002 bound to amdgpu"), std::string::npos)
      << why_not;
  EXPECT_NE(why_not.find("no-amd/sys/class/drm"), std::string::npos) << why_not;

  EXPECT_EQ(CreateAmdgpuCollector(Paths("/nonexistent"), &why_not), nullptr);
  EXPECT_EQ(why_not, "/nonexistent/sys/class/drm: No such file or directory");
  EXPECT_EQ(CreateAmdgpuCollector(Paths("/nonexistent"), nullptr), nullptr);
}

TEST(Amdgpu, MissingDrmClassIsSourceAbsent) {
  AmdgpuCollector collector(Paths("/nonexistent"));
  v1::NodeReport report;
  EXPECT_THROW(collector.Collect(report), SourceAbsent);
}

TEST(Amdgpu, MalformedValuesAreSkipped) {
  const v1::NodeReport report = CollectFrom(kVariants + "/malformed");
  ASSERT_EQ(report.devices_size(), 1);
  const v1::DeviceTelemetry& d = report.devices(0);
  EXPECT_EQ(d.identity().model(), "0x73bf") << "empty product_name";
  EXPECT_EQ(d.identity().uuid(), "amdgpu-card0") << "no unique_id, no PCI_SLOT_NAME";
  EXPECT_EQ(d.identity().pci_bus_id(), "");
  EXPECT_EQ(d.identity().driver_version(), "") << "no module version: in-tree driver";
  EXPECT_EQ(d.memory().total_bytes(), 17163091968u);
  EXPECT_FALSE(d.memory().has_used_bytes());  // "lots"
  EXPECT_FALSE(d.memory().has_free_bytes());
  EXPECT_FALSE(d.utilization().has_compute_ratio());           // "N/A"
  EXPECT_FALSE(d.utilization().has_memory_bandwidth_ratio());  // 250 %
  EXPECT_DOUBLE_EQ(d.thermal().core_celsius(), 71.0);          // junction; edge is "hot"
  EXPECT_FALSE(d.thermal().has_slowdown_threshold_celsius());  // empty temp2_crit
  EXPECT_FALSE(d.thermal().has_memory_celsius());              // empty temp3_input
  EXPECT_DOUBLE_EQ(d.power().usage_watts(), 42.0);             // empty power1_input: power1_average
  EXPECT_FALSE(d.power().has_limit_watts());                   // "-1"
  EXPECT_FALSE(d.clocks().has_compute_hz());                   // "abc"
  EXPECT_FALSE(d.errors().has_ecc_corrected_total());          // "Query currently inaccessible"
  EXPECT_FALSE(d.errors().has_ecc_uncorrected_total());
  EXPECT_EQ(d.errors().ecc_by_location_size(), 0);
  // "Unknown" speed: the width alone.
  ASSERT_EQ(d.links_size(), 1);
  EXPECT_FALSE(d.links(0).has_pcie_generation());
  EXPECT_EQ(d.links(0).pcie_width(), 16u);
  EXPECT_FALSE(d.links(0).has_max_bandwidth_bytes_per_second());
  EXPECT_TRUE(d.up());
}

TEST(Amdgpu, ParseCountsMalformedValues) {
  const AmdgpuAttributes attributes = {
      {"vendor", "0x1002"},         {"mem_info_vram_used", "lots"},
      {"gpu_busy_percent", "101"},  {"current_link_speed", "fast"},
      {"current_link_width", "16"}, {"ras/umc_err_count", "garbage"},
      {"hwmon/temp1_input", "hot"}, {"hwmon/temp1_label", "edge"},
      {"hwmon/power1_input", "x"},  {"hwmon/power1_average", "5000000"},
  };
  v1::DeviceTelemetry d;
  EXPECT_EQ(ParseAmdgpuCard(attributes, {.card = "card3", .index = 7, .driver_version = ""}, d),
            6u);
  EXPECT_EQ(d.identity().index(), 7u);
  EXPECT_EQ(d.identity().uuid(), "amdgpu-card3");
  EXPECT_EQ(d.identity().model(), "");
  EXPECT_FALSE(d.has_thermal()) << "no message for a card without a usable sensor";
  EXPECT_FALSE(d.has_clocks());
  EXPECT_DOUBLE_EQ(d.power().usage_watts(), 5.0);
}

TEST(Amdgpu, JunctionPreferredOverEdgeWithItsOwnLimits) {
  // A Navi 21 (RX 6800 XT) shows edge, junction and mem.
  const AmdgpuAttributes attributes = {
      {"hwmon/temp1_input", "61000"},      {"hwmon/temp1_label", "edge"},
      {"hwmon/temp1_crit", "100000"},      {"hwmon/temp1_emergency", "105000"},
      {"hwmon/temp2_input", "78000"},      {"hwmon/temp2_label", "junction"},
      {"hwmon/temp2_crit", "110000"},      {"hwmon/temp2_emergency", "115000"},
      {"hwmon/temp3_input", "70000"},      {"hwmon/temp3_label", "mem"},
      {"hwmon/temp3_crit", "100000"},      {"hwmon/temp3_emergency", "105000"},
      {"hwmon/freq1_input", "2250000000"}, {"hwmon/freq1_label", "sclk"},
  };
  v1::DeviceTelemetry d;
  EXPECT_EQ(ParseAmdgpuCard(attributes, {.card = "card0", .index = 0, .driver_version = ""}, d),
            0u);
  EXPECT_DOUBLE_EQ(d.thermal().core_celsius(), 78.0);
  EXPECT_DOUBLE_EQ(d.thermal().slowdown_threshold_celsius(), 110.0);
  EXPECT_DOUBLE_EQ(d.thermal().shutdown_threshold_celsius(), 115.0);
  EXPECT_DOUBLE_EQ(d.thermal().memory_celsius(), 70.0);
  EXPECT_DOUBLE_EQ(d.clocks().compute_hz(), 2.25e9);
  EXPECT_FALSE(d.clocks().has_memory_hz());
  EXPECT_FALSE(d.has_memory());
  EXPECT_FALSE(d.has_power());
  EXPECT_FALSE(d.has_errors());
  EXPECT_FALSE(d.has_utilization());
  EXPECT_EQ(d.links_size(), 0);
}

TEST(Amdgpu, PcieSpeedGenerationAndBandwidth) {
  EXPECT_EQ(ParsePcieSpeedGts("16.0 GT/s PCIe"), 16.0);
  EXPECT_EQ(ParsePcieSpeedGts("2.5 GT/s PCIe"), 2.5);
  EXPECT_EQ(ParsePcieSpeedGts("8 GT/s"), 8.0);  // kernels before 4.19
  EXPECT_EQ(ParsePcieSpeedGts("Unknown"), std::nullopt);
  EXPECT_EQ(ParsePcieSpeedGts("16.0 Gb/s"), std::nullopt);
  EXPECT_EQ(ParsePcieSpeedGts("-8 GT/s"), std::nullopt);
  EXPECT_EQ(ParsePcieSpeedGts(""), std::nullopt);
  EXPECT_EQ(PcieGeneration(2.5), 1u);
  EXPECT_EQ(PcieGeneration(5.0), 2u);
  EXPECT_EQ(PcieGeneration(8.0), 3u);
  EXPECT_EQ(PcieGeneration(16.0), 4u);
  EXPECT_EQ(PcieGeneration(32.0), 5u);
  EXPECT_EQ(PcieGeneration(64.0), 6u);
  EXPECT_EQ(PcieGeneration(10.0), std::nullopt);
  EXPECT_DOUBLE_EQ(*PcieMaxBytesPerSecond(*PcieGeneration(2.5), 16), 4e9);  // 8b/10b
  EXPECT_DOUBLE_EQ(*PcieMaxBytesPerSecond(*PcieGeneration(5.0), 8), 4e9);
  EXPECT_DOUBLE_EQ(*PcieMaxBytesPerSecond(*PcieGeneration(16.0), 16),
                   16e9 * 16 * 128 / 130 / 8);  // ~31.5 GB/s
}

TEST(Amdgpu, RasCountsCardNamesAndUevent) {
  auto c = ParseRasErrorCount("ue: 2\nce: 17\n");
  EXPECT_EQ(c.uncorrected, 2u);
  EXPECT_EQ(c.corrected, 17u);
  c = ParseRasErrorCount("ue: 0\nce: 5\nde: 1\n");  // deferred errors, newer kernels
  EXPECT_EQ(c.uncorrected, 0u);
  EXPECT_EQ(c.corrected, 5u);
  c = ParseRasErrorCount("ue: x\nce: 1");
  EXPECT_EQ(c.uncorrected, std::nullopt);
  EXPECT_EQ(c.corrected, 1u);
  c = ParseRasErrorCount("Query currently inaccessible\n");
  EXPECT_EQ(c.uncorrected, std::nullopt);
  EXPECT_EQ(c.corrected, std::nullopt);

  EXPECT_EQ(DrmCardNumber("card0"), 0u);
  EXPECT_EQ(DrmCardNumber("card10"), 10u);
  EXPECT_EQ(DrmCardNumber("card0-DP-1"), std::nullopt);
  EXPECT_EQ(DrmCardNumber("renderD128"), std::nullopt);
  EXPECT_EQ(DrmCardNumber("controlD64"), std::nullopt);
  EXPECT_EQ(DrmCardNumber("card"), std::nullopt);
  EXPECT_EQ(DrmCardNumber("card01"), std::nullopt);
  EXPECT_EQ(DrmCardNumber("version"), std::nullopt);

  const std::string_view uevent = "DRIVER=amdgpu\nPCI_SLOT_NAME=0000:05:00.0\nPCI_ID=1002:74A1";
  EXPECT_EQ(UeventValue(uevent, "DRIVER"), "amdgpu");
  EXPECT_EQ(UeventValue(uevent, "PCI_SLOT_NAME"), "0000:05:00.0");
  EXPECT_EQ(UeventValue(uevent, "PCI_ID"), "1002:74A1");
  EXPECT_EQ(UeventValue(uevent, "PCI"), "");
  EXPECT_EQ(UeventValue("", "DRIVER"), "");
}

// A reader that fails the reads under chosen paths with a chosen errno.
struct FailingReader {
  std::vector<std::pair<std::string, int>>* failures;
  int operator()(const std::filesystem::path& path, std::string& out) const {
    for (const auto& [fragment, err] : *failures) {
      if (path.string().find(fragment) != std::string::npos) return err;
    }
    return TryReadAttributeFile(path, out);
  }
};

TEST(Amdgpu, UnreadableFilesLeaveWhatIsReadable) {
  std::vector<std::pair<std::string, int>> failures = {
      {"card2/device/hwmon/", EACCES},
      {"card2/device/mem_info_vram_used", EINVAL},
      {"card2/device/unique_id", EACCES},
  };
  AmdgpuCollector collector(Paths(kRoot), FailingReader{&failures});
  const v1::NodeReport report = CollectOnce(collector);
  ASSERT_EQ(report.devices_size(), 3);
  const v1::DeviceTelemetry& d = report.devices(1);
  EXPECT_TRUE(d.up()) << "EACCES and EINVAL are not a lost device";
  EXPECT_EQ(d.identity().uuid(), "amdgpu-0000:05:00.0");
  EXPECT_EQ(d.memory().total_bytes(), 205822885888u);
  EXPECT_FALSE(d.memory().has_used_bytes());
  EXPECT_FALSE(d.memory().has_free_bytes());
  EXPECT_FALSE(d.thermal().has_core_celsius());
  EXPECT_FALSE(d.power().has_usage_watts());
  EXPECT_DOUBLE_EQ(d.utilization().compute_ratio(), 0.98);
  EXPECT_EQ(report.events_size(), 0);
}

TEST(Amdgpu, LostCardIsDownWithOneEventOnTheTransition) {
  std::vector<std::pair<std::string, int>> failures;
  AmdgpuCollector collector(Paths(kRoot), FailingReader{&failures});
  v1::NodeReport report = CollectOnce(collector, 100);
  ASSERT_EQ(report.devices_size(), 3);
  EXPECT_TRUE(report.devices(1).up());

  // card2 falls off the bus: every read under its device directory answers ENODEV.
  failures = {{"card2/device/", ENODEV}};
  report = CollectOnce(collector, 101);
  ASSERT_EQ(report.devices_size(), 3);
  const v1::DeviceTelemetry& lost = report.devices(1);
  EXPECT_FALSE(lost.up());
  EXPECT_EQ(lost.identity().uuid(), "4fa1c6e2b0d35e71") << "remembered from the last good tick";
  EXPECT_EQ(lost.identity().pci_bus_id(), "0000:05:00.0");
  EXPECT_EQ(lost.identity().index(), 1u);
  EXPECT_FALSE(lost.memory().has_total_bytes());
  EXPECT_EQ(lost.links_size(), 0) << "no PCIe or xGMI links for a lost card";
  EXPECT_TRUE(report.devices(0).up());
  EXPECT_TRUE(report.devices(2).up());
  for (const v1::Link& l : report.devices(2).links()) {
    EXPECT_NE(l.kind(), v1::LINK_KIND_XGMI) << "its hive peer is lost";
  }
  ASSERT_EQ(report.events_size(), 1);
  const v1::Event& event = report.events(0);
  EXPECT_EQ(event.kind(), v1::EVENT_KIND_DEVICE_LOST);
  EXPECT_EQ(event.device_index(), 1u);
  EXPECT_EQ(event.device_uuid(), "4fa1c6e2b0d35e71");
  EXPECT_EQ(event.time().seconds(), 101);
  EXPECT_NE(event.message().find("card2"), std::string::npos);

  report = CollectOnce(collector, 102);
  EXPECT_FALSE(report.devices(1).up());
  EXPECT_EQ(report.events_size(), 0) << "one event per loss, not one per tick";

  // It comes back; a second loss is a second event.
  failures.clear();
  report = CollectOnce(collector, 103);
  EXPECT_TRUE(report.devices(1).up());
  EXPECT_EQ(report.events_size(), 0);
  failures = {{"card2/device/", ENODEV}};
  report = CollectOnce(collector, 104);
  EXPECT_EQ(report.events_size(), 1);
}

TEST(Amdgpu, VanishedCardSimplyDisappears) {
  char pattern[] = "/tmp/accelmon-amdgpu-XXXXXX";
  ASSERT_NE(mkdtemp(pattern), nullptr);
  const std::filesystem::path tmp = pattern;
  std::filesystem::copy(kRoot, tmp, std::filesystem::copy_options::recursive);

  AmdgpuCollector collector(Paths(tmp.string()));
  EXPECT_EQ(CollectOnce(collector).devices_size(), 3);
  std::filesystem::remove_all(tmp / "sys/class/drm/card2");
  const v1::NodeReport report = CollectOnce(collector);
  ASSERT_EQ(report.devices_size(), 2);
  EXPECT_EQ(report.devices(1).identity().pci_bus_id(), "0000:25:00.0");
  EXPECT_EQ(report.devices(1).identity().index(), 1u) << "index is the position this tick";
  EXPECT_EQ(report.events_size(), 0);
  std::filesystem::remove_all(tmp);
}

// Renders what the collector reports over the fixture exactly as /metrics does and compares
// with tests/golden/devices/amdgpu.prom. To accept an intended change:
// ACCELMON_UPDATE_GOLDEN=1 <build>/tests/unit_tests --gtest_filter='AmdgpuGolden*'
TEST(AmdgpuGolden, MatchesGoldenExposition) {
  AmdgpuCollector collector(Paths(kRoot));
  auto report = std::make_shared<v1::NodeReport>();
  report->set_node("fixture");
  report->mutable_timestamp()->set_seconds(1'700'000'000);
  collector.Collect(*report);

  const std::string exposition = testing::RenderFamilies(report, "accelmon_device_");
  ASSERT_FALSE(exposition.empty());
  EXPECT_TRUE(testing::MatchesGolden(exposition, "devices/amdgpu.prom"));
}

}  // namespace
}  // namespace amdgpu_test
}  // namespace accelmon::collectors
