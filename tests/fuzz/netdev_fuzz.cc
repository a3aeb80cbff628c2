// Fuzz target (fuzz_target.h): /proc/net/dev parsing.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "collectors/netdev.h"
#include "fuzz_target.h"

ACCELMON_FUZZ_TARGET(netdev) {
  google::protobuf::RepeatedPtrField<accelmon::v1::Link> links;
  accelmon::collectors::ParseNetDev(std::string_view(reinterpret_cast<const char*>(data), size),
                                    links);
  return 0;
}
