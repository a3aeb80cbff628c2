// Host memory from /proc/meminfo.
#pragma once

#include <cstddef>
#include <string_view>

#include "collectors/collector.h"
#include "collectors/malformed_input_log.h"
#include "collectors/open_file_cache.h"
#include "collectors/path_resolver.h"

namespace accelmon::collectors {

// Parses /proc/meminfo text into `memory` (kB converted to bytes). Keys it does not know are
// ignored; lines it cannot parse are skipped. Returns the number of skipped lines.
size_t ParseMeminfo(std::string_view text, v1::HostMemory& memory);

class MeminfoCollector final : public Collector {
 public:
  explicit MeminfoCollector(PathResolver paths) : paths_(std::move(paths)) {}

  std::string_view name() const override { return "meminfo"; }
  void Collect(v1::NodeReport& report) override;

 private:
  PathResolver paths_;
  OpenFileCache files_;
  MalformedInputLog malformed_log_{"meminfo"};
};

}  // namespace accelmon::collectors
