// Fuzz target (fuzz_target.h): /proc/vmstat parsing.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "collectors/vmstat.h"
#include "fuzz_target.h"

ACCELMON_FUZZ_TARGET(vmstat) {
  accelmon::v1::HostVmstat vmstat;
  accelmon::collectors::ParseVmstat(std::string_view(reinterpret_cast<const char*>(data), size),
                                    vmstat);
  return 0;
}
