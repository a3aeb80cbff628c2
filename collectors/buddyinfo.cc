#include "collectors/buddyinfo.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "collectors/file_reader.h"
#include "collectors/text_parsing.h"

namespace accelmon::collectors {
namespace {

// Parses one "Node 0, zone   Normal  28311  21974 ..." line; false when it does not fit.
bool ParseLine(std::string_view line, v1::BuddyZone& zone) {
  const auto fields = SplitFields(line);
  if (fields.size() < 5 || fields[0] != "Node" || fields[2] != "zone") return false;
  std::string_view node = fields[1];
  if (node.ends_with(',')) node.remove_suffix(1);
  const std::optional<uint64_t> node_id = ParseUint64(node);
  if (!node_id || *node_id > std::numeric_limits<uint32_t>::max()) return false;
  zone.set_numa_node(static_cast<uint32_t>(*node_id));
  zone.set_zone(std::string(fields[3]));
  for (size_t i = 4; i < fields.size(); ++i) {
    const std::optional<uint64_t> blocks = ParseUint64(fields[i]);
    if (!blocks) return false;
    zone.add_free_blocks(*blocks);
  }
  return true;
}

}  // namespace

size_t ParseBuddyinfo(std::string_view text, v1::HostTelemetry& host) {
  size_t malformed = 0;
  ForEachLine(text, [&](std::string_view line) {
    if (Trim(line).empty()) return;
    v1::BuddyZone zone;
    if (!ParseLine(line, zone)) {
      ++malformed;
      return;
    }
    *host.add_buddyinfo() = std::move(zone);
  });
  return malformed;
}

void BuddyinfoCollector::Collect(v1::NodeReport& report) {
  const OpenFileCache::SweepAtExit sweep(files_);
  const auto path = paths_.Proc("buddyinfo");
  const std::string& text = files_.Text(path);
  v1::HostTelemetry& host = *report.mutable_host();
  const int first_new = host.buddyinfo_size();
  const size_t malformed = ParseBuddyinfo(text, host);
  if (const long page_size = ::sysconf(_SC_PAGESIZE); page_size > 0) {
    for (int i = first_new; i < host.buddyinfo_size(); ++i) {
      host.mutable_buddyinfo(i)->set_page_size_bytes(static_cast<uint64_t>(page_size));
    }
  }
  malformed_log_.Skipped(malformed, "malformed line(s) in", path);
}

}  // namespace accelmon::collectors
