// Fuzz target (fuzz_target.h): /proc/meminfo parsing never crashes, hangs or reads out of bounds.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "collectors/meminfo.h"
#include "fuzz_target.h"

ACCELMON_FUZZ_TARGET(meminfo) {
  accelmon::v1::HostMemory memory;
  accelmon::collectors::ParseMeminfo(std::string_view(reinterpret_cast<const char*>(data), size),
                                     memory);
  return 0;
}
