// NVIDIA GPUs through NVML (libnvidia-ml.so.1), loaded at run time so the build needs no driver
// SDK. One collector reports every GPU NVML sees: identity, memory, thermal, power, utilization,
// clocks, throttle reasons, ECC and row remapping, PCIe and NVLink links, XID and device-lost
// events. A GPU that falls off the bus turns up=false; the others go on.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "collectors/collector.h"
#include "collectors/pcie.h"

namespace accelmon::collectors {

// The default library name, searched like dlopen does.
inline constexpr char kNvmlLibrary[] = "libnvidia-ml.so.1";

// Loads `library_path`, resolves the NVML entry points and calls nvmlInit_v2. nullptr with
// `why_not` filled when the library is missing, lacks the required symbols or NVML cannot start
// (no driver loaded, no permission on /dev/nvidia*).
std::unique_ptr<Collector> CreateNvmlCollector(const std::string& library_path,
                                               std::string* why_not);

// Pure helpers, exposed for tests.

// The clock event / throttle reasons bitmask as lower snake case names, each with its state.
std::map<std::string, bool> NvmlThrottleReasons(uint64_t mask);

// A link's capacity from its generation and width: collectors/pcie.h.

// NVML's "00000000:18:00.0" as "0000:18:00.0" (sysfs form, lower case), so NVML ids, NVLink
// peers and other collectors' PCI addresses compare equal. Unknown shapes pass through.
std::string NormalizePciBusId(std::string_view bus_id);

}  // namespace accelmon::collectors
