// The nvml collector over tests/fakes/fake_nvml.cc, a stand-in libnvidia-ml.so whose state the
// tests script through its fake_nvml_* functions. To accept an intended change of the golden
// file: ACCELMON_UPDATE_GOLDEN=1 ./build/tests/unit_tests --gtest_filter='NvmlGolden*' and review
// the diff.
#include "collectors/nvml.h"

#include <gtest/gtest.h>
#include <prometheus/text_serializer.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <sstream>
#include <thread>

#include "collectors/deadline_collector.h"
#include "collectors/nvml_api.h"
#include "collectors/registry.h"
#include "collectors/shared_library.h"
#include "collectors/sim.h"
#include "daemon/exporter/metrics_renderer.h"
#include "support/golden.h"
#include "support/wait.h"

namespace accelmon::collectors {
namespace nvml_test {
namespace {

using std::chrono::milliseconds;
using SteadyClock = std::chrono::steady_clock;

// The fake's control functions, from the same loaded instance the collector uses.
struct FakeNvml {
  explicit FakeNvml(const char* path) : lib(path) {
    reset = lib.Function<void (*)()>("fake_nvml_reset");
    set_device_count = lib.Function<void (*)(int)>("fake_nvml_set_device_count");
    set_value = lib.Function<void (*)(int, const char*, double)>("fake_nvml_set_value");
    erase_value = lib.Function<void (*)(int, const char*)>("fake_nvml_erase_value");
    set_string = lib.Function<void (*)(int, const char*, const char*)>("fake_nvml_set_string");
    set_return = lib.Function<void (*)(const char*, int, nvmlReturn_t)>("fake_nvml_set_return");
    push_xid = lib.Function<void (*)(int, unsigned long long)>("fake_nvml_push_xid");
    hang = lib.Function<void (*)(const char*, int)>("fake_nvml_hang");
    init_count = lib.Function<int (*)()>("fake_nvml_init_count");
    calls_in_flight = lib.Function<int (*)()>("fake_nvml_calls_in_flight");
    last_wait_timeout = lib.Function<unsigned (*)()>("fake_nvml_last_wait_timeout");
    wait_calls = lib.Function<int (*)()>("fake_nvml_wait_calls");
    add_process = lib.Function<void (*)(int, const char*, unsigned, unsigned long long)>(
        "fake_nvml_add_process");
    gpm_samples_live = lib.Function<int (*)()>("fake_nvml_gpm_samples_live");
    add_mig = lib.Function<int (*)(int, int, const char*, unsigned, unsigned)>("fake_nvml_add_mig");
    remove_mig = lib.Function<void (*)(int, int)>("fake_nvml_remove_mig");
    call_count = lib.Function<int (*)(const char*)>("fake_nvml_call_count");
  }
  std::string path() const { return lib.path(); }

