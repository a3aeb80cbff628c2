// The block framing of recordings and of the agent's spool, after LevelDB's log format (see
// docs/recording-format.md). A file is a run of 32 KiB blocks; a record is split into fragments
// that never cross a block boundary, each with its own checksum, so one damaged block costs only
// the records that touch it and a reader can always find the next block.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace accelmon::recording {

inline constexpr size_t kBlockSize = 32768;
// Fragment header: masked CRC-32 of type and data (4, little endian), data length (2, little
// endian), type (1).
inline constexpr size_t kHeaderSize = 7;

enum class FragmentType : uint8_t {
  kZero = 0,  // never written: zeroes are padding or a block that was never filled
  kFull = 1,  // a whole record
  kFirst = 2,
  kMiddle = 3,
  kLast = 4,
};
inline constexpr uint8_t kMaxFragmentType = 4;

// CRC-32 (zlib's) of the type byte followed by `data`, masked so that a checksum stored inside a
// record's data cannot be mistaken for the checksum of that data.
uint32_t FragmentChecksum(FragmentType type, std::string_view data);

}  // namespace accelmon::recording
