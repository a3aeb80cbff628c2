// libFuzzer target: /proc/net/dev parsing.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "collectors/netdev.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  google::protobuf::RepeatedPtrField<accelmon::v1::Link> links;
  accelmon::collectors::ParseNetDev(std::string_view(reinterpret_cast<const char*>(data), size),
                                    links);
  return 0;
}
