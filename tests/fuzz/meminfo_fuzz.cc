// libFuzzer target: /proc/meminfo parsing never crashes, hangs or reads out of bounds.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "collectors/meminfo.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  accelmon::v1::HostMemory memory;
  accelmon::collectors::ParseMeminfo(std::string_view(reinterpret_cast<const char*>(data), size),
                                     memory);
  return 0;
}
