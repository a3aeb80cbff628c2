#include "collectors/hwmon.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <system_error>
#include <utility>
#include <vector>

#include "collectors/text_parsing.h"

namespace accelmon::collectors {
namespace {

// "temp10_input" -> {type "temp", index 10, item "input"}.
struct AttributeName {
  std::string_view type;
  uint64_t index = 0;
  std::string_view item;
};

std::optional<AttributeName> SplitAttributeName(std::string_view file) {
  for (const std::string_view type : {std::string_view("temp"), std::string_view("power")}) {
    if (!file.starts_with(type)) continue;
    const std::string_view rest = file.substr(type.size());
    const size_t underscore = rest.find('_');
    if (underscore == std::string_view::npos) return std::nullopt;
    const std::string_view digits = rest.substr(0, underscore);
    // The kernel writes indices without leading zeros; "temp09_input" would otherwise alias
    // temp9 and be looked up under a name it does not have (found by the fuzzer).
    if (!AllDigits(digits) || (digits.size() > 1 && digits.front() == '0')) return std::nullopt;
    const auto index = ParseUint64(digits);
    if (!index) return std::nullopt;
    return AttributeName{type, *index, rest.substr(underscore + 1)};
  }
  return std::nullopt;
}

std::optional<std::string_view> FindAttribute(const HwmonAttributes& attributes,
                                              const std::string& key) {
  const auto it = attributes.find(key);
  if (it == attributes.end()) return std::nullopt;
  return std::string_view(it->second);
}

std::string SensorName(std::string_view chip_name, const HwmonAttributes& attributes,
                       const std::string& prefix) {
  const auto label = FindAttribute(attributes, prefix + "_label");
  const std::string_view trimmed = label ? Trim(*label) : std::string_view();
  return std::string(chip_name) + " " + (trimmed.empty() ? prefix : std::string(trimmed));
}

}  // namespace

std::optional<uint64_t> HwmonNumber(std::string_view dir_name) {
  constexpr std::string_view kPrefix = "hwmon";
  if (!dir_name.starts_with(kPrefix) || !AllDigits(dir_name.substr(kPrefix.size()))) {
    return std::nullopt;
  }
  return ParseUint64(dir_name.substr(kPrefix.size()));
}

bool IsHwmonAttributeOfInterest(std::string_view file) {
  if (file == "name") return true;
  const auto attribute = SplitAttributeName(file);
  if (!attribute) return false;
  if (attribute->item == "input" || attribute->item == "label") return true;
  return attribute->type == "power" && attribute->item == "average";
}

size_t ParseHwmonChip(std::string_view chip, const HwmonAttributes& attributes,
                      v1::HostTelemetry& host) {
  const auto name_text = FindAttribute(attributes, "name");
  std::string_view chip_name = name_text ? Trim(*name_text) : std::string_view();
  if (chip_name.empty()) chip_name = chip;

  // The indices that have a value, in numeric order (temp2 before temp10).
  std::vector<uint64_t> temps;
  std::vector<uint64_t> powers;
  for (const auto& [file, text] : attributes) {
    const auto attribute = SplitAttributeName(file);
    if (!attribute) continue;
    if (attribute->type == "temp" && attribute->item == "input") {
      temps.push_back(attribute->index);
    } else if (attribute->type == "power" &&
               (attribute->item == "input" || attribute->item == "average")) {
      powers.push_back(attribute->index);
    }
  }
  std::sort(temps.begin(), temps.end());
  std::sort(powers.begin(), powers.end());
  powers.erase(std::unique(powers.begin(), powers.end()), powers.end());

  size_t malformed = 0;
  for (const uint64_t index : temps) {
    const std::string prefix = "temp" + std::to_string(index);
    const auto input = FindAttribute(attributes, prefix + "_input");
    const auto millidegrees = input ? ParseInt64(*input) : std::nullopt;
    if (!millidegrees) {
      ++malformed;
      continue;
    }
    v1::TemperatureSensor& sensor = *host.add_temperatures();
    sensor.set_chip(std::string(chip));
    sensor.set_sensor(SensorName(chip_name, attributes, prefix));
    sensor.set_celsius(static_cast<double>(*millidegrees) / 1000.0);
  }
  for (const uint64_t index : powers) {
    const std::string prefix = "power" + std::to_string(index);
    // The instantaneous reading where the driver has one, else its running average.
    std::optional<uint64_t> microwatts;
    for (const char* item : {"_input", "_average"}) {
      const auto text = FindAttribute(attributes, prefix + item);
      if (!text) continue;
      microwatts = ParseUint64(*text);
      if (microwatts) break;
      ++malformed;
    }
    if (!microwatts) continue;
    v1::PowerSensor& sensor = *host.add_power_sensors();
    sensor.set_chip(std::string(chip));
    sensor.set_sensor(SensorName(chip_name, attributes, prefix));
    sensor.set_watts(static_cast<double>(*microwatts) / 1e6);
  }
  return malformed;
}

void HwmonCollector::Collect(v1::NodeReport& report) {
  const OpenFileCache::SweepAtExit sweep(files_);
  const std::filesystem::path root = paths_.Sys("class/hwmon");
  std::vector<std::string> names;
  if (const int error = files_.ListDirectory(root, names); error != 0) {
    ThrowSourceError(root.string(), std::error_code(error, std::generic_category()));
  }
  std::vector<std::pair<uint64_t, std::string>> chips;
  for (std::string& dir_name : names) {
    if (const auto number = HwmonNumber(dir_name)) chips.emplace_back(*number, std::move(dir_name));
  }
  std::sort(chips.begin(), chips.end());

  size_t malformed = 0;
  v1::HostTelemetry& host = *report.mutable_host();
  for (const auto& [number, dir_name] : chips) {
    HwmonAttributes attributes;
    // Drivers on the old hwmon API keep their attributes, name included, on the parent device
    // (device/); where both answer, the chip's own directory wins.
    for (const std::filesystem::path& dir : {root / dir_name, root / dir_name / "device"}) {
      files_.ListDirectory(dir, names);  // none when absent: device/ usually is
      for (const std::string& file : names) {
        if (!IsHwmonAttributeOfInterest(file) || attributes.contains(file)) continue;
        // Unsupported sensors answer EINVAL, ENODATA or EAGAIN: left out, routinely.
        if (auto text = files_.Attribute(dir / file)) attributes.emplace(file, std::move(*text));
      }
    }
    malformed += ParseHwmonChip(dir_name, attributes, host);
  }
  malformed_log_.Skipped(malformed, "non-numeric value(s) under", root);
}

}  // namespace accelmon::collectors
