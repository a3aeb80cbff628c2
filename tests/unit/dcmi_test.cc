// The dcmi collector over tests/fakes/fake_dcmi.cc, a stand-in libdcmi.so whose state the tests
// set through its fake_dcmi_* functions. To accept an intended change of the golden file:
// ACCELMON_UPDATE_GOLDEN=1 ./build/tests/unit_tests --gtest_filter='Dcmi*' and review the diff.
#include "collectors/dcmi.h"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <prometheus/text_serializer.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>

#include "collectors/dcmi_api.h"
#include "daemon/exporter/metrics_renderer.h"
#include "support/golden.h"

namespace accelmon::collectors {
namespace dcmi_test {
namespace {

// The fake's control functions, through the same dlopen'ed instance the collector uses.
class FakeDcmi {
 public:
  FakeDcmi() : handle_(dlopen(FAKE_DCMI_PATH, RTLD_NOW | RTLD_LOCAL)) {
    if (handle_ == nullptr) return;
    reset = Get<void (*)()>("fake_dcmi_reset");
    set_layout = Get<void (*)(const int*, const int*, int)>("fake_dcmi_set_layout");
    set_value = Get<void (*)(int, int, const char*, long long)>("fake_dcmi_set_value");
    set_driver_version = Get<void (*)(const char*)>("fake_dcmi_set_driver_version");
    set_return = Get<void (*)(const char*, int, int, int)>("fake_dcmi_set_return");
    call_count = Get<int (*)(const char*)>("fake_dcmi_call_count");
    reset();
  }
  ~FakeDcmi() {
    if (handle_ != nullptr) dlclose(handle_);
  }
  bool loaded() const { return handle_ != nullptr && reset != nullptr && call_count != nullptr; }

  void Layout(std::vector<int> cards, std::vector<int> chips) {
    set_layout(cards.data(), chips.data(), static_cast<int>(cards.size()));
  }

  void (*reset)() = nullptr;
  void (*set_layout)(const int*, const int*, int) = nullptr;
  void (*set_value)(int, int, const char*, long long) = nullptr;
  void (*set_driver_version)(const char*) = nullptr;
  void (*set_return)(const char*, int, int, int) = nullptr;
  int (*call_count)(const char*) = nullptr;

 private:
  template <typename Fn>
  Fn Get(const char* name) {
    return reinterpret_cast<Fn>(dlsym(handle_, name));
  }
  void* handle_;
};

class Dcmi : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fake_.loaded()) << FAKE_DCMI_PATH << ": " << dlerror();
    // Atlas 800T A2: eight cards of one NPU chip each.
    fake_.Layout({0, 1, 2, 3, 4, 5, 6, 7}, {1, 1, 1, 1, 1, 1, 1, 1});
  }

  std::unique_ptr<Collector> Create() {
    std::string why_not;
    auto collector = CreateDcmiCollector(FAKE_DCMI_PATH, &why_not);
    EXPECT_NE(collector, nullptr) << why_not;
    return collector;
  }

  static v1::NodeReport Collect(Collector& collector, int64_t seconds = 1'700'000'000) {
    v1::NodeReport report;
    report.set_node("npu-node");
    report.mutable_timestamp()->set_seconds(seconds);
    collector.Collect(report);
    return report;
  }

  FakeDcmi fake_;
};

TEST(DcmiFormat, DieIdPciBusIdModelAndRoceState) {
  const unsigned int die[5] = {0x1a2b, 0xFFFFFFFF, 0, 0x12345678, 7};
  EXPECT_EQ(FormatDcmiDieId(die), "00001A2B-FFFFFFFF-00000000-12345678-00000007");
  EXPECT_EQ(FormatDcmiPciBusId(0, 0xc1, 0, 0), "0000:c1:00.0");
  EXPECT_EQ(FormatDcmiPciBusId(2, 0x5a, 3, 1), "0002:5a:03.1");
  unsigned char type[32] = "Ascend";
  unsigned char name[32] = "910B3";
  EXPECT_EQ(DcmiModelName(type, name), "Ascend910B3");
  unsigned char unterminated[32];
  std::fill(std::begin(unterminated), std::end(unterminated), 'x');
  EXPECT_EQ(DcmiModelName(type, unterminated).size(), 6u + 32u) << "bounded by the array";
  EXPECT_EQ(DcmiRoceUp(DCMI_RDFX_DETECT_OK), true);
  EXPECT_EQ(DcmiRoceUp(DCMI_RDFX_DETECT_UNREACH), false);
  EXPECT_EQ(DcmiRoceUp(DCMI_RDFX_DETECT_RECV_TIMEOUT), false);
  EXPECT_EQ(DcmiRoceUp(DCMI_RDFX_DETECT_INIT), std::nullopt) << "probe still starting";
  EXPECT_EQ(DcmiRoceUp(DCMI_RDFX_DETECT_SOCK_FAIL), std::nullopt) << "probe itself failed";
}

