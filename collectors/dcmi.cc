#include "collectors/dcmi.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <utility>
#include <vector>

#include "collectors/dcmi_api.h"
#include "collectors/shared_library.h"

namespace accelmon::collectors {
namespace {

constexpr uint64_t kMiB = 1024ULL * 1024ULL;  // DCMI's "MB" of HBM
constexpr int kRocePort = 0;                  // the only port id DCMI accepts today

std::string Bounded(const unsigned char* s, size_t n) {
  const auto* c = reinterpret_cast<const char*>(s);
  return std::string(c, strnlen(c, n));
}

// The functions the collector calls; optional ones may be null on older drivers.
struct DcmiFunctions {
  dcmi_init_fn init = nullptr;
  dcmi_get_card_list_fn card_list = nullptr;  // or dcmi_get_card_num_list, same signature
  dcmi_get_device_num_in_card_fn num_in_card = nullptr;
  dcmi_get_driver_version_fn driver_version = nullptr;
  dcmi_get_device_logic_id_fn logic_id = nullptr;
  dcmi_get_device_chip_info_fn chip_info = nullptr;
  dcmi_get_device_die_v2_fn die_v2 = nullptr;
  dcmi_get_device_die_fn die = nullptr;
  dcmi_get_device_pcie_info_v2_fn pcie_v2 = nullptr;
  dcmi_get_device_pcie_info_fn pcie = nullptr;
  dcmi_get_device_health_fn health = nullptr;
  dcmi_get_device_hbm_info_fn hbm = nullptr;
  dcmi_get_device_temperature_fn temperature = nullptr;
  dcmi_get_device_power_info_fn power = nullptr;
  dcmi_get_device_utilization_rate_fn utilization = nullptr;
  dcmi_get_device_network_health_fn network_health = nullptr;
  dcmi_get_netdev_pkt_stats_info_fn pkt_stats = nullptr;
};

struct ChipKey {
  int card;
  int device;
  auto operator<=>(const ChipKey&) const = default;
};

// What stays the same for a chip between ticks, learned once it answers.
struct ChipState {
  std::optional<uint32_t> logic_id;
  std::string model;
  std::string uuid;
  std::string pci_bus_id;
  bool lost = false;
  unsigned int last_health = 0;
};

class DcmiCollector final : public Collector {
 public:
  DcmiCollector(std::unique_ptr<SharedLibrary> library, DcmiFunctions fn, std::string driver)
      : library_(std::move(library)), fn_(fn), driver_version_(std::move(driver)) {}

  std::string_view name() const override { return "dcmi"; }
  void Collect(v1::NodeReport& report) override;

 private:
  std::vector<ChipKey> Enumerate();
  void LearnIdentity(const ChipKey& key, ChipState& state);
  // Fills `out`; returns false when the chip answered "device does not exist".
  bool CollectChip(const ChipKey& key, ChipState& state, v1::DeviceTelemetry& out);
  void FillIdentity(const ChipKey& key, const ChipState& state, uint32_t fallback_index,
                    v1::DeviceTelemetry& out) const;

