// Memory pressure stall information (PSI) from /proc/pressure/memory.
#pragma once

#include <cstddef>
#include <string_view>

#include "collectors/collector.h"
#include "collectors/malformed_input_log.h"
#include "collectors/open_file_cache.h"
#include "collectors/path_resolver.h"

namespace accelmon::collectors {

// Parses /proc/pressure/memory text ("some avg10=0.00 avg60=0.00 avg300=0.00 total=12345" and a
// "full ..." line) into `pressure`: the raw `total=` stall counters in microseconds. The avgN
// averages are not kept (rates are computed where they are used). Returns the number of skipped
// malformed lines.
size_t ParsePressure(std::string_view text, v1::HostPressure& pressure);

class PressureCollector final : public Collector {
 public:
  explicit PressureCollector(PathResolver paths) : paths_(std::move(paths)) {}

  std::string_view name() const override { return "pressure"; }
  // Throws CollectorError when the file is missing (kernel without PSI, or booted with psi=0).
  void Collect(v1::NodeReport& report) override;

 private:
  PathResolver paths_;
  OpenFileCache files_;
  MalformedInputLog malformed_log_{"pressure"};
};

}  // namespace accelmon::collectors
