#include "collectors/meminfo.h"

#include <spdlog/spdlog.h>

#include <charconv>
#include <cstdint>
#include <limits>

#include "collectors/file_reader.h"
#include "collectors/text_parsing.h"

namespace accelmon::collectors {
namespace {

// A plain function pointer: GCC 12's UBSan miscompiles calls through member pointers.
using MemorySetter = void (*)(v1::HostMemory&, uint64_t);

struct MeminfoField {
  std::string_view key;
  MemorySetter set;
};

// The meminfo keys we report; the kernel adds keys over time, unknown ones are ignored.
constexpr MeminfoField kFields[] = {
    {"MemTotal", [](v1::HostMemory& m, uint64_t v) { m.set_total_bytes(v); }},
    {"MemFree", [](v1::HostMemory& m, uint64_t v) { m.set_free_bytes(v); }},
    {"MemAvailable", [](v1::HostMemory& m, uint64_t v) { m.set_available_bytes(v); }},
    {"Buffers", [](v1::HostMemory& m, uint64_t v) { m.set_buffers_bytes(v); }},
    {"Cached", [](v1::HostMemory& m, uint64_t v) { m.set_cached_bytes(v); }},
    {"SwapTotal", [](v1::HostMemory& m, uint64_t v) { m.set_swap_total_bytes(v); }},
    {"SwapFree", [](v1::HostMemory& m, uint64_t v) { m.set_swap_free_bytes(v); }},
    {"Shmem", [](v1::HostMemory& m, uint64_t v) { m.set_shmem_bytes(v); }},
    {"SReclaimable", [](v1::HostMemory& m, uint64_t v) { m.set_slab_reclaimable_bytes(v); }},
    {"SUnreclaim", [](v1::HostMemory& m, uint64_t v) { m.set_slab_unreclaimable_bytes(v); }},
    {"HugePages_Total", [](v1::HostMemory& m, uint64_t v) { m.set_hugepages_total(v); }},
    {"HugePages_Free", [](v1::HostMemory& m, uint64_t v) { m.set_hugepages_free(v); }},
    {"Hugepagesize", [](v1::HostMemory& m, uint64_t v) { m.set_hugepage_size_bytes(v); }},
    {"Dirty", [](v1::HostMemory& m, uint64_t v) { m.set_dirty_bytes(v); }},
    {"Writeback", [](v1::HostMemory& m, uint64_t v) { m.set_writeback_bytes(v); }},
};

// Parses "  16318468 kB" or "  0" into a byte (or plain) count.
bool ParseValue(std::string_view text, uint64_t& out) {
  text = Trim(text);
  uint64_t multiplier = 1;
  if (text.ends_with(" kB")) {
    multiplier = 1024;
    text = Trim(text.substr(0, text.size() - 3));
  }
  uint64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return false;
  if (value > std::numeric_limits<uint64_t>::max() / multiplier) return false;
  out = value * multiplier;
  return true;
}

}  // namespace

size_t ParseMeminfo(std::string_view text, v1::HostMemory& memory) {
  size_t malformed = 0;
  while (!text.empty()) {
    const size_t eol = text.find('\n');
    const std::string_view line = text.substr(0, eol);
    text = eol == std::string_view::npos ? std::string_view() : text.substr(eol + 1);
    if (Trim(line).empty()) continue;

    const size_t colon = line.find(':');
    uint64_t value = 0;
    if (colon == std::string_view::npos || !ParseValue(line.substr(colon + 1), value)) {
      ++malformed;
      continue;
    }
    const std::string_view key = line.substr(0, colon);
    for (const MeminfoField& field : kFields) {
      if (field.key == key) {
        field.set(memory, value);
        break;
      }
    }
  }
  return malformed;
}

void MeminfoCollector::Collect(v1::NodeReport& report) {
  const OpenFileCache::SweepAtExit sweep(files_);
  const std::string& text = files_.Text(paths_.Proc("meminfo"));
  const size_t malformed = ParseMeminfo(text, *report.mutable_host()->mutable_memory());
  malformed_log_.Skipped(malformed, "malformed line(s) in", paths_.Proc("meminfo"));
}

}  // namespace accelmon::collectors