  std::unique_ptr<SharedLibrary> library_;
  DcmiFunctions fn_;
  std::string driver_version_;
  std::map<ChipKey, ChipState> chips_;
  std::map<ChipKey, uint32_t> ordinals_;  // index when the library has no logic id
};

std::vector<ChipKey> DcmiCollector::Enumerate() {
  int cards[dcmi::kMaxCardNum] = {};
  int card_num = 0;
  const int rc = fn_.card_list(&card_num, cards, dcmi::kMaxCardNum);
  if (rc != dcmi::kOk) {
    throw CollectorError("dcmi_get_card_list failed: " + std::to_string(rc));
  }
  std::vector<ChipKey> keys;
  for (int i = 0; i < std::min(card_num, dcmi::kMaxCardNum); ++i) {
    int chips = 0;
    if (const int r = fn_.num_in_card(cards[i], &chips); r != dcmi::kOk) {
      spdlog::debug("dcmi: dcmi_get_device_num_in_card({}) failed: {}", cards[i], r);
      continue;
    }
    for (int d = 0; d < chips; ++d) keys.push_back({cards[i], d});
  }
  return keys;
}

void DcmiCollector::LearnIdentity(const ChipKey& key, ChipState& s) {
  const int c = key.card, d = key.device;
  if (!s.logic_id && fn_.logic_id != nullptr) {
    int id = -1;
    if (fn_.logic_id(&id, c, d) == dcmi::kOk && id >= 0) s.logic_id = static_cast<uint32_t>(id);
  }
  if (s.model.empty() && fn_.chip_info != nullptr) {
    dcmi_chip_info info{};
    if (fn_.chip_info(c, d, &info) == dcmi::kOk)
      s.model = DcmiModelName(info.chip_type, info.chip_name);
  }
  if (s.uuid.empty()) {
    dcmi_die_id die{};
    dcmi_soc_die_stru die_v1{};
    if (fn_.die_v2 != nullptr && fn_.die_v2(c, d, VDIE, &die) == dcmi::kOk) {
      s.uuid = FormatDcmiDieId(die.soc_die);
    } else if (fn_.die != nullptr && fn_.die(c, d, &die_v1) == dcmi::kOk) {
      s.uuid = FormatDcmiDieId(die_v1.soc_die);
    }
  }
  if (s.pci_bus_id.empty()) {
    dcmi_pcie_info_all all{};
    dcmi_pcie_info v1{};
    if (fn_.pcie_v2 != nullptr && fn_.pcie_v2(c, d, &all) == dcmi::kOk) {
      s.pci_bus_id =
          FormatDcmiPciBusId(all.domain, all.bdf_busid, all.bdf_deviceid, all.bdf_funcid);
    } else if (fn_.pcie != nullptr && fn_.pcie(c, d, &v1) == dcmi::kOk) {
      s.pci_bus_id = FormatDcmiPciBusId(0, v1.bdf_busid, v1.bdf_deviceid, v1.bdf_funcid);
    }
  }
}

void DcmiCollector::FillIdentity(const ChipKey& key, const ChipState& s, uint32_t fallback_index,
                                 v1::DeviceTelemetry& out) const {
  auto& id = *out.mutable_identity();
  id.set_vendor("huawei");
  id.set_model(s.model);
  // Without a die id the card and chip numbers still tell chips apart on this node.
  id.set_uuid(s.uuid.empty()
                  ? "card" + std::to_string(key.card) + "-chip" + std::to_string(key.device)
                  : s.uuid);
  id.set_index(s.logic_id.value_or(fallback_index));
  id.set_pci_bus_id(s.pci_bus_id);
  id.set_driver_version(driver_version_);
}

bool DcmiCollector::CollectChip(const ChipKey& key, ChipState& s, v1::DeviceTelemetry& out) {
  const int c = key.card, d = key.device;
  bool gone = false;
  // Any call may be the first to notice the chip is gone; the rest of its values stay absent.
  auto ok = [&gone](int rc) {
    if (rc == dcmi::kErrDeviceNotExist) gone = true;
    return rc == dcmi::kOk;
  };

  if (fn_.health != nullptr) {
    unsigned int health = 0;
    if (ok(fn_.health(c, d, &health))) {
      if (health == dcmi::kHealthDeviceAbsent) return false;
      // A raised alarm leaves the chip answering: note it, keep it up.
      if (health != s.last_health && health != 0) {
        spdlog::warn("dcmi: card {} chip {} reports health {} (1 minor, 2 major, 3 critical)", c, d,
                     health);
      }
      s.last_health = health;
    }
    if (gone) return false;
  }

  if (fn_.hbm != nullptr) {
    dcmi_hbm_info hbm{};
    if (ok(fn_.hbm(c, d, &hbm))) {
      auto& mem = *out.mutable_memory();
      mem.set_total_bytes(hbm.memory_size * kMiB);
      mem.set_used_bytes(hbm.memory_usage * kMiB);
      if (hbm.memory_usage <= hbm.memory_size) {
        mem.set_free_bytes((hbm.memory_size - hbm.memory_usage) * kMiB);
      }
      out.mutable_thermal()->set_memory_celsius(hbm.temp);
    }
  }
  if (fn_.temperature != nullptr) {
    int celsius = 0;
    if (ok(fn_.temperature(c, d, &celsius))) out.mutable_thermal()->set_core_celsius(celsius);
  }
  if (fn_.power != nullptr) {
    int tenths = 0;  // 0.1 W
    if (ok(fn_.power(c, d, &tenths))) out.mutable_power()->set_usage_watts(tenths / 10.0);
  }
  if (fn_.utilization != nullptr) {
    unsigned int percent = 0;
    if (ok(fn_.utilization(c, d, dcmi::kUtilizationAiCore, &percent))) {
      out.mutable_utilization()->set_compute_ratio(percent / 100.0);
    }
    if (ok(fn_.utilization(c, d, dcmi::kUtilizationHbmBandwidth, &percent))) {
      out.mutable_utilization()->set_memory_bandwidth_ratio(percent / 100.0);
    }
    // The vector cores beside the AI cores' cube units (910B on); chips without them refuse.
    if (ok(fn_.utilization(c, d, dcmi::kUtilizationVectorCore, &percent))) {
      out.mutable_activity()->set_vector_ratio(percent / 100.0);
    }
  }

  // The chip's RoCE port: reachability of its probe address and its MAC counters.
  v1::Link roce;
  bool have_roce = false;
  if (fn_.network_health != nullptr) {
    dcmi_rdfx_detect_result result = DCMI_RDFX_DETECT_MAX;
    if (ok(fn_.network_health(c, d, &result))) {
      have_roce = true;
      if (const auto up = DcmiRoceUp(result)) roce.set_up(*up);
    }
  }
  if (fn_.pkt_stats != nullptr) {
    dcmi_network_pkt_stats_info st{};
    if (ok(fn_.pkt_stats(c, d, kRocePort, &st))) {
      have_roce = true;
      roce.set_transmit_bytes_total(st.mac_tx_total_oct_num);
      roce.set_receive_bytes_total(st.mac_rx_total_oct_num);
      roce.set_transmit_packets_total(st.mac_tx_total_pkt_num);
      roce.set_receive_packets_total(st.mac_rx_total_pkt_num);
      auto& errors = *roce.mutable_errors_total();
      errors["tx_errors"] = st.mac_tx_bad_pkt_num;
      errors["rx_errors"] = st.mac_rx_bad_pkt_num;
      errors["crc"] = st.mac_rx_fcs_err_pkt_num;
    }
  }
  if (gone) return false;
  if (have_roce) {
    roce.set_kind(v1::LINK_KIND_ROCE);
    roce.set_name("roce" + std::to_string(kRocePort));
    roce.set_index(kRocePort);
    *out.add_links() = std::move(roce);
  }
  return true;
}

void DcmiCollector::Collect(v1::NodeReport& report) {
  const std::vector<ChipKey> listed = Enumerate();

  // Chips seen before but no longer listed are lost as well.
  std::vector<ChipKey> keys = listed;
  for (const auto& [key, state] : chips_) {
    if (std::find(listed.begin(), listed.end(), key) == listed.end()) keys.push_back(key);
  }

  for (const ChipKey& key : keys) {
    ChipState& s = chips_[key];
    const auto it = ordinals_.try_emplace(key, static_cast<uint32_t>(ordinals_.size())).first;
    const bool is_listed = std::find(listed.begin(), listed.end(), key) != listed.end();

    v1::DeviceTelemetry device;
    bool answering = false;
    if (is_listed) {
      LearnIdentity(key, s);
      answering = CollectChip(key, s, device);
    }
    if (!answering) device = v1::DeviceTelemetry();  // nothing half-read from a lost chip
    FillIdentity(key, s, it->second, device);
    device.set_up(answering);

    if (!answering && !s.lost) {
      v1::Event& event = *report.add_events();
      event.set_kind(v1::EVENT_KIND_DEVICE_LOST);
      *event.mutable_time() = report.timestamp();
      event.set_device_index(device.identity().index());
      event.set_device_uuid(device.identity().uuid());
      event.set_message("dcmi: card " + std::to_string(key.card) + " chip " +
                        std::to_string(key.device) +
                        (is_listed ? " does not exist any more" : " no longer listed"));
      spdlog::warn("{}", event.message());
    }
    s.lost = !answering;
    *report.add_devices() = std::move(device);
  }
}

}  // namespace

std::string FormatDcmiDieId(const unsigned int (&words)[5]) {
  std::string out;
  char buf[16];
  for (size_t i = 0; i < 5; ++i) {
    std::snprintf(buf, sizeof buf, "%s%08X", i == 0 ? "" : "-", words[i]);
    out += buf;
  }
  return out;
}

std::string FormatDcmiPciBusId(int domain, unsigned int bus, unsigned int device,
                               unsigned int function) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%04x:%02x:%02x.%x", static_cast<unsigned int>(domain) & 0xffffu,
                bus & 0xffu, device & 0x1fu, function & 0x7u);
  return buf;
}

