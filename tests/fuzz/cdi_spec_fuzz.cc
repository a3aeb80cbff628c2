// Fuzz target (fuzz_target.h): CDI spec files (collectors/cdi_specs.h), JSON or YAML that a DRA
// driver wrote, parsed from any bytes: a device or a reason, never a crash.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string_view>

#include "collectors/cdi_specs.h"
#include "fuzz_target.h"

ACCELMON_FUZZ_TARGET(cdi_spec) {
  using namespace accelmon::collectors;
  try {
    for (const CdiDevice& d :
         ParseCdiSpec(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.yaml")) {
      if (!SplitCdiName(d.qualified_name)) std::abort();  // every device's name is qualified
    }
  } catch (const std::runtime_error&) {
    // A spec that is not one: the reason, as the collector logs it.
  }
  return 0;
}
