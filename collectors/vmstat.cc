#include "collectors/vmstat.h"

#include <spdlog/spdlog.h>

#include <string>

#include "collectors/file_reader.h"
#include "collectors/text_parsing.h"

namespace accelmon::collectors {

size_t ParseVmstat(std::string_view text, v1::HostVmstat& vmstat) {
  size_t malformed = 0;
  ForEachLine(text, [&](std::string_view line) {
    if (Trim(line).empty()) return;
    const auto fields = SplitFields(line);
    const std::optional<uint64_t> value =
        fields.size() == 2 ? ParseUint64(fields[1]) : std::nullopt;
    if (!value) {
      ++malformed;
      return;
    }
    if (fields[0] == "oom_kill") vmstat.set_oom_kill_total(*value);
  });
  return malformed;
}

void VmstatCollector::Collect(v1::NodeReport& report) {
  const OpenFileCache::SweepAtExit sweep(files_);
  const auto path = paths_.Proc("vmstat");
  const std::string& text = files_.Text(path);
  v1::HostVmstat& vmstat = *report.mutable_host()->mutable_vmstat();
  const size_t malformed = ParseVmstat(text, vmstat);
  malformed_log_.Skipped(malformed, "malformed line(s) in", path);

  // Kernels before 4.13 have no oom_kill counter: nothing to compare, no events.
  if (!vmstat.has_oom_kill_total()) return;
  const uint64_t kills = vmstat.oom_kill_total();
  // The first reading is only a baseline: kills before the agent started are not news. A
  // counter that went down means a reboot (or a reset); it becomes the new baseline.
  if (previous_oom_kills_ && kills > *previous_oom_kills_) {
    const uint64_t delta = kills - *previous_oom_kills_;
    v1::Event& event = *report.add_events();
    event.set_kind(v1::EVENT_KIND_OOM_KILL);
    *event.mutable_time() = report.timestamp();
    event.set_code(delta);
    event.set_message("the kernel's OOM killer killed " + std::to_string(delta) +
                      (delta == 1 ? " process" : " processes") + " since the last report");
  }
  previous_oom_kills_ = kills;
}

}  // namespace accelmon::collectors