  SharedLibrary lib;
  void (*reset)() = nullptr;
  void (*set_device_count)(int) = nullptr;
  void (*set_value)(int, const char*, double) = nullptr;
  void (*erase_value)(int, const char*) = nullptr;
  void (*set_string)(int, const char*, const char*) = nullptr;
  void (*set_return)(const char*, int, nvmlReturn_t) = nullptr;
  void (*push_xid)(int, unsigned long long) = nullptr;
  void (*hang)(const char*, int) = nullptr;
  int (*init_count)() = nullptr;
  int (*calls_in_flight)() = nullptr;
  unsigned (*last_wait_timeout)() = nullptr;
  int (*wait_calls)() = nullptr;
  void (*add_process)(int, const char*, unsigned, unsigned long long) = nullptr;
  int (*gpm_samples_live)() = nullptr;
  int (*add_mig)(int, int, const char*, unsigned, unsigned) = nullptr;  // legacy: absent
  void (*remove_mig)(int, int) = nullptr;
  int (*call_count)(const char*) = nullptr;
};

FakeNvml& Current() {
  static FakeNvml* fake = new FakeNvml(FAKE_NVML_PATH);
  return *fake;
}

FakeNvml& Legacy() {
  static FakeNvml* fake = new FakeNvml(FAKE_NVML_LEGACY_PATH);
  return *fake;
}

std::unique_ptr<Collector> Create(FakeNvml& fake) {
  std::string why_not;
  auto collector = CreateNvmlCollector(fake.path(), &why_not);
  EXPECT_NE(collector, nullptr) << why_not;
  return collector;
}

v1::NodeReport CollectOnce(Collector& collector, int64_t seconds = 1'700'000'000) {
  v1::NodeReport report;
  report.mutable_timestamp()->set_seconds(seconds);
  collector.Collect(report);
  return report;
}

const v1::Link* FindLink(const v1::DeviceTelemetry& d, const std::string& name) {
  for (const auto& l : d.links()) {
    if (l.name() == name) return &l;
  }
  return nullptr;
}

class Nvml : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(Current().lib.loaded()) << Current().lib.error();
    ASSERT_NE(Current().reset, nullptr);
    ASSERT_TRUE(Legacy().lib.loaded()) << Legacy().lib.error();
    Current().reset();
    Legacy().reset();
  }
  FakeNvml& fake = Current();
};

TEST_F(Nvml, ReportsEveryValueInProtoUnits) {
  auto collector = Create(fake);
  ASSERT_NE(collector, nullptr);
  EXPECT_EQ(collector->name(), "nvml");
  EXPECT_EQ(fake.init_count(), 1);
  const v1::NodeReport report = CollectOnce(*collector);
  ASSERT_EQ(report.devices_size(), 2);
  EXPECT_EQ(report.events_size(), 0);

  const v1::DeviceTelemetry& d = report.devices(0);
  EXPECT_EQ(d.identity().vendor(), "nvidia");
  EXPECT_EQ(d.identity().model(), "NVIDIA H200");
  EXPECT_EQ(d.identity().uuid(), "GPU-fa4e0000-0000-4000-8000-000000000000");
  EXPECT_EQ(d.identity().index(), 0u);
  EXPECT_EQ(d.identity().pci_bus_id(), "0000:18:00.0") << "NVML's 00000000:18:00.0, normalised";
  EXPECT_EQ(d.identity().firmware_version(), "96.00.99.00.00");
  EXPECT_EQ(d.identity().driver_version(), "550.54.15");
  ASSERT_TRUE(d.has_up());
  EXPECT_TRUE(d.up());

  const double total = 150754820096.0, reserved = 512.0 * (1 << 20), used = 10.0 * (1 << 30);
  EXPECT_EQ(d.memory().total_bytes(), total);
  EXPECT_EQ(d.memory().reserved_bytes(), reserved);
  EXPECT_EQ(d.memory().used_bytes(), used);
  EXPECT_EQ(d.memory().free_bytes(), total - reserved - used);
  EXPECT_FALSE(d.memory().has_largest_free_block_bytes());

  EXPECT_DOUBLE_EQ(d.thermal().core_celsius(), 41);
  EXPECT_DOUBLE_EQ(d.thermal().memory_celsius(), 47);  // NVML_FI_DEV_MEMORY_TEMP
  EXPECT_DOUBLE_EQ(d.thermal().slowdown_threshold_celsius(), 87);
  EXPECT_DOUBLE_EQ(d.thermal().shutdown_threshold_celsius(), 92);
  const auto& reasons = d.thermal().throttle_reasons();
  EXPECT_EQ(reasons.size(), 9u);
  EXPECT_TRUE(reasons.at("sw_power_cap"));
  EXPECT_FALSE(reasons.at("hw_thermal"));
  EXPECT_FALSE(reasons.at("gpu_idle"));

  EXPECT_DOUBLE_EQ(d.power().usage_watts(), 352.5);               // 352500 mW
  EXPECT_DOUBLE_EQ(d.power().limit_watts(), 700);                 // 700000 mW
  EXPECT_DOUBLE_EQ(d.power().energy_joules_total(), 123456.789);  // 123456789 mJ
  EXPECT_DOUBLE_EQ(d.utilization().compute_ratio(), 0.87);
  EXPECT_DOUBLE_EQ(d.utilization().memory_bandwidth_ratio(), 0.43);
  EXPECT_DOUBLE_EQ(d.clocks().compute_hz(), 1980e6);
  EXPECT_DOUBLE_EQ(d.clocks().memory_hz(), 2619e6);

  ASSERT_TRUE(d.errors().has_ecc_corrected_total());
  EXPECT_EQ(d.errors().ecc_corrected_total(), 0u);
  EXPECT_EQ(d.errors().ecc_uncorrected_total(), 0u);
  EXPECT_EQ(report.devices(1).errors().ecc_corrected_total(), 3u);
  EXPECT_EQ(report.devices(1).errors().remapped_rows_correctable(), 1u);
  EXPECT_TRUE(d.errors().has_remapped_rows_pending());
  EXPECT_FALSE(d.errors().remapped_rows_failure());
  EXPECT_EQ(d.errors().ecc_corrected_lifetime_total(), 10u);  // NVML_AGGREGATE_ECC
  ASSERT_TRUE(d.errors().has_ecc_uncorrected_lifetime_total());
  EXPECT_EQ(d.errors().ecc_uncorrected_lifetime_total(), 0u);
  EXPECT_EQ(report.devices(1).errors().ecc_corrected_lifetime_total(), 13u);
  ASSERT_TRUE(d.errors().has_retired_pages_single_bit());
  EXPECT_EQ(d.errors().retired_pages_single_bit(), 0u);
  EXPECT_EQ(d.errors().retired_pages_double_bit(), 0u);
  EXPECT_EQ(report.devices(1).errors().retired_pages_single_bit(), 2u)
      << "more pages than the one-address buffer: the count from INSUFFICIENT_SIZE";
  ASSERT_TRUE(d.errors().has_retired_pages_pending());
  EXPECT_FALSE(d.errors().retired_pages_pending());

  // Violation time: NVML's nanoseconds as seconds.
  EXPECT_DOUBLE_EQ(d.clocks().power_violation_seconds_total(), 1.5);
  ASSERT_TRUE(d.clocks().has_thermal_violation_seconds_total());
  EXPECT_DOUBLE_EQ(d.clocks().thermal_violation_seconds_total(), 0);
  EXPECT_DOUBLE_EQ(report.devices(1).clocks().thermal_violation_seconds_total(), 0.25);
  EXPECT_DOUBLE_EQ(d.clocks().low_utilization_violation_seconds_total(), 42);
  EXPECT_TRUE(d.clocks().has_sync_boost_violation_seconds_total());
  EXPECT_TRUE(d.clocks().has_board_limit_violation_seconds_total());
  EXPECT_TRUE(d.clocks().has_reliability_violation_seconds_total());
  ASSERT_TRUE(d.state().has_performance_state());
  EXPECT_EQ(d.state().performance_state(), 0u);
  EXPECT_EQ(report.devices(1).state().performance_state(), 2u);
  EXPECT_TRUE(d.state().persistence_mode());
  EXPECT_FALSE(d.thermal().has_fan_speed_ratio()) << "the fake's SXM board has no fan";
  EXPECT_FALSE(d.has_activity()) << "GPM needs a second tick";

  ASSERT_EQ(d.links_size(), 3);
  const v1::Link* pcie = FindLink(d, "pcie");
  ASSERT_NE(pcie, nullptr);
  EXPECT_EQ(pcie->kind(), v1::LINK_KIND_PCIE);
  EXPECT_EQ(pcie->peer(), "host");
  EXPECT_EQ(pcie->pcie_generation(), 5u);
  EXPECT_EQ(pcie->pcie_width(), 16u);
  EXPECT_NEAR(pcie->max_bandwidth_bytes_per_second(), 63.0e9, 0.1e9);  // 5.0 x16
  EXPECT_EQ(pcie->errors_total().at("replay"), 0u);
  EXPECT_FALSE(pcie->has_transmit_bytes_total()) << "NVML has no PCIe byte counters";

  const v1::Link* nv1 = FindLink(d, "nvlink1");
  ASSERT_NE(nv1, nullptr);
  EXPECT_EQ(nv1->kind(), v1::LINK_KIND_NVLINK);
  EXPECT_EQ(nv1->index(), 1u);
  EXPECT_EQ(nv1->peer(), "0000:28:00.0");
  EXPECT_TRUE(nv1->up());
  EXPECT_EQ(nv1->transmit_bytes_total(), 2000000ull * 1024);  // KiB
  EXPECT_EQ(nv1->receive_bytes_total(), 4000000ull * 1024);
  EXPECT_DOUBLE_EQ(nv1->max_bandwidth_bytes_per_second(), 26562e6);
  EXPECT_EQ(nv1->errors_total().at("replay"), 1u);
  EXPECT_EQ(nv1->errors_total().at("recovery"), 0u);
  EXPECT_EQ(nv1->errors_total().at("crc_flit"), 2u);
  EXPECT_EQ(nv1->errors_total().at("crc_data"), 0u);

  const v1::DeviceTelemetry& d1 = report.devices(1);
  EXPECT_EQ(d1.identity().index(), 1u);
  EXPECT_EQ(d1.identity().pci_bus_id(), "0000:28:00.0");
  EXPECT_EQ(FindLink(d1, "nvlink0")->peer(), "0000:18:00.0");
  EXPECT_FALSE(d1.thermal().throttle_reasons().at("sw_power_cap"));

  collector.reset();
  EXPECT_EQ(fake.init_count(), 0) << "nvmlShutdown in the destructor";
}

TEST_F(Nvml, NotSupportedLeavesValuesAbsentNotZero) {
  for (const char* fn : {"nvmlDeviceGetPowerUsage", "nvmlDeviceGetTemperature",
                         "nvmlDeviceGetTotalEccErrors", "nvmlDeviceGetRemappedRows",
                         "nvmlDeviceGetTotalEnergyConsumption", "nvmlDeviceGetNvLinkErrorCounter",
                         "nvmlDeviceGetCurrPcieLinkWidth", "field:82", "field:138"}) {
    fake.set_return(fn, -1, NVML_ERROR_NOT_SUPPORTED);
  }
  fake.set_return("nvmlDeviceGetMemoryInfo_v2", 0, NVML_ERROR_NOT_SUPPORTED);
  fake.set_return("nvmlDeviceGetMemoryInfo", 0, NVML_ERROR_NOT_SUPPORTED);
  fake.set_return("nvmlDeviceGetVbiosVersion", 1, NVML_ERROR_NO_PERMISSION);
  fake.set_value(-1, "nvlink.1.state", 0);
  fake.erase_value(-1, "throttle");
  auto collector = Create(fake);
  ASSERT_NE(collector, nullptr);
  const v1::NodeReport report = CollectOnce(*collector);
  ASSERT_EQ(report.devices_size(), 2);
  for (const v1::DeviceTelemetry& d : report.devices()) {
    EXPECT_TRUE(d.up());
    EXPECT_FALSE(d.power().has_usage_watts());
    EXPECT_FALSE(d.power().has_energy_joules_total());
    EXPECT_TRUE(d.power().has_limit_watts()) << "one call failing leaves the others";
    EXPECT_FALSE(d.thermal().has_core_celsius());
    EXPECT_FALSE(d.thermal().has_memory_celsius());
    EXPECT_TRUE(d.thermal().has_slowdown_threshold_celsius());
    EXPECT_TRUE(d.thermal().throttle_reasons().empty());
    EXPECT_FALSE(d.errors().has_ecc_corrected_total());
    EXPECT_FALSE(d.errors().has_remapped_rows_correctable());
    EXPECT_FALSE(d.errors().has_remapped_rows_pending());
    const v1::Link* pcie = FindLink(d, "pcie");
    ASSERT_NE(pcie, nullptr);
    EXPECT_TRUE(pcie->has_pcie_generation());
    EXPECT_FALSE(pcie->has_pcie_width());
    EXPECT_FALSE(pcie->has_max_bandwidth_bytes_per_second()) << "needs the width";
    const v1::Link* nv0 = FindLink(d, "nvlink0");
    ASSERT_NE(nv0, nullptr);
    EXPECT_TRUE(nv0->errors_total().empty());
    EXPECT_FALSE(nv0->has_transmit_bytes_total());
    EXPECT_TRUE(nv0->has_receive_bytes_total());
    EXPECT_TRUE(nv0->has_max_bandwidth_bytes_per_second());
    const v1::Link* nv1 = FindLink(d, "nvlink1");
    ASSERT_NE(nv1, nullptr);
    ASSERT_TRUE(nv1->has_up());
    EXPECT_FALSE(nv1->up());
    EXPECT_FALSE(nv1->has_max_bandwidth_bytes_per_second()) << "a down link has no speed";
  }
  EXPECT_FALSE(report.devices(0).has_memory() && report.devices(0).memory().has_total_bytes());
  EXPECT_TRUE(report.devices(1).memory().has_reserved_bytes());
  EXPECT_EQ(report.devices(0).identity().firmware_version(), "96.00.99.00.00");
  EXPECT_EQ(report.devices(1).identity().firmware_version(), "");
}

TEST_F(Nvml, HealthCountersNotSupportedAreAbsentNotZero) {
  for (const char* fn : {"nvmlDeviceGetViolationStatus", "nvmlDeviceGetPerformanceState",
                         "nvmlDeviceGetPersistenceMode", "nvmlDeviceGetRetiredPages",
                         "nvmlDeviceGetRetiredPagesPendingStatus", "nvmlDeviceGetTotalEccErrors",
                         "nvmlDeviceGetMigMode"}) {
    fake.set_return(fn, 1, NVML_ERROR_NOT_SUPPORTED);
  }
  fake.set_value(0, "fan", 37);
  auto collector = Create(fake);
  ASSERT_NE(collector, nullptr);
  const v1::NodeReport report = CollectOnce(*collector);
  ASSERT_EQ(report.devices_size(), 2);
  const v1::DeviceTelemetry& d0 = report.devices(0);
  EXPECT_DOUBLE_EQ(d0.thermal().fan_speed_ratio(), 0.37);
  EXPECT_TRUE(d0.clocks().has_power_violation_seconds_total()) << "device 0 still answers";
  EXPECT_TRUE(d0.state().has_performance_state());

  const v1::DeviceTelemetry& d1 = report.devices(1);
  EXPECT_TRUE(d1.up());
  EXPECT_FALSE(d1.thermal().has_fan_speed_ratio());
  EXPECT_FALSE(d1.clocks().has_power_violation_seconds_total());
  EXPECT_FALSE(d1.clocks().has_thermal_violation_seconds_total());
  EXPECT_FALSE(d1.clocks().has_low_utilization_violation_seconds_total());
  EXPECT_TRUE(d1.clocks().has_compute_hz()) << "one call failing leaves the others";
  EXPECT_FALSE(d1.has_state()) << "neither performance state, persistence nor MIG mode";
  EXPECT_FALSE(d1.errors().has_ecc_corrected_lifetime_total());
  EXPECT_FALSE(d1.errors().has_retired_pages_single_bit());
  EXPECT_FALSE(d1.errors().has_retired_pages_double_bit());
  EXPECT_FALSE(d1.errors().has_retired_pages_pending());
  EXPECT_TRUE(d1.errors().has_remapped_rows_pending());

  // And none of it on /metrics for device 1: absent, not 0.
  auto shared = std::make_shared<v1::NodeReport>(report);
  shared->set_node("n");
  const std::string text = testing::RenderFamilies(shared, "accelmon_device_");
  for (const char* family :
       {"accelmon_device_clock_violation_seconds_total", "accelmon_device_performance_state",
        "accelmon_device_persistence_mode", "accelmon_device_retired_pages",
        "accelmon_device_ecc_errors_lifetime_total", "accelmon_device_fan_speed_ratio",
        "accelmon_device_mig_mode"}) {
    EXPECT_EQ(text.find(std::string(family) + "{node=\"n\",device=\"1\""), std::string::npos)
        << family;
  }
  EXPECT_NE(text.find("accelmon_device_fan_speed_ratio{node=\"n\",device=\"0\""), std::string::npos)
      << text;
}

TEST_F(Nvml, ManyRetiredPagesAreCountedAndAPendingRetirementIsSeen) {
  fake.set_value(0, "retired.sbe", 64);
  fake.set_value(0, "retired.dbe", 3);
  fake.set_value(0, "retired.pending", 1);
  auto collector = Create(fake);
  ASSERT_NE(collector, nullptr);
  const v1::NodeReport report = CollectOnce(*collector);
  const v1::DeviceErrors& e = report.devices(0).errors();
  EXPECT_EQ(e.retired_pages_single_bit(), 64u);
  EXPECT_EQ(e.retired_pages_double_bit(), 3u);
  EXPECT_TRUE(e.retired_pages_pending());
}

const v1::EccLocationCounts* FindLocation(const v1::DeviceErrors& e, v1::MemoryLocation l) {
  for (const auto& counts : e.ecc_by_location()) {
    if (counts.location() == l) return &counts;
  }
  return nullptr;
}

TEST_F(Nvml, EccCountsByLocationListOnlyTheLocationsTheGpuCountsIn) {
  fake.set_value(1, "ecc.dram.uncorrected", 2);
  fake.set_value(1, "ecc.l2.corrected", 5);  // an older GPU's L2, volatile corrected only
  auto collector = Create(fake);
  ASSERT_NE(collector, nullptr);
  const v1::NodeReport report = CollectOnce(*collector);
  ASSERT_EQ(report.devices_size(), 2);

  const v1::DeviceErrors& e0 = report.devices(0).errors();
  ASSERT_EQ(e0.ecc_by_location_size(), 2) << "Hopper counts in SRAM and DRAM only";
  const v1::EccLocationCounts* dram = FindLocation(e0, v1::MEMORY_LOCATION_DRAM);
  const v1::EccLocationCounts* sram = FindLocation(e0, v1::MEMORY_LOCATION_SRAM);
  ASSERT_NE(dram, nullptr);
  ASSERT_NE(sram, nullptr);
  EXPECT_EQ(dram->corrected_lifetime_total(), 10u);
  ASSERT_TRUE(sram->has_uncorrected_total()) << "a zero the driver reports is kept";
  EXPECT_EQ(sram->uncorrected_total(), 0u);

  const v1::DeviceErrors& e1 = report.devices(1).errors();
  ASSERT_EQ(e1.ecc_by_location_size(), 3);
  EXPECT_EQ(FindLocation(e1, v1::MEMORY_LOCATION_DRAM)->uncorrected_total(), 2u);
  EXPECT_EQ(FindLocation(e1, v1::MEMORY_LOCATION_DRAM)->corrected_total(), 2u);
  EXPECT_EQ(FindLocation(e1, v1::MEMORY_LOCATION_SRAM)->uncorrected_lifetime_total(), 1u);
  const v1::EccLocationCounts* l2 = FindLocation(e1, v1::MEMORY_LOCATION_L2_CACHE);
  ASSERT_NE(l2, nullptr);
  EXPECT_EQ(l2->corrected_total(), 5u);
  EXPECT_FALSE(l2->has_uncorrected_total()) << "a counter the driver refuses is absent";
  EXPECT_FALSE(l2->has_corrected_lifetime_total());
  EXPECT_EQ(e1.ecc_corrected_total(), 3u) << "the totals stay as the driver counts them";

  auto shared = std::make_shared<v1::NodeReport>(report);
  shared->set_node("n");
  const std::string text = testing::RenderFamilies(shared, "accelmon_device_ecc_errors_by_");
  EXPECT_NE(text.find("accelmon_device_ecc_errors_by_location_total{node=\"n\",device=\"1\","
                      "uuid=\"GPU-fa4e0001-0000-4000-8000-000000000001\",vendor=\"nvidia\","
                      "model=\"NVIDIA H200\",location=\"dram\",type=\"uncorrected\"} 2"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("location=\"l2_cache\",type=\"corrected\"} 5"), std::string::npos) << text;
}

TEST_F(Nvml, EccLocationTheGpuDoesNotCountInIsNotAskedAgain) {
  constexpr const char* kFn = "nvmlDeviceGetMemoryErrorCounter";
  auto collector = Create(fake);
  ASSERT_NE(collector, nullptr);
  CollectOnce(*collector);
  // Per GPU: 6 locations refuse their first call, SRAM and DRAM answer 4 calls each.
  EXPECT_EQ(fake.call_count(kFn), 2 * (6 + 2 * 4));
  CollectOnce(*collector);
  EXPECT_EQ(fake.call_count(kFn), 2 * (6 + 2 * 4) + 2 * (2 * 4)) << "SRAM and DRAM only";

  // Any other refusal is a passing failure: absent this tick, asked again the next.
  fake.set_return(kFn, 0, NVML_ERROR_UNKNOWN);
  const v1::NodeReport failing = CollectOnce(*collector);
  EXPECT_EQ(failing.devices(0).errors().ecc_by_location_size(), 0);
  EXPECT_EQ(failing.devices(1).errors().ecc_by_location_size(), 2);
  fake.set_return(kFn, 0, NVML_SUCCESS);
  const v1::NodeReport back = CollectOnce(*collector);
  EXPECT_EQ(back.devices(0).errors().ecc_by_location_size(), 2);
}

TEST_F(Nvml, EccByLocationNotSupportedIsAbsentWithTheTotalsKept) {
  fake.set_return("nvmlDeviceGetMemoryErrorCounter", 1, NVML_ERROR_NOT_SUPPORTED);
  auto collector = Create(fake);
  ASSERT_NE(collector, nullptr);
  const v1::NodeReport report = CollectOnce(*collector);
  EXPECT_EQ(report.devices(0).errors().ecc_by_location_size(), 2);
  EXPECT_EQ(report.devices(1).errors().ecc_by_location_size(), 0);
  EXPECT_TRUE(report.devices(1).errors().has_ecc_corrected_total());
  auto shared = std::make_shared<v1::NodeReport>(report);
  shared->set_node("n");
  const std::string text = testing::RenderFamilies(shared, "accelmon_device_ecc_errors_by_");
  EXPECT_EQ(text.find("device=\"1\""), std::string::npos) << text;
}

TEST_F(Nvml, GpmActivityCoversEachIntervalFromTheSecondTickAndFollowsChanges) {
  const int live_before = fake.gpm_samples_live();
  auto collector = Create(fake);
  ASSERT_NE(collector, nullptr);
  const v1::NodeReport first = CollectOnce(*collector, 1'700'000'000);
  EXPECT_FALSE(first.devices(0).has_activity()) << "one sample is no interval yet";
  EXPECT_EQ(fake.gpm_samples_live(), live_before + 4) << "two samples per GPU, kept";

  const v1::NodeReport second = CollectOnce(*collector, 1'700'000'001);
  const v1::DeviceActivity& a = second.devices(0).activity();
  EXPECT_DOUBLE_EQ(a.sm_ratio(), 0.625);  // NVML percent -> share
  EXPECT_DOUBLE_EQ(second.devices(1).activity().sm_ratio(), 0.635);
  EXPECT_DOUBLE_EQ(a.sm_occupancy_ratio(), 0.31);
  EXPECT_DOUBLE_EQ(a.graphics_engine_ratio(), 0.87);
  EXPECT_DOUBLE_EQ(a.tensor_ratio(), 0.45);
  ASSERT_TRUE(a.has_tensor_dfma_ratio());
  EXPECT_DOUBLE_EQ(a.tensor_dfma_ratio(), 0);
  EXPECT_DOUBLE_EQ(a.tensor_hmma_ratio(), 0.44);
  EXPECT_DOUBLE_EQ(a.tensor_imma_ratio(), 0.01);
  EXPECT_DOUBLE_EQ(a.fp64_ratio(), 0.005);
  EXPECT_DOUBLE_EQ(a.fp32_ratio(), 0.12);
  EXPECT_DOUBLE_EQ(a.fp16_ratio(), 0.03);
  EXPECT_DOUBLE_EQ(a.integer_ratio(), 0.09);
  EXPECT_DOUBLE_EQ(a.dram_bandwidth_ratio(), 0.55);
  EXPECT_DOUBLE_EQ(a.pcie_transmit_bytes_per_second(), 1024.0 * 1024 * 1024);  // MiB/s
  EXPECT_DOUBLE_EQ(a.pcie_receive_bytes_per_second(), 2048.0 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(a.nvlink_transmit_bytes_per_second(), 20480.0 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(a.nvlink_receive_bytes_per_second(), 40960.0 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(second.devices(0).utilization().compute_ratio(), 0.87)
      << "the coarse utilization stays beside it";

  // The job goes idle on GPU 0 and NVML rounds a busy GPU 1 past 100 %: the next interval shows
  // both, the overshoot as a full share.
  fake.set_value(0, "gpm.2", 3);
  fake.set_value(0, "gpm.5", 0);
  fake.set_value(1, "gpm.2", 100.02);
  const v1::NodeReport third = CollectOnce(*collector, 1'700'000'002);
  EXPECT_DOUBLE_EQ(third.devices(0).activity().sm_ratio(), 0.03);
  EXPECT_DOUBLE_EQ(third.devices(0).activity().tensor_ratio(), 0);
  EXPECT_DOUBLE_EQ(third.devices(1).activity().sm_ratio(), 1.0);

  collector.reset();
  EXPECT_EQ(fake.gpm_samples_live(), live_before) << "every sample freed, before nvmlShutdown";
}

TEST_F(Nvml, GpmUnsupportedRefusedOrMissingLeavesActivityAbsentAndTheRestCollected) {
  fake.set_value(1, "gpm.supported", 0);  // e.g. an A100 beside an H100
  fake.erase_value(0, "gpm.11");          // one metric this GPU does not offer
  auto collector = Create(fake);
  ASSERT_NE(collector, nullptr);
  CollectOnce(*collector);
  v1::NodeReport report = CollectOnce(*collector);
  EXPECT_TRUE(report.devices(0).activity().has_sm_ratio());
  EXPECT_FALSE(report.devices(0).activity().has_fp64_ratio()) << "that metric alone is absent";
  EXPECT_FALSE(report.devices(1).has_activity());
  EXPECT_TRUE(report.devices(1).memory().has_used_bytes());

  // The whole query refused (a profiler holds the counters): absent, not zero, and back after.
  fake.set_return("nvmlGpmMetricsGet", -1, NVML_ERROR_IN_USE);
  report = CollectOnce(*collector);
  EXPECT_FALSE(report.devices(0).has_activity());
  EXPECT_TRUE(report.devices(0).utilization().has_compute_ratio());
  fake.set_return("nvmlGpmMetricsGet", -1, NVML_SUCCESS);
  report = CollectOnce(*collector);
  EXPECT_TRUE(report.devices(0).activity().has_sm_ratio());

  // A sample refused: that tick and the next have nothing (no interval), then it resumes.
  fake.set_return("nvmlGpmSampleGet", 0, NVML_ERROR_NOT_SUPPORTED);
  report = CollectOnce(*collector);
  EXPECT_FALSE(report.devices(0).has_activity());
  fake.set_return("nvmlGpmSampleGet", 0, NVML_SUCCESS);
  EXPECT_FALSE(CollectOnce(*collector).devices(0).has_activity());
  EXPECT_TRUE(CollectOnce(*collector).devices(0).activity().has_sm_ratio());

  // A driver without the GPM API at all (the legacy library): no activity, no error.
  auto legacy = Create(Legacy());
  ASSERT_NE(legacy, nullptr);
  CollectOnce(*legacy);
  const v1::NodeReport old = CollectOnce(*legacy);
  ASSERT_EQ(old.devices_size(), 2);
  EXPECT_FALSE(old.devices(0).has_activity());
}

TEST_F(Nvml, MemoryFallsBackToV1WhenV2IsRefused) {
  fake.set_return("nvmlDeviceGetMemoryInfo_v2", -1, NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
  auto collector = Create(fake);
  ASSERT_NE(collector, nullptr);
  const v1::NodeReport report = CollectOnce(*collector);
  const auto& m = report.devices(0).memory();
  EXPECT_EQ(m.total_bytes(), 150754820096u);
  EXPECT_EQ(m.used_bytes(), m.total_bytes() - m.free_bytes()) << "v1 used includes reserved";
  EXPECT_FALSE(m.has_reserved_bytes());
}

TEST_F(Nvml, OlderDriverWithoutNewerSymbolsFallsBack) {
  FakeNvml& legacy = Legacy();
  ASSERT_EQ(legacy.lib.Symbol("nvmlDeviceGetMemoryInfo_v2"), nullptr);
  ASSERT_EQ(legacy.lib.Symbol("nvmlDeviceGetCurrentClocksEventReasons"), nullptr);
  ASSERT_EQ(legacy.lib.Symbol("nvmlInit_v2"), nullptr);
  auto collector = Create(legacy);
  ASSERT_NE(collector, nullptr);
  EXPECT_EQ(legacy.init_count(), 1) << "nvmlInit (v1)";
  legacy.push_xid(1, 31);
  const v1::NodeReport report = CollectOnce(*collector);
  ASSERT_EQ(report.devices_size(), 2);
  const v1::DeviceTelemetry& d = report.devices(0);
  EXPECT_EQ(d.identity().uuid(), "GPU-fa4e0000-0000-4000-8000-000000000000");
  EXPECT_TRUE(d.up());
  EXPECT_EQ(d.memory().total_bytes(), 150754820096u);
  EXPECT_EQ(d.memory().used_bytes(), d.memory().total_bytes() - d.memory().free_bytes());
  EXPECT_FALSE(d.memory().has_reserved_bytes());
  EXPECT_TRUE(d.thermal().throttle_reasons().at("sw_power_cap")) << "throttle reasons call";
  EXPECT_FALSE(d.thermal().has_memory_celsius()) << "no field values on this driver";
  EXPECT_TRUE(d.thermal().has_core_celsius());
  EXPECT_FALSE(d.errors().has_remapped_rows_correctable());
  EXPECT_TRUE(d.errors().has_ecc_corrected_total());
  const v1::Link* nv0 = FindLink(d, "nvlink0");
  ASSERT_NE(nv0, nullptr);
  EXPECT_TRUE(nv0->up());
  EXPECT_EQ(nv0->peer(), "0000:28:00.0");
  EXPECT_FALSE(nv0->has_transmit_bytes_total());
  EXPECT_EQ(nv0->errors_total().size(), 4u);
  ASSERT_EQ(report.events_size(), 1) << "XIDs through nvmlEventSetWait (v1)";
  EXPECT_EQ(report.events(0).code(), 31u);
  EXPECT_EQ(Current().init_count(), 0) << "the two fakes are separate libraries";
}

std::vector<std::pair<uint32_t, std::optional<uint64_t>>> Processes(const v1::DeviceTelemetry& d) {
  std::vector<std::pair<uint32_t, std::optional<uint64_t>>> out;
  for (const auto& p : d.processes()) {
    out.emplace_back(p.pid(), p.has_used_bytes() ? std::optional(p.used_bytes()) : std::nullopt);
  }
  return out;
}

TEST_F(Nvml, ListsComputeAndGraphicsProcessesOncePerPidWithTheirMemory) {
  fake.add_process(0, "compute", 4711, 2ULL << 30);
  fake.add_process(0, "graphics", 4711, 2ULL << 30);  // both lists: one entry, not twice the bytes
  fake.add_process(0, "graphics", 900, 64ULL << 20);
  fake.add_process(0, "compute", 4800, NVML_VALUE_NOT_AVAILABLE);
  fake.add_process(1, "compute", 5000, 1ULL << 30);
  auto collector = Create(fake);
  ASSERT_NE(collector, nullptr);
  const v1::NodeReport report = CollectOnce(*collector);
  ASSERT_EQ(report.devices_size(), 2);
  using P = std::vector<std::pair<uint32_t, std::optional<uint64_t>>>;
  EXPECT_EQ(Processes(report.devices(0)),
            (P{{900, 64ULL << 20}, {4711, 2ULL << 30}, {4800, std::nullopt}}))
      << "ascending by pid; NVML_VALUE_NOT_AVAILABLE leaves used_bytes absent, not 0";
  EXPECT_EQ(Processes(report.devices(1)), (P{{5000, 1ULL << 30}}));
  for (const auto& p : report.devices(0).processes()) {
    EXPECT_TRUE(p.job().empty() && p.user().empty() && !p.has_reserved_bytes())
        << "NVML knows only the pid and its memory";
  }
}

TEST_F(Nvml, DeviceWithoutProcessesListsNone) {
  auto collector = Create(fake);
  ASSERT_NE(collector, nullptr);
  const v1::NodeReport report = CollectOnce(*collector);
  ASSERT_EQ(report.devices_size(), 2);
  EXPECT_TRUE(report.devices(0).processes().empty());
}

TEST_F(Nvml, ProcessStartingBetweenTheCallsIsStillListed) {
  // More than the first call has room for: NVML says how many, and one more starts meanwhile.
  for (unsigned pid = 1000; pid < 1065; ++pid) fake.add_process(0, "compute", pid, 1ULL << 20);
  fake.set_value(0, "processes.appear_between_calls", 1);
  auto collector = Create(fake);
  ASSERT_NE(collector, nullptr);
  const v1::NodeReport report = CollectOnce(*collector);
  const auto processes = Processes(report.devices(0));
  ASSERT_EQ(processes.size(), 66u) << "the retry had room for the one that started in between";
  EXPECT_EQ(processes.front().first, 1000u);
  EXPECT_EQ(processes.back().first, 90065u);
}

TEST_F(Nvml, MoreProcessesThanTheExporterTakesKeepThoseUsingTheMostMemory) {
  for (unsigned pid = 1; pid <= 300; ++pid) fake.add_process(0, "compute", pid, pid * 1000ULL);
  auto collector = Create(fake);
  ASSERT_NE(collector, nullptr);
  const auto processes = Processes(CollectOnce(*collector).devices(0));
  ASSERT_EQ(processes.size(), 256u) << "the exporter's default limit per device";
  EXPECT_EQ(processes.front().first, 45u) << "the 44 smallest are left out";
  EXPECT_EQ(processes.back().first, 300u);
}

TEST_F(Nvml, RefusedProcessListLeavesTheOtherList) {
  fake.add_process(0, "compute", 4711, 1ULL << 30);
  fake.add_process(0, "graphics", 900, 1ULL << 20);
  fake.set_return("nvmlDeviceGetComputeRunningProcesses_v3", -1, NVML_ERROR_NO_PERMISSION);
  auto collector = Create(fake);
  ASSERT_NE(collector, nullptr);
  const v1::NodeReport report = CollectOnce(*collector);
  using P = std::vector<std::pair<uint32_t, std::optional<uint64_t>>>;
  EXPECT_EQ(Processes(report.devices(0)), (P{{900, 1ULL << 20}}));
  EXPECT_TRUE(report.devices(0).up()) << "a refused list is not a failed device";
}

TEST_F(Nvml, DriverWithoutProcessListsReportsNoProcessesAndNoError) {
  FakeNvml& legacy = Legacy();
  ASSERT_EQ(legacy.lib.Symbol("nvmlDeviceGetComputeRunningProcesses_v3"), nullptr);
  ASSERT_EQ(legacy.lib.Symbol("nvmlDeviceGetGraphicsRunningProcesses_v3"), nullptr);
  legacy.add_process(0, "compute", 4711, 1ULL << 30);
  auto collector = Create(legacy);
  ASSERT_NE(collector, nullptr);
  const v1::NodeReport report = CollectOnce(*collector);
  ASSERT_EQ(report.devices_size(), 2);
  EXPECT_TRUE(report.devices(0).up());
  EXPECT_TRUE(report.devices(0).processes().empty());
}

TEST_F(Nvml, LostGpuIsDownWithOneEventAndTheOthersGoOn) {
  fake.set_device_count(3);
  auto collector = Create(fake);
  ASSERT_NE(collector, nullptr);
  ASSERT_EQ(CollectOnce(*collector, 100).devices_size(), 3);

  fake.set_return("*", 1, NVML_ERROR_GPU_IS_LOST);
  for (int64_t t : {101, 102}) {
    const v1::NodeReport report = CollectOnce(*collector, t);
    ASSERT_EQ(report.devices_size(), 3);
    const v1::DeviceTelemetry& lost = report.devices(1);
    ASSERT_TRUE(lost.has_up());
    EXPECT_FALSE(lost.up());
    EXPECT_EQ(lost.identity().uuid(), "GPU-fa4e0001-0000-4000-8000-000000000001")
        << "identity as last seen";
    EXPECT_EQ(lost.identity().index(), 1u);
    EXPECT_FALSE(lost.has_memory());
    EXPECT_EQ(lost.links_size(), 0);
    for (int i : {0, 2}) {
      EXPECT_TRUE(report.devices(i).up());
      EXPECT_TRUE(report.devices(i).memory().has_total_bytes());
    }
    if (t == 101) {
      ASSERT_EQ(report.events_size(), 1);
      const v1::Event& e = report.events(0);
      EXPECT_EQ(e.kind(), v1::EVENT_KIND_DEVICE_LOST);
      EXPECT_EQ(e.device_index(), 1u);
      EXPECT_EQ(e.device_uuid(), "GPU-fa4e0001-0000-4000-8000-000000000001");
      EXPECT_EQ(e.time().seconds(), 101);
    } else {
      EXPECT_EQ(report.events_size(), 0) << "one event on the transition, not every tick";
    }
  }

  // Back after a reset: up again; a second loss, seen by a single call, is a new event.
  fake.set_return("*", 1, NVML_SUCCESS);
  v1::NodeReport report = CollectOnce(*collector, 103);
  EXPECT_TRUE(report.devices(1).up());
  EXPECT_EQ(report.events_size(), 0);
  fake.set_return("nvmlDeviceGetPowerUsage", 2, NVML_ERROR_GPU_IS_LOST);
  report = CollectOnce(*collector, 104);
  EXPECT_FALSE(report.devices(2).up());
  ASSERT_EQ(report.events_size(), 1);
  EXPECT_EQ(report.events(0).device_index(), 2u);
}

TEST_F(Nvml, XidEventsAreDrainedWithoutBlocking) {
  auto collector = Create(fake);
  ASSERT_NE(collector, nullptr);
  fake.push_xid(0, 79);
  fake.push_xid(1, 48);
  fake.push_xid(0, 13);
  const auto start = SteadyClock::now();
  const v1::NodeReport report = CollectOnce(*collector, 200);
  EXPECT_LT(SteadyClock::now() - start, milliseconds(500));
  EXPECT_EQ(fake.last_wait_timeout(), 0u) << "never waits for an event";
  std::vector<std::pair<uint32_t, uint64_t>> seen;
  for (const v1::Event& e : report.events()) {
    ASSERT_EQ(e.kind(), v1::EVENT_KIND_XID);
    EXPECT_EQ(e.time().seconds(), 200);
    EXPECT_EQ(e.device_uuid(),
              report.devices(static_cast<int>(e.device_index())).identity().uuid());
    seen.emplace_back(e.device_index(), e.code());
  }
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(seen, (std::vector<std::pair<uint32_t, uint64_t>>{{0, 13}, {0, 79}, {1, 48}}));

  const int waits = fake.wait_calls();
  EXPECT_EQ(CollectOnce(*collector, 201).events_size(), 0) << "drained";
  EXPECT_EQ(fake.wait_calls(), waits + 1) << "one empty wait per tick";
}

TEST_F(Nvml, MissingLibraryIsNullWithWhyNot) {
  std::string why_not;
  EXPECT_EQ(CreateNvmlCollector("/nonexistent/libnvidia-ml.so.1", &why_not), nullptr);
  EXPECT_NE(why_not.find("libnvidia-ml.so.1"), std::string::npos) << why_not;
  EXPECT_NE(why_not.find("No such file"), std::string::npos) << why_not;

  why_not.clear();
  EXPECT_EQ(CreateNvmlCollector("libm.so.6", &why_not), nullptr);
  EXPECT_NE(why_not.find("not an NVML library"), std::string::npos) << why_not;
}

TEST_F(Nvml, InitFailureIsNullWithWhyNot) {
  fake.set_return("nvmlInit_v2", -1, NVML_ERROR_DRIVER_NOT_LOADED);
  std::string why_not;
  EXPECT_EQ(CreateNvmlCollector(fake.path(), &why_not), nullptr);
  EXPECT_NE(why_not.find("nvmlInit failed: Driver Not Loaded (9)"), std::string::npos) << why_not;
  EXPECT_EQ(fake.init_count(), 0);
}

TEST_F(Nvml, DeviceCountFailureFailsTheTick) {
  auto collector = Create(fake);
  ASSERT_NE(collector, nullptr);
  fake.set_return("nvmlDeviceGetCount_v2", -1, NVML_ERROR_UNKNOWN);
  v1::NodeReport report;
  EXPECT_THROW(collector->Collect(report), CollectorError);
}

TEST_F(Nvml, DeviceWithoutHandleIsSkipped) {
  fake.set_return("nvmlDeviceGetHandleByIndex_v2", 0, NVML_ERROR_NO_PERMISSION);
  auto collector = Create(fake);
  ASSERT_NE(collector, nullptr);
  const v1::NodeReport report = CollectOnce(*collector);
  ASSERT_EQ(report.devices_size(), 1);
  EXPECT_EQ(report.devices(0).identity().index(), 1u);
  EXPECT_EQ(report.events_size(), 0);
}

// Waits until the hung call returned and the deadline collector answers again.
bool Recovers(const std::function<bool()>& collect_ok) {
  return testing::WaitFor(collect_ok, std::chrono::seconds(10));
}

TEST_F(Nvml, HungCallFailsTheTickQuicklyAndOthersStillCollect) {
  auto nvml = Create(fake);
  ASSERT_NE(nvml, nullptr);
  DeadlineCollector deadline(std::move(nvml), milliseconds(200));
  {
    v1::NodeReport report;
    deadline.Collect(report);
    EXPECT_EQ(report.devices_size(), 2);
  }

  fake.hang("nvmlDeviceGetPowerUsage", 2000);
  auto start = SteadyClock::now();
  v1::NodeReport report;
  EXPECT_THROW(deadline.Collect(report), CollectorError);
  EXPECT_LT(SteadyClock::now() - start, milliseconds(1000));
  EXPECT_EQ(report.devices_size(), 0);
  EXPECT_TRUE(Recovers([&] {
    v1::NodeReport r;
    try {
      deadline.Collect(r);
    } catch (const CollectorError&) {
      return false;
    }
    return r.devices_size() == 2;
  }));

  // In a collector set, the hung NVML collector fails its tick; the others report.
  std::vector<std::unique_ptr<Collector>> list;
  list.push_back(std::make_unique<DeadlineCollector>(Create(fake), milliseconds(200)));
  list.push_back(std::make_unique<SimCollector>(SimOptions{.devices = 2, .seed = 7}));
  CollectorSet set(std::move(list));
  fake.hang("nvmlDeviceGetClockInfo", 2000);
  for (int tick = 0; tick < 2; ++tick) {
    start = SteadyClock::now();
    v1::NodeReport r;
    r.mutable_timestamp()->set_seconds(1'700'000'000 + tick);
    set.CollectAll(r);
    EXPECT_LT(SteadyClock::now() - start, milliseconds(1000));
    ASSERT_EQ(r.collectors_size(), 2);
    EXPECT_FALSE(r.collectors(0).success());
    EXPECT_EQ(r.collectors(0).name(), "nvml");
    EXPECT_TRUE(r.collectors(1).success());
    ASSERT_EQ(r.devices_size(), 2);
    EXPECT_EQ(r.devices(0).identity().vendor(), "sim");
  }
  EXPECT_TRUE(Recovers([&] {
    v1::NodeReport r;
    set.CollectAll(r);
    return r.collectors(0).success();
  }));
  EXPECT_EQ(fake.calls_in_flight(), 0);
}

TEST_F(Nvml, MigDevicesReportAsDevicesOfTheirOwnNamingTheirGpu) {
  const int small = fake.add_mig(0, 0, "1g.18gb", 9, 0);
  const int large = fake.add_mig(0, 2, "3g.71gb", 2, 0);
  fake.add_process(0, "compute", 4242, 1 << 30);  // the GPU's aggregate list
  fake.add_process(small, "compute", 4242, 1 << 30);
  fake.add_process(large, "compute", 5151, 3ULL << 30);
  auto collector = Create(fake);
  ASSERT_NE(collector, nullptr);
  CollectOnce(*collector);
  const v1::NodeReport report = CollectOnce(*collector);

  // Each GPU first, then its MIG devices: 100 x (GPU index + 1) + the MIG slot.
  ASSERT_EQ(report.devices_size(), 4);
  EXPECT_EQ(report.devices(0).identity().index(), 0u);
  EXPECT_EQ(report.devices(1).identity().index(), 100u);
  EXPECT_EQ(report.devices(2).identity().index(), 102u);
  EXPECT_EQ(report.devices(3).identity().index(), 1u);

  const v1::DeviceTelemetry& gpu = report.devices(0);
  EXPECT_TRUE(gpu.state().mig_enabled());
  EXPECT_TRUE(report.devices(3).state().has_mig_enabled());
  EXPECT_FALSE(report.devices(3).state().mig_enabled()) << "MIG-capable, not partitioned";
  EXPECT_EQ(gpu.processes_size(), 0) << "in MIG mode the processes are the MIG devices'";
  EXPECT_TRUE(gpu.thermal().has_core_celsius()) << "the physical GPU reports as before";

  const v1::DeviceTelemetry& mig = report.devices(1);
  const auto& id = mig.identity();
  EXPECT_EQ(id.vendor(), "nvidia");
  EXPECT_EQ(id.uuid().rfind("MIG-", 0), 0u) << id.uuid();
  EXPECT_EQ(id.model(), "NVIDIA H200 MIG 1g.18gb");
  EXPECT_EQ(id.pci_bus_id(), gpu.identity().pci_bus_id());
  EXPECT_EQ(id.mig().parent_uuid(), gpu.identity().uuid());
  EXPECT_EQ(id.mig().parent_index(), 0u);
  EXPECT_EQ(id.mig().gpu_instance_id(), 9u);
  EXPECT_EQ(id.mig().compute_instance_id(), 0u);
  EXPECT_EQ(id.mig().profile(), "1g.18gb");
  EXPECT_TRUE(mig.up());
  EXPECT_EQ(mig.memory().total_bytes(), 18ULL << 30);
  EXPECT_EQ(mig.memory().used_bytes(), 1ULL << 30);
  ASSERT_EQ(mig.processes_size(), 1);
  EXPECT_EQ(mig.processes(0).pid(), 4242u);
  // GPM of its GPU instance, through the GPU's handle.
  EXPECT_DOUBLE_EQ(mig.activity().sm_ratio(), 0.40);
  EXPECT_DOUBLE_EQ(report.devices(2).activity().sm_ratio(), 0.60);
  EXPECT_EQ(report.devices(2).processes(0).pid(), 5151u);
  // What an instance has no counter of its own for is absent, not the GPU's and not zero.
  EXPECT_FALSE(mig.has_thermal());
  EXPECT_FALSE(mig.has_power());
  EXPECT_FALSE(mig.has_utilization());
  EXPECT_FALSE(gpu.identity().has_mig());
}

TEST_F(Nvml, MigNotSupportedOrRefusedLeavesTheGpuAsItWas) {
  fake.erase_value(1, "mig.mode");  // a GPU without MIG (e.g. an L40S)
  const int mig = fake.add_mig(0, 1, "2g.35gb", 5, 0);
  fake.set_return("nvmlDeviceGetGpuInstanceId", mig, NVML_ERROR_NOT_SUPPORTED);
  const int other = fake.add_mig(0, 3, "1g.18gb", 6, 0);
  fake.set_return("nvmlDeviceGetComputeInstanceId", other, NVML_ERROR_NOT_SUPPORTED);
  fake.set_return("nvmlGpmMigSampleGet", 0, NVML_ERROR_NOT_SUPPORTED);
  fake.add_mig(0, 5, "1g.18gb", 7, 0);
  fake.set_return("nvmlDeviceGetMigDeviceHandleByIndex", 0, NVML_ERROR_NO_PERMISSION);
  auto collector = Create(fake);
  ASSERT_NE(collector, nullptr);
  CollectOnce(*collector);
  EXPECT_EQ(CollectOnce(*collector).devices_size(), 2) << "no MIG handles: the GPUs alone";
  fake.set_return("nvmlDeviceGetMigDeviceHandleByIndex", 0, NVML_SUCCESS);
  CollectOnce(*collector);
  v1::NodeReport report = CollectOnce(*collector);
  ASSERT_EQ(report.devices_size(), 5);
  EXPECT_FALSE(report.devices(4).state().has_mig_enabled()) << "no MIG: absent, not false";
  const v1::DeviceTelemetry& d = report.devices(1);
  EXPECT_EQ(d.identity().index(), 101u);
  EXPECT_FALSE(d.identity().mig().has_gpu_instance_id());
  EXPECT_FALSE(d.has_activity()) << "no instance id, no instance GPM";
  EXPECT_TRUE(d.memory().has_used_bytes());
  const v1::DeviceTelemetry& no_ci = report.devices(2);
  EXPECT_EQ(no_ci.identity().index(), 103u);
  EXPECT_EQ(no_ci.identity().mig().gpu_instance_id(), 6u);
  EXPECT_FALSE(no_ci.identity().mig().has_compute_instance_id());
  EXPECT_FALSE(no_ci.has_activity()) << "instance GPM refused: absent";
  EXPECT_TRUE(report.devices(0).has_activity()) << "the GPU's own GPM is unaffected";
  fake.set_return("nvmlGpmMigSampleGet", 0, NVML_SUCCESS);
  CollectOnce(*collector);
  EXPECT_TRUE(CollectOnce(*collector).devices(2).activity().has_sm_ratio());

  // The slot count refused: the GPU alone, in MIG mode.
  fake.set_return("nvmlDeviceGetMaxMigDeviceCount", 0, NVML_ERROR_NO_PERMISSION);
  report = CollectOnce(*collector);
  ASSERT_EQ(report.devices_size(), 2);
  EXPECT_TRUE(report.devices(0).state().mig_enabled());

  // A driver without the MIG calls (the legacy library): the GPUs, nothing about MIG.
  auto legacy = Create(Legacy());
  ASSERT_NE(legacy, nullptr);
  const v1::NodeReport old = CollectOnce(*legacy);
  ASSERT_EQ(old.devices_size(), 2);
  EXPECT_FALSE(old.devices(0).state().has_mig_enabled());
}

TEST_F(Nvml, MigDeviceReconfiguredAwayIsDroppedWithItsGpmSamples) {
  fake.add_mig(0, 0, "1g.18gb", 9, 0);
  auto collector = Create(fake);
  ASSERT_NE(collector, nullptr);
  CollectOnce(*collector);
  EXPECT_EQ(CollectOnce(*collector).devices_size(), 3);
  const int live = fake.gpm_samples_live();
  EXPECT_EQ(live, 6) << "two per GPU and two for the instance";
  fake.remove_mig(0, 0);
  const v1::NodeReport report = CollectOnce(*collector);
  ASSERT_EQ(report.devices_size(), 2);
  EXPECT_TRUE(report.devices(0).state().mig_enabled());
  EXPECT_EQ(fake.gpm_samples_live(), 4) << "the vanished instance's samples are freed";
}

TEST_F(Nvml, NvlinkFabricRegistrationIsALinkUpOnlyOnceCompleted) {
  auto collector = Create(fake);
  ASSERT_NE(collector, nullptr);
  EXPECT_EQ(FindLink(CollectOnce(*collector).devices(0), "fabric"), nullptr)
      << "no NVSwitch fabric (NOT_SUPPORTED): no link";

  fake.set_value(0, "fabric.state", NVML_GPU_FABRIC_STATE_COMPLETED);
  fake.set_value(0, "fabric.degraded", 0);
  fake.set_value(1, "fabric.state", NVML_GPU_FABRIC_STATE_IN_PROGRESS);
  v1::NodeReport report = CollectOnce(*collector);
  const v1::Link* done = FindLink(report.devices(0), "fabric");
  ASSERT_NE(done, nullptr);
  EXPECT_EQ(done->kind(), v1::LINK_KIND_NVLINK_FABRIC);
  EXPECT_EQ(done->peer(), "nvswitch");
  EXPECT_TRUE(done->up());
  ASSERT_TRUE(done->has_degraded());
  EXPECT_FALSE(done->degraded());
  const v1::Link* pending = FindLink(report.devices(1), "fabric");
  ASSERT_NE(pending, nullptr);
  EXPECT_FALSE(pending->up()) << "registration in progress";
  EXPECT_FALSE(pending->has_degraded()) << "health bit not supported: absent";

  // Completed with an error, and a degraded fabric.
  fake.set_value(0, "fabric.status", NVML_ERROR_UNKNOWN);
  fake.set_value(1, "fabric.state", NVML_GPU_FABRIC_STATE_COMPLETED);
  fake.set_value(1, "fabric.degraded", 1);
  report = CollectOnce(*collector);
  EXPECT_FALSE(FindLink(report.devices(0), "fabric")->up());
  EXPECT_TRUE(FindLink(report.devices(1), "fabric")->up());
  EXPECT_TRUE(FindLink(report.devices(1), "fabric")->degraded());

  // Refused, or "not supported" as a state: no link.
  fake.set_return("nvmlDeviceGetGpuFabricInfoV", 0, NVML_ERROR_NOT_SUPPORTED);
  fake.set_value(1, "fabric.state", NVML_GPU_FABRIC_STATE_NOT_SUPPORTED);
  report = CollectOnce(*collector);
  EXPECT_EQ(FindLink(report.devices(0), "fabric"), nullptr);
  EXPECT_EQ(FindLink(report.devices(1), "fabric"), nullptr);
}

TEST(NvmlHelpers, ThrottleReasonsFromBitmask) {
  const auto reasons = NvmlThrottleReasons(0x1 | 0x8 | 0x40 | 0x100);
  const std::map<std::string, bool> expected = {
      {"gpu_idle", true},      {"applications_clocks_setting", false},
      {"sw_power_cap", false}, {"hw_slowdown", true},
      {"sync_boost", false},   {"sw_thermal", false},
      {"hw_thermal", true},    {"hw_power_brake", false},
      {"display_clocks", true}};
  EXPECT_EQ(reasons, expected);
  EXPECT_TRUE(NvmlThrottleReasons(0x20).at("sw_thermal"));
  EXPECT_TRUE(NvmlThrottleReasons(0x80).at("hw_power_brake"));
  EXPECT_EQ(NvmlThrottleReasons(1ULL << 40).size(), 9u) << "unknown bits are ignored";
}

TEST(NvmlHelpers, PcieLaneBytesPerSecondForGenerations1To5Only) {
  EXPECT_DOUBLE_EQ(*PcieLaneBytesPerSecond(1), 250e6);
  EXPECT_DOUBLE_EQ(*PcieLaneBytesPerSecond(2), 500e6);
  EXPECT_NEAR(*PcieLaneBytesPerSecond(3), 984.6e6, 0.1e6);
  EXPECT_NEAR(*PcieLaneBytesPerSecond(4) * 16, 31.508e9, 0.001e9);
  EXPECT_NEAR(*PcieLaneBytesPerSecond(5) * 16, 63.015e9, 0.001e9);
  EXPECT_FALSE(PcieLaneBytesPerSecond(0));
  EXPECT_FALSE(PcieLaneBytesPerSecond(9));
}

TEST(NvmlHelpers, PciBusIdIsLowerCaseWithAFourDigitDomainWhenItFits) {
  EXPECT_EQ(NormalizePciBusId("00000000:1B:00.0"), "0000:1b:00.0");
  EXPECT_EQ(NormalizePciBusId("0000:1B:00.0"), "0000:1b:00.0");
  EXPECT_EQ(NormalizePciBusId("00010000:1B:00.0"), "00010000:1b:00.0") << "a domain over 16 bits";
  EXPECT_EQ(NormalizePciBusId(""), "");
}

TEST(NvmlGolden, TwoGpusWithNvlinkMatchGoldenExposition) {
  FakeNvml& fake = Current();
  ASSERT_TRUE(fake.lib.loaded()) << fake.lib.error();
  fake.reset();
  auto collector = Create(fake);
  ASSERT_NE(collector, nullptr);
  CollectOnce(*collector);  // GPM activity covers the interval since this first tick
  auto report = std::make_shared<v1::NodeReport>();
  report->set_node("fixture");
  report->mutable_timestamp()->set_seconds(1'700'000'000);
  collector->Collect(*report);

  const std::string exposition = testing::RenderFamilies(report, "accelmon_device_");
  ASSERT_FALSE(exposition.empty());
  EXPECT_TRUE(testing::MatchesGolden(exposition, "devices/nvml.prom"));
}

}  // namespace
}  // namespace nvml_test
}  // namespace accelmon::collectors
