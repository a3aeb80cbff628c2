// Host VM counters from /proc/vmstat, and OOM-kill events derived from them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "collectors/collector.h"
#include "collectors/malformed_input_log.h"
#include "collectors/open_file_cache.h"
#include "collectors/path_resolver.h"

namespace accelmon::collectors {

// Parses /proc/vmstat text ("name value" lines) into `vmstat`. Counters we do not report are
// ignored; a counter the file lacks stays absent. Returns the number of skipped malformed lines.
size_t ParseVmstat(std::string_view text, v1::HostVmstat& vmstat);

class VmstatCollector final : public Collector {
 public:
  explicit VmstatCollector(PathResolver paths) : paths_(std::move(paths)) {}

  std::string_view name() const override { return "vmstat"; }
  // Also appends one EVENT_KIND_OOM_KILL event when oom_kill grew since the previous call.
  void Collect(v1::NodeReport& report) override;

 private:
  PathResolver paths_;
  OpenFileCache files_;
  // oom_kill at the previous collection; nullopt until the first one (the baseline).
  std::optional<uint64_t> previous_oom_kills_;
  MalformedInputLog malformed_log_{"vmstat"};
};

}  // namespace accelmon::collectors