TEST_F(Dcmi, ReportsEveryChipWithUnitsConverted) {
  fake_.set_driver_version("24.1.rc2");
  fake_.set_value(3, 0, "hbm_total_mb", 65536);
  fake_.set_value(3, 0, "hbm_used_mb", 4096);
  fake_.set_value(3, 0, "hbm_temp", 41);
  fake_.set_value(3, 0, "temperature", 52);
  fake_.set_value(3, 0, "power", 1234);  // 123.4 W
  fake_.set_value(3, 0, "util_aicore", 87);
  fake_.set_value(3, 0, "util_hbm_bw", 33);
  fake_.set_value(3, 0, "util_vector", 41);
  fake_.set_value(3, 0, "network_health", DCMI_RDFX_DETECT_OK);
  fake_.set_value(3, 0, "tx_bytes", 5'000'000'000'000LL);
  fake_.set_value(3, 0, "rx_fcs", 2);
  auto collector = Create();
  ASSERT_NE(collector, nullptr);
  EXPECT_EQ(collector->name(), "dcmi");

  const v1::NodeReport report = Collect(*collector);
  ASSERT_EQ(report.devices_size(), 8);
  EXPECT_EQ(report.events_size(), 0);
  for (int i = 0; i < 8; ++i) {
    const auto& d = report.devices(i);
    EXPECT_EQ(d.identity().index(), static_cast<uint32_t>(i)) << "logical id";
    EXPECT_TRUE(d.up());
  }

  const auto& d = report.devices(3);
  const auto& id = d.identity();
  EXPECT_EQ(id.vendor(), "huawei");
  EXPECT_EQ(id.model(), "Ascend910B3");
  EXPECT_EQ(id.uuid(), "11110003-22220003-33330000-44440000-55550000");
  EXPECT_EQ(id.pci_bus_id(), "0000:f1:00.0");
  EXPECT_EQ(id.driver_version(), "24.1.rc2");
  EXPECT_EQ(id.firmware_version(), "") << "DCMI documents no NPU firmware version call";

  EXPECT_EQ(d.memory().total_bytes(), 64ULL << 30);
  EXPECT_EQ(d.memory().used_bytes(), 4ULL << 30);
  EXPECT_EQ(d.memory().free_bytes(), 60ULL << 30);
  EXPECT_FALSE(d.memory().has_reserved_bytes());
  EXPECT_DOUBLE_EQ(d.thermal().core_celsius(), 52);
  EXPECT_DOUBLE_EQ(d.thermal().memory_celsius(), 41);
  EXPECT_DOUBLE_EQ(d.power().usage_watts(), 123.4);
  EXPECT_FALSE(d.power().has_limit_watts());
  EXPECT_DOUBLE_EQ(d.utilization().compute_ratio(), 0.87);
  EXPECT_DOUBLE_EQ(d.utilization().memory_bandwidth_ratio(), 0.33);
  EXPECT_DOUBLE_EQ(d.activity().vector_ratio(), 0.41);

  ASSERT_EQ(d.links_size(), 1);
  const auto& roce = d.links(0);
  EXPECT_EQ(roce.kind(), v1::LINK_KIND_ROCE);
  EXPECT_EQ(roce.name(), "roce0");
  EXPECT_TRUE(roce.up());
  EXPECT_EQ(roce.transmit_bytes_total(), 5'000'000'000'000ULL);
  EXPECT_EQ(roce.receive_bytes_total(), 8'000'000ULL);
  EXPECT_EQ(roce.transmit_packets_total(), 4000u);
  EXPECT_EQ(roce.errors_total().at("crc"), 2u);
  EXPECT_EQ(roce.errors_total().at("rx_errors"), 3u);
}

