// Fuzz target (fuzz_target.h): /proc/buddyinfo parsing, and the unusable free space index stays in
// [0, 1].
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "collectors/buddyinfo.h"
#include "fuzz_target.h"
#include "proto/buddy_zone.h"

ACCELMON_FUZZ_TARGET(buddyinfo) {
  accelmon::v1::HostTelemetry host;
  accelmon::collectors::ParseBuddyinfo(std::string_view(reinterpret_cast<const char*>(data), size),
                                       host);
  for (const auto& zone : host.buddyinfo()) {
    for (int order = 0; order <= zone.free_blocks_size(); ++order) {
      const auto ratio = accelmon::UnusableFreeIndex(zone, static_cast<unsigned>(order));
      if (ratio && !(*ratio >= 0.0 && *ratio <= 1.0)) std::abort();
    }
  }
  return 0;
}
