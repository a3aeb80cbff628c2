// Host temperatures from the kernel's thermal zones, /sys/class/thermal/thermal_zone<N>/.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "collectors/collector.h"
#include "collectors/malformed_input_log.h"
#include "collectors/open_file_cache.h"
#include "collectors/path_resolver.h"

namespace accelmon::collectors {

// The N of a "thermal_zone<N>" directory name; nullopt for anything else (cooling_device<N>).
std::optional<uint64_t> ThermalZoneNumber(std::string_view dir_name);

// Adds one zone to `host` from the text of its `type` and `temp` (millidegrees Celsius) files:
// chip = `chip` ("thermal_zone0"), sensor = type. Returns false, adding nothing, when the type is
// empty or temp is not a number.
bool ParseThermalZone(std::string_view chip, std::string_view type, std::string_view temp,
                      v1::HostTelemetry& host);

class ThermalZoneCollector final : public Collector {
 public:
  explicit ThermalZoneCollector(PathResolver paths) : paths_(std::move(paths)) {}

  std::string_view name() const override { return "thermal_zone"; }
  void Collect(v1::NodeReport& report) override;

 private:
  PathResolver paths_;
  OpenFileCache files_;
  MalformedInputLog malformed_log_{"thermal_zone"};
};

}  // namespace accelmon::collectors
