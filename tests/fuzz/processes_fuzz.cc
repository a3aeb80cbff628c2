// libFuzzer target: the processes collector's /proc parsers (cgroup, status, DRM fdinfo).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "collectors/processes.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  static_cast<void>(accelmon::collectors::ParseSlurmCgroup(text));
  static_cast<void>(accelmon::collectors::ParseStatusUid(text));
  static_cast<void>(accelmon::collectors::ParseDrmFdinfo(text));
  return 0;
}
