// Our own declaration of the subset of Huawei's DCMI C API (libdcmi.so) that the dcmi collector
// calls, written from Huawei's public DCMI API reference (hiascend.com "DCMI API参考", the
// Ascend 910B DCMI API docs in Huawei's open driver repository) and the public
// dcmi_interface_api.h shipped with that driver and with Ascend mind-cluster's devmanager.
// Layouts and values must stay ABI-identical to those: the library is loaded with dlopen and
// called through these types. Nothing here is needed at build time from a vendor SDK.
#pragma once

#include <cstdint>

namespace accelmon::collectors::dcmi {

// Return codes ("返回码" in the DCMI reference).
inline constexpr int kOk = 0;
inline constexpr int kErrInvalidParameter = -8001;
inline constexpr int kErrOperNotPermitted = -8002;
inline constexpr int kErrTimeOut = -8006;
inline constexpr int kErrInvalidDeviceId = -8007;
inline constexpr int kErrDeviceNotExist = -8008;  // "设备不存在": the chip is gone
inline constexpr int kErrNotReady = -8012;
inline constexpr int kErrNotSupportInContainer = -8013;
inline constexpr int kErrNotSupport = -8255;  // "设备ID/功能不支持"

inline constexpr int kMaxCardNum = 64;      // MAX_CARD_NUM
inline constexpr int kMaxChipNameLen = 32;  // MAX_CHIP_NAME_LEN
inline constexpr int kDieIdCount = 5;       // DIE_ID_COUNT

// dcmi_get_device_health: 0 normal, 1 minor, 2 major, 3 critical alarm, 0xFFFFFFFF no device.
inline constexpr unsigned int kHealthDeviceAbsent = 0xFFFFFFFFu;

// input_type of dcmi_get_device_utilization_rate (DCMI_UTILIZATION_RATE_*).
inline constexpr int kUtilizationAiCore = 2;
inline constexpr int kUtilizationHbmBandwidth = 10;
inline constexpr int kUtilizationVectorCore = 12;  // Ascend 910B and later

}  // namespace accelmon::collectors::dcmi

