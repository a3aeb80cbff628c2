// A test-only stand-in for Huawei's libdcmi.so: the DCMI functions the dcmi collector resolves,
// with the signatures of collectors/dcmi_api.h, answering from in-memory state that tests set
// through the fake_dcmi_* control functions (looked up with dlsym on the same library).
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "collectors/dcmi_api.h"

namespace {

namespace dcmi = accelmon::collectors::dcmi;

struct Chip {
  std::map<std::string, long long> values;
  std::string chip_type = "Ascend";
  std::string chip_name = "910B3";
};

struct State {
  std::vector<int> card_ids;
  std::map<int, int> chips_per_card;
  std::map<std::pair<int, int>, Chip> chips;
  std::string driver_version = "24.1.rc2";
  // function name -> (card, device) -> return code; card -1 matches any.
  std::map<std::string, std::map<std::pair<int, int>, int>> returns;
  std::map<std::string, int> calls;
};

std::mutex mu;
State state;

// Defaults that differ per chip, so a test sees which chip a value came from.
Chip DefaultChip(int card, int device, int logic_id) {
  Chip c;
  const long long n = logic_id;
  c.values = {{"logic_id", n},
              {"health", 0},
              {"die0", 0x11110000 + n},
              {"die1", 0x22220000 + card},
              {"die2", 0x33330000 + device},
              {"die3", 0x44440000},
              {"die4", 0x55550000},
              {"pcie_domain", 0},
              {"pcie_bus", 0xc1 + 0x10 * n},
              {"pcie_device", 0},
              {"pcie_function", 0},
              {"hbm_total_mb", 65536},
              {"hbm_used_mb", 3 * 1024 + n},
              {"hbm_temp", 40 + n},
              {"temperature", 45 + n},
              {"power", 950 + 10 * n},  // 0.1 W
              {"util_aicore", 10 * n},
              {"util_hbm_bw", 5 * n},
              {"util_vector", 4 * n},  // absent: a chip without vector cores (910, 310P)
              {"network_health", DCMI_RDFX_DETECT_OK},
              {"tx_bytes", 1000000 * (n + 1)},
              {"rx_bytes", 2000000 * (n + 1)},
              {"tx_packets", 1000 * (n + 1)},
              {"rx_packets", 2000 * (n + 1)},
              {"tx_bad", 0},
              {"rx_bad", n},
              {"rx_fcs", 0}};
  return c;
}

// The return code the test set for `function` on (card, device), else DCMI_OK. Counts the call.
int Ret(const char* function, int card = -1, int device = -1) {
  ++state.calls[function];
  const auto f = state.returns.find(function);
  if (f == state.returns.end()) return dcmi::kOk;
  for (const auto& key : {std::pair{card, device}, std::pair{card, -1}, std::pair{-1, -1}}) {
    const auto r = f->second.find(key);
    if (r != f->second.end()) return r->second;
  }
  return dcmi::kOk;
}

// The chip, or null for one the layout does not have.
const Chip* Find(int card, int device) {
  const auto it = state.chips.find({card, device});
  return it == state.chips.end() ? nullptr : &it->second;
}

long long Value(const Chip& chip, const char* key) {
  const auto it = chip.values.find(key);
  return it == chip.values.end() ? 0 : it->second;
}

void CopyString(const std::string& from, unsigned char* to, size_t size) {
  std::memset(to, 0, size);
  std::memcpy(to, from.data(), std::min(from.size(), size - 1));
}

}  // namespace

