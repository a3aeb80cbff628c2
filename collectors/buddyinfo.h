// Free memory blocks per NUMA node, zone and order from /proc/buddyinfo.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

#include "collectors/collector.h"
#include "collectors/malformed_input_log.h"
#include "collectors/open_file_cache.h"
#include "collectors/path_resolver.h"

namespace accelmon::collectors {

// Parses /proc/buddyinfo text ("Node 0, zone   Normal   1 2 3 ...") and appends one BuddyZone
// per line to host.buddyinfo(), page_size_bytes left absent (the text does not say it). Returns
// the number of skipped malformed lines; a malformed line adds nothing.
size_t ParseBuddyinfo(std::string_view text, v1::HostTelemetry& host);

class BuddyinfoCollector final : public Collector {
 public:
  explicit BuddyinfoCollector(PathResolver paths) : paths_(std::move(paths)) {}

  std::string_view name() const override { return "buddyinfo"; }
  void Collect(v1::NodeReport& report) override;

 private:
  PathResolver paths_;
  OpenFileCache files_;
  MalformedInputLog malformed_log_{"buddyinfo"};
};

}  // namespace accelmon::collectors
