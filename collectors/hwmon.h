// Host temperature and power sensors from hwmon chips, /sys/class/hwmon/hwmon<N>/.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "collectors/collector.h"
#include "collectors/malformed_input_log.h"
#include "collectors/open_file_cache.h"
#include "collectors/path_resolver.h"

namespace accelmon::collectors {

// The attribute files of one chip that the parser uses, by file name ("name", "temp1_input",
// "temp1_label", "power1_average", ...), with their contents. An attribute the driver does not
// answer is left out.
using HwmonAttributes = std::map<std::string, std::string, std::less<>>;

// The N of an "hwmon<N>" directory name; nullopt for anything else.
std::optional<uint64_t> HwmonNumber(std::string_view dir_name);

// Whether `file` is one the parser uses (the collector reads only those).
bool IsHwmonAttributeOfInterest(std::string_view file);

// Adds the chip's temp<i>_input (millidegrees Celsius) and power<i>_input, else power<i>_average
// (microwatts) sensors to `host`, in index order, as chip = `chip` ("hwmon3") and sensor =
// "<name> <label>", or "<name> temp<i>" / "<name> power<i>" without a label; without a `name`
// the chip stands in for it. Returns the number of values skipped as not numbers.
size_t ParseHwmonChip(std::string_view chip, const HwmonAttributes& attributes,
                      v1::HostTelemetry& host);

class HwmonCollector final : public Collector {
 public:
  explicit HwmonCollector(PathResolver paths) : paths_(std::move(paths)) {}

  std::string_view name() const override { return "hwmon"; }
  void Collect(v1::NodeReport& report) override;

 private:
  PathResolver paths_;
  OpenFileCache files_;
  MalformedInputLog malformed_log_{"hwmon"};
};

}  // namespace accelmon::collectors
