// AMD GPUs through the amdgpu driver's sysfs files, /sys/class/drm/card<N>/device/: no ROCm
// library needed, so it runs on any node with the in-tree or DKMS amdgpu driver.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "collectors/collector.h"
#include "collectors/malformed_input_log.h"
#include "collectors/path_resolver.h"
#include "collectors/pcie.h"

namespace accelmon::collectors {

// One card's attribute files as read, keyed by their path under card<N>/device/ ("vendor",
// "mem_info_vram_total", "ras/umc_err_count", "xgmi_hive_info/xgmi_hive_id"); the files of the
// card's hwmon chip as "hwmon/<file>" ("hwmon/temp2_input"). Values are trimmed, except the
// binary "gpu_metrics" table, kept byte for byte; an attribute the driver does not answer, or
// answers empty, is left out.
using AmdgpuAttributes = std::map<std::string, std::string, std::less<>>;

// The N of a DRM "card<N>" directory; nullopt for render nodes ("renderD128"), connectors
// ("card0-DP-1") and anything else.
std::optional<uint64_t> DrmCardNumber(std::string_view dir_name);

// The value of `key` in a uevent file ("PCI_SLOT_NAME=0000:05:00.0" lines), or empty.
std::string_view UeventValue(std::string_view uevent, std::string_view key);

// Per-lane rate in GT/s from the PCI core's current_link_speed ("16.0 GT/s PCIe"; "8 GT/s" on
// kernels before 4.19); nullopt for "Unknown" and anything else.
std::optional<double> ParsePcieSpeedGts(std::string_view text);

// The rate's generation and the link's capacity: PcieGeneration and PcieMaxBytesPerSecond
// (collectors/pcie.h).

// An amdgpu RAS block's error counts, ras/<block>_err_count: "ue: N\nce: M\n" (newer kernels
// add "de: K", deferred errors, not counted here).
struct RasErrorCounts {
  std::optional<uint64_t> uncorrected;
  std::optional<uint64_t> corrected;
};
RasErrorCounts ParseRasErrorCount(std::string_view text);

// What the collector knows about a card besides its attribute files.
struct AmdgpuCardContext {
  std::string card;            // "card2": the uuid fallback when even the PCI bus id is unknown
  uint32_t index = 0;          // position among this node's AMD cards, ordered by N
  std::string driver_version;  // /sys/module/amdgpu/version (DKMS driver only)
  // Set by the parser when the card's gpu_metrics table has a layout this build does not
  // decode (why, for the collector to log once); left alone otherwise.
  std::string* unknown_gpu_metrics = nullptr;
};

// Maps one card's attributes onto `out` (identity, memory, utilization, thermal, power, clocks,
// ECC, the PCIe link to the host, and the binary "gpu_metrics" table: activity, per-die
// activity, energy, PCIe replays). Returns the number of values skipped as malformed.
size_t ParseAmdgpuCard(const AmdgpuAttributes& attributes, const AmdgpuCardContext& context,
                       v1::DeviceTelemetry& out);

// Reads one attribute file whole into `out`: 0, or the errno of the failure. Tests inject
// failures (EACCES, ENODEV) that a fixture tree cannot produce.
using AttributeReader = std::function<int(const std::filesystem::path&, std::string&)>;

class AmdgpuCollector final : public Collector {
 public:
  explicit AmdgpuCollector(PathResolver paths, AttributeReader reader = {});

  std::string_view name() const override { return "amdgpu"; }
  void Collect(v1::NodeReport& report) override;

 private:
  // Remembered per card directory between ticks: a lost card's sysfs answers nothing, yet its
  // DEVICE_LOST event and `up 0` series should still name it.
  struct CardState {
    v1::DeviceIdentity identity;
    bool lost = false;
  };

  PathResolver paths_;
  AttributeReader reader_;
  std::map<std::string, CardState, std::less<>> cards_;
  MalformedInputLog malformed_log_{"amdgpu"};
  std::string unknown_gpu_metrics_logged_;  // the last such note logged, to log each once
};

// The collector, or nullptr with `why_not` saying why when no card under <sysfs>/class/drm is an
// AMD device (PCI vendor 0x1002) bound to amdgpu.
std::unique_ptr<Collector> CreateAmdgpuCollector(const PathResolver& paths, std::string* why_not);

}  // namespace accelmon::collectors
