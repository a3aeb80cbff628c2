// The few POSIX file operations every writer of segments needs (recorder, spool, import).
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

namespace accelmon::recording {

// write(2) until all of `data` is written; false with errno set on failure.
bool WriteAll(int fd, std::string_view data);

// Reads `path` from byte `offset`, at most `max_bytes` (to the end of the file by default), into
// `out` (replacing what it held; shorter when the file ends first). False with errno set when the
// file cannot be opened or read.
bool ReadFileRange(const std::string& path, uint64_t offset, std::string* out,
                   uint64_t max_bytes = std::numeric_limits<uint64_t>::max());

// Makes a created or deleted file name durable (fsync of the directory); best effort.
void SyncDirectory(const std::string& dir);

}  // namespace accelmon::recording
