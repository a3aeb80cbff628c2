#include "collectors/thermal_zone.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "collectors/text_parsing.h"

namespace accelmon::collectors {

std::optional<uint64_t> ThermalZoneNumber(std::string_view dir_name) {
  constexpr std::string_view kPrefix = "thermal_zone";
  if (!dir_name.starts_with(kPrefix)) return std::nullopt;
  const std::string_view digits = dir_name.substr(kPrefix.size());
  // ParseUint64 tolerates spaces and a '+'; a directory name must be plain digits.
  if (digits.empty() ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return std::nullopt;
  }
  return ParseUint64(digits);
}

bool ParseThermalZone(std::string_view chip, std::string_view type, std::string_view temp,
                      v1::HostTelemetry& host) {
  type = Trim(type);
  const std::optional<int64_t> millidegrees = ParseInt64(temp);
  if (type.empty() || !millidegrees) return false;
  v1::TemperatureSensor& sensor = *host.add_temperatures();
  sensor.set_chip(std::string(chip));
  sensor.set_sensor(std::string(type));
  sensor.set_celsius(static_cast<double>(*millidegrees) / 1000.0);
  return true;
}

void ThermalZoneCollector::Collect(v1::NodeReport& report) {
  const OpenFileCache::SweepAtExit sweep(files_);
  const std::filesystem::path root = paths_.Sys("class/thermal");
  std::vector<std::string> names;
  if (const int error = files_.ListDirectory(root, names); error != 0) {
    ThrowSourceError(root.string(), std::error_code(error, std::generic_category()));
  }
  std::vector<std::pair<uint64_t, std::string>> zones;
  for (std::string& dir_name : names) {
    if (const auto number = ThermalZoneNumber(dir_name)) {
      zones.emplace_back(*number, std::move(dir_name));
    }
  }
  std::sort(zones.begin(), zones.end());

  size_t malformed = 0;
  v1::HostTelemetry& host = *report.mutable_host();
  for (const auto& [number, dir_name] : zones) {
    const std::filesystem::path zone = root / dir_name;
    // Drivers answer EINVAL, ENODATA or EAGAIN for a sensor that is off (an iwlwifi zone of a
    // down interface): routine, so skipped quietly.
    const auto type = files_.Attribute(zone / "type");
    const auto temp = files_.Attribute(zone / "temp");
    if (!type || !temp) continue;
    if (!ParseThermalZone(dir_name, *type, *temp, host)) ++malformed;
  }
  malformed_log_.Skipped(malformed, "zone(s) with a non-numeric temp in", root);
}

}  // namespace accelmon::collectors
