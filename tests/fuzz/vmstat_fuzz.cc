// libFuzzer target: /proc/vmstat parsing.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "collectors/vmstat.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  accelmon::v1::HostVmstat vmstat;
  accelmon::collectors::ParseVmstat(std::string_view(reinterpret_cast<const char*>(data), size),
                                    vmstat);
  return 0;
}