std::string DcmiModelName(const unsigned char (&chip_type)[32],
                          const unsigned char (&chip_name)[32]) {
  return Bounded(chip_type, sizeof chip_type) + Bounded(chip_name, sizeof chip_name);
}

std::optional<bool> DcmiRoceUp(int detect_result) {
  switch (detect_result) {
    case DCMI_RDFX_DETECT_OK:
      return true;
    case DCMI_RDFX_DETECT_RECV_TIMEOUT:
    case DCMI_RDFX_DETECT_UNREACH:
    case DCMI_RDFX_DETECT_TIME_EXCEEDED:
    case DCMI_RDFX_DETECT_FAULT:
      return false;
    default:
      return std::nullopt;
  }
}

std::unique_ptr<Collector> CreateDcmiCollector(const std::string& library_path,
                                               std::string* why_not) {
  auto fail = [why_not](std::string why) -> std::unique_ptr<Collector> {
    if (why_not != nullptr) *why_not = std::move(why);
    return nullptr;
  };
  auto library = std::make_unique<SharedLibrary>(library_path);
  if (!library->loaded()) return fail(library->error());

  const SharedLibrary& lib = *library;
  DcmiFunctions fn;
  fn.init = lib.Function<dcmi_init_fn>("dcmi_init");
  fn.card_list = lib.Function<dcmi_get_card_list_fn>("dcmi_get_card_list");
  if (fn.card_list == nullptr) {  // drivers before dcmi_get_card_list
    fn.card_list = lib.Function<dcmi_get_card_num_list_fn>("dcmi_get_card_num_list");
  }
  fn.num_in_card = lib.Function<dcmi_get_device_num_in_card_fn>("dcmi_get_device_num_in_card");
  if (fn.init == nullptr || fn.card_list == nullptr || fn.num_in_card == nullptr) {
    return fail(library_path +
                ": lacks dcmi_init, dcmi_get_card_list or dcmi_get_device_num_in_card");
  }
  fn.driver_version = lib.Function<dcmi_get_driver_version_fn>("dcmi_get_driver_version");
  fn.logic_id = lib.Function<dcmi_get_device_logic_id_fn>("dcmi_get_device_logic_id");
  fn.chip_info = lib.Function<dcmi_get_device_chip_info_fn>("dcmi_get_device_chip_info");
  fn.die_v2 = lib.Function<dcmi_get_device_die_v2_fn>("dcmi_get_device_die_v2");
  fn.die = lib.Function<dcmi_get_device_die_fn>("dcmi_get_device_die");
  fn.pcie_v2 = lib.Function<dcmi_get_device_pcie_info_v2_fn>("dcmi_get_device_pcie_info_v2");
  fn.pcie = lib.Function<dcmi_get_device_pcie_info_fn>("dcmi_get_device_pcie_info");
  fn.health = lib.Function<dcmi_get_device_health_fn>("dcmi_get_device_health");
  fn.hbm = lib.Function<dcmi_get_device_hbm_info_fn>("dcmi_get_device_hbm_info");
  fn.temperature = lib.Function<dcmi_get_device_temperature_fn>("dcmi_get_device_temperature");
  fn.power = lib.Function<dcmi_get_device_power_info_fn>("dcmi_get_device_power_info");
  fn.utilization =
      lib.Function<dcmi_get_device_utilization_rate_fn>("dcmi_get_device_utilization_rate");
  fn.network_health =
      lib.Function<dcmi_get_device_network_health_fn>("dcmi_get_device_network_health");
  fn.pkt_stats = lib.Function<dcmi_get_netdev_pkt_stats_info_fn>("dcmi_get_netdev_pkt_stats_info");

  if (const int rc = fn.init(); rc != dcmi::kOk) {
    return fail(library_path + ": dcmi_init failed: " + std::to_string(rc));
  }
  std::string driver;
  if (fn.driver_version != nullptr) {
    char buf[256] = {};  // the reference asks for at least 64
    if (fn.driver_version(buf, sizeof buf - 1) == dcmi::kOk) driver = buf;
  }
  return std::make_unique<DcmiCollector>(std::move(library), fn, std::move(driver));
}

}  // namespace accelmon::collectors
