// Fuzz target (fuzz_target.h): the one-value sysfs attribute parsers the sysfs collectors use.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "collectors/hwmon.h"
#include "collectors/infiniband.h"
#include "collectors/text_parsing.h"
#include "collectors/thermal_zone.h"
#include "fuzz_target.h"

ACCELMON_FUZZ_TARGET(sysfs_values) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  using namespace accelmon::collectors;
  (void)ParseUint64(text);
  (void)ParseInt64(text);
  (void)ParseDouble(text);
  for (const std::string_view field : SplitFields(text)) {
    if (field.empty()) std::abort();  // SplitFields never yields an empty field
  }
  ForEachLine(text, [](std::string_view line) { (void)Trim(line); });
  (void)ParseInfinibandState(text);
  if (const auto rate = ParseInfinibandRate(text); rate && !(*rate >= 0)) std::abort();
  (void)ThermalZoneNumber(text);
  (void)HwmonNumber(text);
  (void)IsHwmonAttributeOfInterest(text);
  accelmon::v1::HostTelemetry host;
  (void)ParseThermalZone("thermal_zone0", "acpitz", text, host);
  return 0;
}
