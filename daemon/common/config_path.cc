#include "daemon/common/config_path.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>

namespace accelmon {
namespace {

std::string Named(std::string_view flag, const std::string& path) {
  return (flag.empty() ? std::string() : std::string(flag) + " ") + path + ": ";
}

}  // namespace

std::optional<std::string> CheckConfigFilePath(std::string_view flag, const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return Named(flag, path) + (errno == ENOENT
                                    ? std::string("does not exist")
                                    : "cannot be read: " + std::string(std::strerror(errno)));
  }
  if (S_ISDIR(st.st_mode)) return Named(flag, path) + "is a directory, not a file";
  // A pipe (a shell's <(...)) is read once, by the parser: nothing to look at here.
  if (!S_ISREG(st.st_mode)) return std::nullopt;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Named(flag, path) + "cannot be read: " + std::strerror(errno);
  // Read to the end (files under /proc report no size): empty means nothing but white space.
  bool blank = true;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      return Named(flag, path) + "cannot be read: " + std::strerror(err);
    }
    if (n == 0) break;
    blank = blank && std::all_of(buf, buf + n, [](char c) {
              return std::isspace(static_cast<unsigned char>(c)) != 0;
            });
  }
  ::close(fd);
  if (blank) return Named(flag, path) + "is empty (name no file to use the defaults)";
  return std::nullopt;
}

std::optional<std::string> PrepareWritableDirectory(std::string_view flag,
                                                    const std::string& path) {
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec && !std::filesystem::is_directory(path)) {
    return Named(flag, path) + "cannot create it: " + ec.message();
  }
  if (!std::filesystem::is_directory(path, ec)) return Named(flag, path) + "is not a directory";
  if (::access(path.c_str(), W_OK | X_OK) != 0) {
    return Named(flag, path) + "cannot write in it: " + std::strerror(errno);
  }
  return std::nullopt;
}

}  // namespace accelmon