extern "C" {

struct dcmi_chip_info {
  unsigned char chip_type[32];
  unsigned char chip_name[32];
  unsigned char chip_ver[32];
  unsigned int aicore_cnt;
};

struct dcmi_pcie_info {
  unsigned int deviceid;
  unsigned int venderid;
  unsigned int subvenderid;
  unsigned int subdeviceid;
  unsigned int bdf_deviceid;
  unsigned int bdf_busid;
  unsigned int bdf_funcid;
};

struct dcmi_pcie_info_all {
  unsigned int venderid;
  unsigned int subvenderid;
  unsigned int deviceid;
  unsigned int subdeviceid;
  int domain;
  unsigned int bdf_busid;
  unsigned int bdf_deviceid;
  unsigned int bdf_funcid;
  unsigned char reserve[32];  // 64 bytes in all
};

struct dcmi_die_id {
  unsigned int soc_die[5];
};

// The V1 struct of dcmi_get_device_die; same layout as dcmi_die_id.
struct dcmi_soc_die_stru {
  unsigned int soc_die[5];
};

struct dcmi_hbm_info {
  unsigned long long memory_size;   // MB
  unsigned int freq;                // MHz
  unsigned long long memory_usage;  // MB
  int temp;                         // Celsius
  unsigned int bandwith_util_rate;  // percent
};

enum dcmi_die_type { NDIE = 0, VDIE = 1 };

enum dcmi_rdfx_detect_result {
  DCMI_RDFX_DETECT_OK = 0,
  DCMI_RDFX_DETECT_SOCK_FAIL = 1,
  DCMI_RDFX_DETECT_RECV_TIMEOUT = 2,
  DCMI_RDFX_DETECT_UNREACH = 3,
  DCMI_RDFX_DETECT_TIME_EXCEEDED = 4,
  DCMI_RDFX_DETECT_FAULT = 5,
  DCMI_RDFX_DETECT_INIT = 6,
  DCMI_RDFX_DETECT_THREAD_ERR = 7,
  DCMI_RDFX_DETECT_IP_SET = 8,
  DCMI_RDFX_DETECT_MAX = 0xFF
};

// Counters of a chip's network port (dcmi_get_netdev_pkt_stats_info): 48 counters, then time.
struct dcmi_network_pkt_stats_info {
  unsigned long long mac_tx_mac_pause_num;
  unsigned long long mac_rx_mac_pause_num;
  unsigned long long mac_tx_pfc_pkt_num;
  unsigned long long mac_tx_pfc_pri_pkt_num[8];  // mac_tx_pfc_pri0_pkt_num .. pri7
  unsigned long long mac_rx_pfc_pkt_num;
  unsigned long long mac_rx_pfc_pri_pkt_num[8];  // mac_rx_pfc_pri0_pkt_num .. pri7
  unsigned long long mac_tx_total_pkt_num;
  unsigned long long mac_tx_total_oct_num;  // bytes
  unsigned long long mac_tx_bad_pkt_num;
  unsigned long long mac_tx_bad_oct_num;
  unsigned long long mac_rx_total_pkt_num;
  unsigned long long mac_rx_total_oct_num;  // bytes
  unsigned long long mac_rx_bad_pkt_num;
  unsigned long long mac_rx_bad_oct_num;
  unsigned long long mac_rx_fcs_err_pkt_num;
  unsigned long long roce_rx_rc_pkt_num;
  unsigned long long roce_rx_all_pkt_num;
  unsigned long long roce_rx_err_pkt_num;
  unsigned long long roce_tx_rc_pkt_num;
  unsigned long long roce_tx_all_pkt_num;
  unsigned long long roce_tx_err_pkt_num;
  unsigned long long roce_cqe_num;
  unsigned long long roce_rx_cnp_pkt_num;
  unsigned long long roce_tx_cnp_pkt_num;
  unsigned long long roce_err_ack_num;
  unsigned long long roce_err_psn_num;
  unsigned long long roce_verification_err_num;
  unsigned long long roce_err_qp_status_num;
  unsigned long long roce_new_pkt_rty_num;
  unsigned long long roce_ecn_db_num;
  unsigned long long nic_tx_all_pkg_num;
  unsigned long long nic_tx_all_oct_num;
  unsigned long long nic_rx_all_pkg_num;
  unsigned long long nic_rx_all_oct_num;
  long tv_sec;
  long tv_usec;
  unsigned char reserved[64];
};

// Function types, named after the symbols.
using dcmi_init_fn = int (*)(void);
using dcmi_get_driver_version_fn = int (*)(char* driver_ver, unsigned int len);
using dcmi_get_card_list_fn = int (*)(int* card_num, int* card_list, int list_len);
using dcmi_get_card_num_list_fn = int (*)(int* card_num, int* card_list, int list_len);
using dcmi_get_device_num_in_card_fn = int (*)(int card_id, int* device_num);
using dcmi_get_device_logic_id_fn = int (*)(int* device_logic_id, int card_id, int device_id);
using dcmi_get_device_chip_info_fn = int (*)(int card_id, int device_id,
                                             struct dcmi_chip_info* chip_info);
using dcmi_get_device_die_v2_fn = int (*)(int card_id, int device_id, enum dcmi_die_type input_type,
                                          struct dcmi_die_id* die_id);
using dcmi_get_device_die_fn = int (*)(int card_id, int device_id,
                                       struct dcmi_soc_die_stru* device_die);
using dcmi_get_device_pcie_info_v2_fn = int (*)(int card_id, int device_id,
                                                struct dcmi_pcie_info_all* pcie_info);
using dcmi_get_device_pcie_info_fn = int (*)(int card_id, int device_id,
                                             struct dcmi_pcie_info* pcie_info);
using dcmi_get_device_health_fn = int (*)(int card_id, int device_id, unsigned int* health);
using dcmi_get_device_hbm_info_fn = int (*)(int card_id, int device_id,
                                            struct dcmi_hbm_info* hbm_info);
using dcmi_get_device_temperature_fn = int (*)(int card_id, int device_id, int* temperature);
using dcmi_get_device_power_info_fn = int (*)(int card_id, int device_id, int* power);
using dcmi_get_device_utilization_rate_fn = int (*)(int card_id, int device_id, int input_type,
                                                    unsigned int* utilization_rate);
using dcmi_get_device_network_health_fn = int (*)(int card_id, int device_id,
                                                  enum dcmi_rdfx_detect_result* result);
using dcmi_get_netdev_pkt_stats_info_fn =
    int (*)(int card_id, int device_id, int port_id,
            struct dcmi_network_pkt_stats_info* network_pkt_stats_info);

}  // extern "C"

static_assert(sizeof(dcmi_chip_info) == 100);
static_assert(sizeof(dcmi_pcie_info_all) == 64, "the DCMI header says 64");
static_assert(sizeof(dcmi_die_id) == 20);
static_assert(sizeof(dcmi_hbm_info) == 32, "LP64: u64, u32 + pad, u64, i32, u32");
static_assert(sizeof(dcmi_network_pkt_stats_info) == 48 * 8 + 2 * sizeof(long) + 64);
