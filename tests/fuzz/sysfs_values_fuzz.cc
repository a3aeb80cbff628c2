// libFuzzer target: the one-value sysfs attribute parsers every sysfs collector uses.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "collectors/text_parsing.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  using namespace accelmon::collectors;
  (void)ParseUint64(text);
  (void)ParseInt64(text);
  (void)ParseDouble(text);
  for (const std::string_view field : SplitFields(text)) {
    if (field.empty()) std::abort();  // SplitFields never yields an empty field
  }
  ForEachLine(text, [](std::string_view line) { (void)Trim(line); });
  return 0;
}
