// Fuzz target (fuzz_target.h): the processes collector's /proc parsers (cgroup, status, DRM
// fdinfo).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "collectors/processes.h"
#include "fuzz_target.h"

ACCELMON_FUZZ_TARGET(processes) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  static_cast<void>(accelmon::collectors::ParseSlurmCgroup(text));
  static_cast<void>(accelmon::collectors::ParseStatusUid(text));
  static_cast<void>(accelmon::collectors::ParseDrmFdinfo(text));
  return 0;
}
