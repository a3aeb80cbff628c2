#include "collectors/file_reader.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "collectors/collector.h"

namespace accelmon::collectors {

int TryReadTextFile(const std::filesystem::path& path, std::string& out) {
  out.clear();
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  char buffer[8192];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      const int saved = errno;
      ::close(fd);
      return saved;
    }
    out.append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
  return 0;
}

int TryReadAttributeFile(const std::filesystem::path& path, std::string& out) {
  out.clear();
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  char buffer[4096];
  ssize_t n;
  do {
    n = ::read(fd, buffer, sizeof buffer);
  } while (n < 0 && errno == EINTR);
  const int saved = errno;
  ::close(fd);
  if (n < 0) return saved;
  out.assign(buffer, static_cast<size_t>(n));
  return 0;
}

void ThrowReadError(const std::filesystem::path& path, int error) {
  throw CollectorError("read " + path.string() + ": " + std::strerror(error));
}

std::string ReadTextFile(const std::filesystem::path& path) {
  std::string contents;
  if (const int err = TryReadTextFile(path, contents); err != 0) ThrowReadError(path, err);
  return contents;
}

}  // namespace accelmon::collectors