TEST_F(Dcmi, CardsWithSeveralChipsAreNumberedByLogicalId) {
  fake_.Layout({2, 5, 6, 9}, {2, 2, 2, 2});
  // The driver's logical numbering need not follow card order.
  fake_.set_value(2, 0, "logic_id", 7);
  fake_.set_value(9, 1, "logic_id", 0);
  auto collector = Create();
  ASSERT_NE(collector, nullptr);
  const v1::NodeReport report = Collect(*collector);
  ASSERT_EQ(report.devices_size(), 8);
  EXPECT_EQ(report.devices(0).identity().index(), 7u);
  EXPECT_EQ(report.devices(7).identity().index(), 0u);
  EXPECT_EQ(report.devices(3).identity().uuid(), "11110003-22220005-33330001-44440000-55550000");
}

TEST_F(Dcmi, NotSupportedLeavesValuesAbsent) {
  fake_.set_return("dcmi_get_device_hbm_info", 1, 0, dcmi::kErrNotSupport);
  fake_.set_return("dcmi_get_device_power_info", 1, 0, dcmi::kErrNotSupport);
  fake_.set_return("dcmi_get_device_utilization_rate/10", -1, -1, dcmi::kErrNotSupport);
  fake_.set_return("dcmi_get_device_utilization_rate/12", 1, 0, dcmi::kErrNotSupport);
  fake_.set_return("dcmi_get_device_network_health", 1, 0, dcmi::kErrNotSupport);
  fake_.set_return("dcmi_get_netdev_pkt_stats_info", 1, 0, dcmi::kErrNotSupport);
  fake_.set_return("dcmi_get_device_die_v2", 1, 0, dcmi::kErrNotSupport);
  fake_.set_return("dcmi_get_device_pcie_info_v2", 1, 0, dcmi::kErrNotSupport);
  fake_.set_value(2, 0, "network_health", DCMI_RDFX_DETECT_INIT);
  auto collector = Create();
  ASSERT_NE(collector, nullptr);
  const v1::NodeReport report = Collect(*collector);
  ASSERT_EQ(report.devices_size(), 8);

  const auto& d = report.devices(1);
  EXPECT_TRUE(d.up());
  EXPECT_FALSE(d.memory().has_total_bytes());
  EXPECT_FALSE(d.memory().has_used_bytes());
  EXPECT_FALSE(d.thermal().has_memory_celsius()) << "HBM temperature comes with HBM info";
  EXPECT_TRUE(d.thermal().has_core_celsius());
  EXPECT_FALSE(d.power().has_usage_watts());
  EXPECT_TRUE(d.utilization().has_compute_ratio());
  EXPECT_FALSE(d.utilization().has_memory_bandwidth_ratio());
  EXPECT_FALSE(d.activity().has_vector_ratio()) << "a chip without vector cores";
  EXPECT_TRUE(report.devices(0).activity().has_vector_ratio());
  EXPECT_EQ(d.links_size(), 0) << "no RoCE call answered";
  // The V1 calls stand in for the V2 ones.
  EXPECT_EQ(d.identity().uuid(), "11110001-22220001-33330000-44440000-55550000");
  EXPECT_EQ(d.identity().pci_bus_id(), "0000:d1:00.0");

  // A probe that is still starting says nothing about the port; its counters still count.
  const auto& starting = report.devices(2);
  ASSERT_EQ(starting.links_size(), 1);
  EXPECT_FALSE(starting.links(0).has_up());
  EXPECT_TRUE(starting.links(0).has_transmit_bytes_total());
  for (const auto& other : report.devices()) {
    EXPECT_FALSE(other.utilization().has_memory_bandwidth_ratio());
  }
}

