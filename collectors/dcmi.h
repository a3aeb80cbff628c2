// Huawei Ascend NPUs through DCMI (libdcmi.so, loaded at run time): one DeviceTelemetry per NPU
// chip of every card the library lists.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "collectors/collector.h"

namespace accelmon::collectors {

// A die id (dcmi_get_device_die_v2, VDIE) as npu-exporter prints it: five 32-bit words,
// upper-case hex, eight digits each, joined by '-'.
std::string FormatDcmiDieId(const unsigned int (&words)[5]);

// "DDDD:BB:DD.F" from the PCIe BDF that dcmi_get_device_pcie_info(_v2) returns.
std::string FormatDcmiPciBusId(int domain, unsigned int bus, unsigned int device,
                               unsigned int function);

// The model name from dcmi_chip_info: chip_type followed by chip_name ("Ascend" "910B3"),
// each read up to its first NUL.
std::string DcmiModelName(const unsigned char (&chip_type)[32],
                          const unsigned char (&chip_name)[32]);

// The RoCE port's up state from dcmi_get_device_network_health's probe result: true when the
// probe reaches its address, false when it does not, nullopt while the probe is starting up or
// when the probe itself failed (no socket, no thread): those say nothing about the port.
std::optional<bool> DcmiRoceUp(int detect_result);

// Loads `library_path`, resolves the DCMI functions and calls dcmi_init once. Returns nullptr
// and fills `why_not` when the library or a required function is missing or dcmi_init fails.
std::unique_ptr<Collector> CreateDcmiCollector(const std::string& library_path = "libdcmi.so",
                                               std::string* why_not = nullptr);

}  // namespace accelmon::collectors
