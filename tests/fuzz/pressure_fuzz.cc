// Fuzz target (fuzz_target.h): /proc/pressure/memory parsing.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "collectors/pressure.h"
#include "fuzz_target.h"

ACCELMON_FUZZ_TARGET(pressure) {
  accelmon::v1::HostPressure pressure;
  accelmon::collectors::ParsePressure(std::string_view(reinterpret_cast<const char*>(data), size),
                                      pressure);
  return 0;
}
