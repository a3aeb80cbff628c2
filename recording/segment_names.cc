#include "recording/segment_names.h"

#include <fmt/format.h>

#include <algorithm>

namespace accelmon::recording {

std::string SegmentFilePath(const std::string& dir, uint64_t index) {
  return fmt::format("{}/{:020}.seg", dir, index);
}

bool IsSegmentFileName(std::string_view name) {
  constexpr std::string_view kExtension = ".seg";
  if (name.size() != 20 + kExtension.size() || !name.ends_with(kExtension)) return false;
  return std::all_of(name.begin(), name.begin() + 20, [](char c) { return c >= '0' && c <= '9'; });
}

std::optional<uint64_t> SegmentFileIndex(std::string_view name) {
  if (!IsSegmentFileName(name)) return std::nullopt;
  uint64_t v = 0;
  for (size_t i = 0; i < 20; ++i) v = v * 10 + static_cast<uint64_t>(name[i] - '0');
  return v;
}

}  // namespace accelmon::recording
