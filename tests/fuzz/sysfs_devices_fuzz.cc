// Fuzz target (fuzz_target.h): whole sysfs devices (an InfiniBand port, an hwmon chip) built from
// the input, one "attribute=value" per line, so every attribute's parser sees hostile values
// together.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "collectors/hwmon.h"
#include "collectors/infiniband.h"
#include "collectors/text_parsing.h"
#include "fuzz_target.h"

ACCELMON_FUZZ_TARGET(sysfs_devices) {
  using namespace accelmon::collectors;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  HwmonAttributes attributes;
  ForEachLine(text, [&](std::string_view line) {
    const size_t eq = line.find('=');
    if (eq != std::string_view::npos) {
      attributes[std::string(line.substr(0, eq))] = std::string(line.substr(eq + 1));
    }
  });
  accelmon::v1::HostTelemetry host;
  ParseHwmonChip("hwmon0", attributes, host);

  accelmon::v1::Link link;
  ParseInfinibandPort(
      [&](std::string_view relative) -> std::optional<std::string> {
        const auto it = attributes.find(relative);
        if (it == attributes.end()) return std::nullopt;
        return it->second;
      },
      link);
  return 0;
}