extern "C" {

// ---- control functions for tests ----

// Empty layout, default driver version, no forced return codes, call counts zero.
void fake_dcmi_reset() {
  std::lock_guard lock(mu);
  state = State();
}

// Cards `card_ids[i]` with `chips[i]` NPU chips each; logical ids number the chips in order.
void fake_dcmi_set_layout(const int* card_ids, const int* chips, int cards) {
  std::lock_guard lock(mu);
  state.card_ids.assign(card_ids, card_ids + cards);
  state.chips_per_card.clear();
  state.chips.clear();
  int logic_id = 0;
  for (int i = 0; i < cards; ++i) {
    state.chips_per_card[card_ids[i]] = chips[i];
    for (int d = 0; d < chips[i]; ++d) {
      state.chips[{card_ids[i], d}] = DefaultChip(card_ids[i], d, logic_id++);
    }
  }
}

// Sets a numeric value of a chip (keys as in DefaultChip above).
void fake_dcmi_set_value(int card, int device, const char* key, long long value) {
  std::lock_guard lock(mu);
  state.chips[{card, device}].values[key] = value;
}

void fake_dcmi_set_chip_name(int card, int device, const char* type, const char* name) {
  std::lock_guard lock(mu);
  state.chips[{card, device}].chip_type = type;
  state.chips[{card, device}].chip_name = name;
}

void fake_dcmi_set_driver_version(const char* version) {
  std::lock_guard lock(mu);
  state.driver_version = version;
}

// Makes `function` return `code` for (card, device); -1 for either matches any.
void fake_dcmi_set_return(const char* function, int card, int device, int code) {
  std::lock_guard lock(mu);
  state.returns[function][{card, device}] = code;
}

int fake_dcmi_call_count(const char* function) {
  std::lock_guard lock(mu);
  const auto it = state.calls.find(function);
  return it == state.calls.end() ? 0 : it->second;
}

// ---- the DCMI functions ----

int dcmi_init(void) {
  // For end-to-end runs of the real binary, which cannot call the control functions:
  // FAKE_DCMI_CARDS=N gives N cards of one chip each (as an Atlas 800T A2 has 8).
  if (const char* cards = std::getenv("FAKE_DCMI_CARDS"); cards != nullptr) {
    bool empty;
    {
      std::lock_guard lock(mu);
      empty = state.card_ids.empty();
    }
    const int n = std::atoi(cards);
    if (empty && n > 0 && n <= 64) {
      std::vector<int> ids(static_cast<size_t>(n)), chips(static_cast<size_t>(n), 1);
      for (int i = 0; i < n; ++i) ids[static_cast<size_t>(i)] = i;
      fake_dcmi_set_layout(ids.data(), chips.data(), n);
    }
  }
  std::lock_guard lock(mu);
  return Ret("dcmi_init");
}

int dcmi_get_driver_version(char* driver_ver, unsigned int len) {
  std::lock_guard lock(mu);
  if (const int rc = Ret("dcmi_get_driver_version"); rc != dcmi::kOk) return rc;
  if (len == 0) return dcmi::kErrInvalidParameter;
  std::strncpy(driver_ver, state.driver_version.c_str(), len - 1);
  driver_ver[len - 1] = '\0';
  return dcmi::kOk;
}

static int CardList(const char* function, int* card_num, int* card_list, int list_len) {
  std::lock_guard lock(mu);
  if (const int rc = Ret(function); rc != dcmi::kOk) return rc;
  const int n = std::min<int>(static_cast<int>(state.card_ids.size()), list_len);
  for (int i = 0; i < n; ++i) card_list[i] = state.card_ids[static_cast<size_t>(i)];
  *card_num = n;
  return dcmi::kOk;
}

int dcmi_get_card_list(int* card_num, int* card_list, int list_len) {
  return CardList("dcmi_get_card_list", card_num, card_list, list_len);
}

int dcmi_get_card_num_list(int* card_num, int* card_list, int list_len) {
  return CardList("dcmi_get_card_num_list", card_num, card_list, list_len);
}

int dcmi_get_device_num_in_card(int card_id, int* device_num) {
  std::lock_guard lock(mu);
  if (const int rc = Ret("dcmi_get_device_num_in_card", card_id); rc != dcmi::kOk) return rc;
  const auto it = state.chips_per_card.find(card_id);
  if (it == state.chips_per_card.end()) return dcmi::kErrInvalidDeviceId;
  *device_num = it->second;
  return dcmi::kOk;
}

// Looks up the chip after the forced return code; unknown chips are "device does not exist".
#define FAKE_DCMI_CHIP(function)                                   \
  std::lock_guard lock(mu);                                        \
  if (const int rc = Ret(function, card_id, device_id); rc != 0) { \
    return rc;                                                     \
  }                                                                \
  const Chip* chip = Find(card_id, device_id);                     \
  if (chip == nullptr) return dcmi::kErrDeviceNotExist

int dcmi_get_device_logic_id(int* device_logic_id, int card_id, int device_id) {
  FAKE_DCMI_CHIP("dcmi_get_device_logic_id");
  *device_logic_id = static_cast<int>(Value(*chip, "logic_id"));
  return dcmi::kOk;
}

int dcmi_get_device_chip_info(int card_id, int device_id, struct dcmi_chip_info* chip_info) {
  FAKE_DCMI_CHIP("dcmi_get_device_chip_info");
  CopyString(chip->chip_type, chip_info->chip_type, sizeof chip_info->chip_type);
  CopyString(chip->chip_name, chip_info->chip_name, sizeof chip_info->chip_name);
  CopyString("V1", chip_info->chip_ver, sizeof chip_info->chip_ver);
  chip_info->aicore_cnt = 20;
  return dcmi::kOk;
}

int dcmi_get_device_die_v2(int card_id, int device_id, enum dcmi_die_type input_type,
                           struct dcmi_die_id* die_id) {
  FAKE_DCMI_CHIP("dcmi_get_device_die_v2");
  if (input_type != VDIE && input_type != NDIE) return dcmi::kErrInvalidParameter;
  const char* keys[] = {"die0", "die1", "die2", "die3", "die4"};
  for (int i = 0; i < 5; ++i) die_id->soc_die[i] = static_cast<unsigned int>(Value(*chip, keys[i]));
  return dcmi::kOk;
}

int dcmi_get_device_die(int card_id, int device_id, struct dcmi_soc_die_stru* device_die) {
  FAKE_DCMI_CHIP("dcmi_get_device_die");
  const char* keys[] = {"die0", "die1", "die2", "die3", "die4"};
  for (int i = 0; i < 5; ++i) {
    device_die->soc_die[i] = static_cast<unsigned int>(Value(*chip, keys[i]));
  }
  return dcmi::kOk;
}

int dcmi_get_device_pcie_info_v2(int card_id, int device_id, struct dcmi_pcie_info_all* pcie_info) {
  FAKE_DCMI_CHIP("dcmi_get_device_pcie_info_v2");
  *pcie_info = dcmi_pcie_info_all{};
  pcie_info->venderid = 0x19e5;
  pcie_info->deviceid = 0xd802;
  pcie_info->domain = static_cast<int>(Value(*chip, "pcie_domain"));
  pcie_info->bdf_busid = static_cast<unsigned int>(Value(*chip, "pcie_bus"));
  pcie_info->bdf_deviceid = static_cast<unsigned int>(Value(*chip, "pcie_device"));
  pcie_info->bdf_funcid = static_cast<unsigned int>(Value(*chip, "pcie_function"));
  return dcmi::kOk;
}

int dcmi_get_device_pcie_info(int card_id, int device_id, struct dcmi_pcie_info* pcie_info) {
  FAKE_DCMI_CHIP("dcmi_get_device_pcie_info");
  *pcie_info = dcmi_pcie_info{};
  pcie_info->venderid = 0x19e5;
  pcie_info->deviceid = 0xd802;
  pcie_info->bdf_busid = static_cast<unsigned int>(Value(*chip, "pcie_bus"));
  pcie_info->bdf_deviceid = static_cast<unsigned int>(Value(*chip, "pcie_device"));
  pcie_info->bdf_funcid = static_cast<unsigned int>(Value(*chip, "pcie_function"));
  return dcmi::kOk;
}

int dcmi_get_device_health(int card_id, int device_id, unsigned int* health) {
  FAKE_DCMI_CHIP("dcmi_get_device_health");
  *health = static_cast<unsigned int>(Value(*chip, "health"));
  return dcmi::kOk;
}

int dcmi_get_device_hbm_info(int card_id, int device_id, struct dcmi_hbm_info* hbm_info) {
  FAKE_DCMI_CHIP("dcmi_get_device_hbm_info");
  *hbm_info = dcmi_hbm_info{};
  hbm_info->memory_size = static_cast<unsigned long long>(Value(*chip, "hbm_total_mb"));
  hbm_info->freq = 1600;
  hbm_info->memory_usage = static_cast<unsigned long long>(Value(*chip, "hbm_used_mb"));
  hbm_info->temp = static_cast<int>(Value(*chip, "hbm_temp"));
  hbm_info->bandwith_util_rate = static_cast<unsigned int>(Value(*chip, "util_hbm_bw"));
  return dcmi::kOk;
}

int dcmi_get_device_temperature(int card_id, int device_id, int* temperature) {
  FAKE_DCMI_CHIP("dcmi_get_device_temperature");
  *temperature = static_cast<int>(Value(*chip, "temperature"));
  return dcmi::kOk;
}

int dcmi_get_device_power_info(int card_id, int device_id, int* power) {
  FAKE_DCMI_CHIP("dcmi_get_device_power_info");
  *power = static_cast<int>(Value(*chip, "power"));
  return dcmi::kOk;
}

int dcmi_get_device_utilization_rate(int card_id, int device_id, int input_type,
                                     unsigned int* utilization_rate) {
  // Per type, so a test can make one type unsupported: "dcmi_get_device_utilization_rate/2".
  const std::string per_type = "dcmi_get_device_utilization_rate/" + std::to_string(input_type);
  {
    std::lock_guard lock(mu);
    if (const int rc = Ret(per_type.c_str(), card_id, device_id); rc != dcmi::kOk) return rc;
  }
  FAKE_DCMI_CHIP("dcmi_get_device_utilization_rate");
  switch (input_type) {
    case dcmi::kUtilizationAiCore:
      *utilization_rate = static_cast<unsigned int>(Value(*chip, "util_aicore"));
      return dcmi::kOk;
    case dcmi::kUtilizationHbmBandwidth:
      *utilization_rate = static_cast<unsigned int>(Value(*chip, "util_hbm_bw"));
      return dcmi::kOk;
    case dcmi::kUtilizationVectorCore:
      if (!chip->values.contains("util_vector")) return dcmi::kErrNotSupport;
      *utilization_rate = static_cast<unsigned int>(Value(*chip, "util_vector"));
      return dcmi::kOk;
    default:
      return dcmi::kErrNotSupport;
  }
}

int dcmi_get_device_network_health(int card_id, int device_id,
                                   enum dcmi_rdfx_detect_result* result) {
  FAKE_DCMI_CHIP("dcmi_get_device_network_health");
  *result = static_cast<dcmi_rdfx_detect_result>(Value(*chip, "network_health"));
  return dcmi::kOk;
}

int dcmi_get_netdev_pkt_stats_info(int card_id, int device_id, int port_id,
                                   struct dcmi_network_pkt_stats_info* network_pkt_stats_info) {
  FAKE_DCMI_CHIP("dcmi_get_netdev_pkt_stats_info");
  if (port_id != 0) return dcmi::kErrInvalidParameter;
  auto& st = *network_pkt_stats_info;
  st = dcmi_network_pkt_stats_info{};
  st.mac_tx_total_oct_num = static_cast<unsigned long long>(Value(*chip, "tx_bytes"));
  st.mac_rx_total_oct_num = static_cast<unsigned long long>(Value(*chip, "rx_bytes"));
  st.mac_tx_total_pkt_num = static_cast<unsigned long long>(Value(*chip, "tx_packets"));
  st.mac_rx_total_pkt_num = static_cast<unsigned long long>(Value(*chip, "rx_packets"));
  st.mac_tx_bad_pkt_num = static_cast<unsigned long long>(Value(*chip, "tx_bad"));
  st.mac_rx_bad_pkt_num = static_cast<unsigned long long>(Value(*chip, "rx_bad"));
  st.mac_rx_fcs_err_pkt_num = static_cast<unsigned long long>(Value(*chip, "rx_fcs"));
  return dcmi::kOk;
}

}  // extern "C"

