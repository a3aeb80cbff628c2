// libFuzzer target: /proc/pressure/memory parsing.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "collectors/pressure.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  accelmon::v1::HostPressure pressure;
  accelmon::collectors::ParsePressure(std::string_view(reinterpret_cast<const char*>(data), size),
                                      pressure);
  return 0;
}
