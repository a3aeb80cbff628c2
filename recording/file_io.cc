#include "recording/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace accelmon::recording {

bool WriteAll(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

bool ReadFileRange(const std::string& path, uint64_t offset, std::string* out, uint64_t max_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    out->clear();
    return false;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    out->clear();
    ::close(fd);
    errno = err;
    return false;
  }
  const auto size = static_cast<uint64_t>(st.st_size);
  // Resized, not cleared first: a buffer reused from read to read is not zero-filled again.
  out->resize(static_cast<size_t>(offset < size ? std::min(size - offset, max_bytes) : 0));
  size_t done = 0;
  while (done < out->size()) {
    const ssize_t n =
        ::pread(fd, out->data() + done, out->size() - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      out->clear();
      ::close(fd);
      errno = err;
      return false;
    }
    if (n == 0) break;  // shrank while we read
    done += static_cast<size_t>(n);
  }
  out->resize(done);
  ::close(fd);
  return true;
}

void SyncDirectory(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

}  // namespace accelmon::recording