// The fake must keep the collector's signatures exactly.
static_assert(std::is_same_v<decltype(&dcmi_init), dcmi_init_fn>);
static_assert(std::is_same_v<decltype(&dcmi_get_driver_version), dcmi_get_driver_version_fn>);
static_assert(std::is_same_v<decltype(&dcmi_get_card_list), dcmi_get_card_list_fn>);
static_assert(std::is_same_v<decltype(&dcmi_get_card_num_list), dcmi_get_card_num_list_fn>);
static_assert(
    std::is_same_v<decltype(&dcmi_get_device_num_in_card), dcmi_get_device_num_in_card_fn>);
static_assert(std::is_same_v<decltype(&dcmi_get_device_logic_id), dcmi_get_device_logic_id_fn>);
static_assert(std::is_same_v<decltype(&dcmi_get_device_chip_info), dcmi_get_device_chip_info_fn>);
static_assert(std::is_same_v<decltype(&dcmi_get_device_die_v2), dcmi_get_device_die_v2_fn>);
static_assert(std::is_same_v<decltype(&dcmi_get_device_die), dcmi_get_device_die_fn>);
static_assert(
    std::is_same_v<decltype(&dcmi_get_device_pcie_info_v2), dcmi_get_device_pcie_info_v2_fn>);
static_assert(std::is_same_v<decltype(&dcmi_get_device_pcie_info), dcmi_get_device_pcie_info_fn>);
static_assert(std::is_same_v<decltype(&dcmi_get_device_health), dcmi_get_device_health_fn>);
static_assert(std::is_same_v<decltype(&dcmi_get_device_hbm_info), dcmi_get_device_hbm_info_fn>);
static_assert(
    std::is_same_v<decltype(&dcmi_get_device_temperature), dcmi_get_device_temperature_fn>);
static_assert(std::is_same_v<decltype(&dcmi_get_device_power_info), dcmi_get_device_power_info_fn>);
static_assert(std::is_same_v<decltype(&dcmi_get_device_utilization_rate),
                             dcmi_get_device_utilization_rate_fn>);
static_assert(
    std::is_same_v<decltype(&dcmi_get_device_network_health), dcmi_get_device_network_health_fn>);
static_assert(
    std::is_same_v<decltype(&dcmi_get_netdev_pkt_stats_info), dcmi_get_netdev_pkt_stats_info_fn>);