TEST_F(Dcmi, LostChipIsDownWithOneEventAndOthersGoOn) {
  auto collector = Create();
  ASSERT_NE(collector, nullptr);
  const v1::NodeReport before = Collect(*collector, 100);
  ASSERT_EQ(before.devices_size(), 8);
  const std::string uuid = before.devices(5).identity().uuid();

  fake_.set_return("dcmi_get_device_health", 5, 0, dcmi::kErrDeviceNotExist);
  const v1::NodeReport lost = Collect(*collector, 101);
  ASSERT_EQ(lost.devices_size(), 8);
  const auto& d = lost.devices(5);
  EXPECT_FALSE(d.up());
  EXPECT_EQ(d.identity().uuid(), uuid) << "identity remembered from before";
  EXPECT_EQ(d.identity().index(), 5u);
  EXPECT_FALSE(d.memory().has_total_bytes()) << "nothing measured on a lost chip";
  EXPECT_EQ(d.links_size(), 0);
  for (int i = 0; i < 8; ++i) {
    if (i == 5) continue;
    EXPECT_TRUE(lost.devices(i).up()) << i;
    EXPECT_TRUE(lost.devices(i).thermal().has_core_celsius()) << i;
  }
  ASSERT_EQ(lost.events_size(), 1);
  const auto& e = lost.events(0);
  EXPECT_EQ(e.kind(), v1::EVENT_KIND_DEVICE_LOST);
  EXPECT_EQ(e.device_index(), 5u);
  EXPECT_EQ(e.device_uuid(), uuid);
  EXPECT_EQ(e.time().seconds(), 101);

  // Still lost: no second event.
  const v1::NodeReport still = Collect(*collector, 102);
  EXPECT_FALSE(still.devices(5).up());
  EXPECT_EQ(still.events_size(), 0);

  // Back, then gone from the card list altogether: up again, then one new event.
  fake_.set_return("dcmi_get_device_health", 5, 0, dcmi::kOk);
  const v1::NodeReport back = Collect(*collector, 103);
  EXPECT_TRUE(back.devices(5).up());
  EXPECT_EQ(back.events_size(), 0);
  fake_.Layout({0, 1, 2, 3, 4, 6, 7}, {1, 1, 1, 1, 1, 1, 1});
  const v1::NodeReport unlisted = Collect(*collector, 104);
  ASSERT_EQ(unlisted.devices_size(), 8);
  ASSERT_EQ(unlisted.events_size(), 1);
  EXPECT_EQ(unlisted.events(0).device_uuid(), uuid);
}

TEST_F(Dcmi, LostMidwayAndHealthAlarmLeavesUp) {
  fake_.set_return("dcmi_get_device_temperature", 0, 0, dcmi::kErrDeviceNotExist);
  fake_.set_value(1, 0, "health", 3);  // critical alarm: still answering
  fake_.set_value(2, 0, "health", static_cast<long long>(dcmi::kHealthDeviceAbsent));
  auto collector = Create();
  ASSERT_NE(collector, nullptr);
  const v1::NodeReport report = Collect(*collector);
  EXPECT_FALSE(report.devices(0).up());
  EXPECT_TRUE(report.devices(1).up());
  EXPECT_FALSE(report.devices(2).up());
  EXPECT_EQ(report.events_size(), 2);
}

TEST_F(Dcmi, InitOnceAndCardListFailureFailsTheTick) {
  auto collector = Create();
  ASSERT_NE(collector, nullptr);
  Collect(*collector);
  Collect(*collector);
  EXPECT_EQ(fake_.call_count("dcmi_init"), 1);
  fake_.set_return("dcmi_get_card_list", -1, -1, dcmi::kErrTimeOut);
  v1::NodeReport report;
  EXPECT_THROW(collector->Collect(report), CollectorError);
}

TEST(DcmiCreate, MissingLibraryGivesWhyNot) {
  std::string why_not;
  EXPECT_EQ(CreateDcmiCollector("/nonexistent/libdcmi.so", &why_not), nullptr);
  EXPECT_NE(why_not.find("/nonexistent/libdcmi.so"), std::string::npos) << why_not;
  EXPECT_NE(why_not.find("cannot open shared object file"), std::string::npos) << why_not;
}

TEST_F(Dcmi, InitFailureGivesWhyNot) {
  fake_.set_return("dcmi_init", -1, -1, dcmi::kErrNotReady);
  std::string why_not;
  EXPECT_EQ(CreateDcmiCollector(FAKE_DCMI_PATH, &why_not), nullptr);
  EXPECT_NE(why_not.find("dcmi_init failed: -8012"), std::string::npos) << why_not;
}

TEST_F(Dcmi, MatchesGoldenExposition) {
  fake_.set_value(6, 0, "network_health", DCMI_RDFX_DETECT_UNREACH);
  fake_.set_return("dcmi_get_device_power_info", 7, 0, dcmi::kErrNotSupport);
  auto collector = Create();
  ASSERT_NE(collector, nullptr);
  auto report = std::make_shared<v1::NodeReport>(Collect(*collector));

  const std::string exposition = testing::RenderFamilies(report, "accelmon_device_");
  ASSERT_FALSE(exposition.empty());
  EXPECT_TRUE(testing::MatchesGolden(exposition, "devices/dcmi.prom"));
}

}  // namespace
}  // namespace dcmi_test
}  // namespace accelmon::collectors
