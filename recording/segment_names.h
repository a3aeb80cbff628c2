// How a recording directory names its segment files ("00000000000000000042.seg"): shared by the
// segment writer, its tail index, the readers and the agent's spool.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace accelmon::recording {

// "NNNNNNNNNNNNNNNNNNNN.seg" of `index` in `dir`.
std::string SegmentFilePath(const std::string& dir, uint64_t index);

// "NNNNNNNNNNNNNNNNNNNN.seg": 20 digits and the extension.
bool IsSegmentFileName(std::string_view name);
// The index of a segment file name ("00000000000000000042.seg": 42); nothing for other names.
std::optional<uint64_t> SegmentFileIndex(std::string_view name);

}  // namespace accelmon::recording
