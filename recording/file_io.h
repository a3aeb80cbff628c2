// The few POSIX file operations every writer of segments needs (recorder, spool, import).
#pragma once

#include <string>
#include <string_view>

namespace accelmon::recording {

// write(2) until all of `data` is written; false with errno set on failure.
bool WriteAll(int fd, std::string_view data);

// Makes a created or deleted file name durable (fsync of the directory); best effort.
void SyncDirectory(const std::string& dir);

}  // namespace accelmon::recording
