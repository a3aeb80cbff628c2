#include "collectors/open_file_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>

#include "collectors/file_reader.h"
#include "collectors/text_parsing.h"

namespace accelmon::collectors {
namespace {

// Descriptors held by all caches together stay under a quarter of the soft RLIMIT_NOFILE (at
// most 4096), so a host with thousands of interfaces reads the rest uncached instead of leaving
// the gRPC channel without descriptors.
std::atomic<long> cached_files{0};

long CachedFilesLimit() {
  static const long limit = [] {
    rlimit limits{};
    if (getrlimit(RLIMIT_NOFILE, &limits) != 0 || limits.rlim_cur == RLIM_INFINITY) return 4096L;
    return std::clamp(static_cast<long>(limits.rlim_cur / 4), 0L, 4096L);
  }();
  return limit;
}

bool ReserveCachedFile() {
  if (cached_files.fetch_add(1, std::memory_order_relaxed) < CachedFilesLimit()) return true;
  cached_files.fetch_sub(1, std::memory_order_relaxed);
  return false;
}

// procfs and sysfs render a file on every read from offset 0 and never replace one by rename.
bool OnKernelFilesystem(int fd) {
  struct statfs fs {};
  if (fstatfs(fd, &fs) != 0) return false;
  return fs.f_type == SYSFS_MAGIC || fs.f_type == PROC_SUPER_MAGIC;
}

ssize_t PreadRetrying(int fd, char* buffer, size_t size, off_t offset) {
  ssize_t n;
  do {
    n = ::pread(fd, buffer, size, offset);
  } while (n < 0 && errno == EINTR);
  return n;
}

// Rewinds directory `fd` and appends each entry's name and a NUL to `out`.
int ReadDirectory(int fd, std::string& out) {
  out.clear();
  if (::lseek(fd, 0, SEEK_SET) < 0) return errno;
  alignas(dirent64) char buffer[8192];
  for (;;) {
    const ssize_t n = ::getdents64(fd, buffer, sizeof buffer);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (n == 0) return 0;
    for (ssize_t at = 0; at < n;) {
      const auto* entry = reinterpret_cast<const dirent64*>(buffer + at);
      const std::string_view name(entry->d_name);
      if (name != "." && name != "..") out.append(name).push_back('\0');
      at += entry->d_reclen;
    }
  }
}

// Reads `fd` from offset 0: once (an attribute is rendered whole in the first read), or to end.
int ReadFromStart(int fd, std::string& out, bool to_end) {
  out.clear();
  char buffer[8192];
  off_t offset = 0;
  for (;;) {
    const ssize_t n = PreadRetrying(fd, buffer, to_end ? sizeof buffer : 4096, offset);
    if (n < 0) return errno;
    out.append(buffer, static_cast<size_t>(n));
    if (n == 0 || !to_end) return 0;
    offset += n;
  }
}

}  // namespace

OpenFileCache::~OpenFileCache() {
  for (auto it = files_.begin(); it != files_.end();) Close(it++);
}

void OpenFileCache::Close(std::unordered_map<std::string, File>::iterator it) {
  ::close(it->second.fd);
  cached_files.fetch_sub(1, std::memory_order_relaxed);
  files_.erase(it);
}

int OpenFileCache::Read(const std::string& path, std::string& out, Mode mode) {
  const auto read = [&](int fd) {
    return mode == Mode::kDirectory ? ReadDirectory(fd, out)
                                    : ReadFromStart(fd, out, mode == Mode::kToEnd);
  };
  if (const auto it = files_.find(path); it != files_.end()) {
    File& file = it->second;
    const int error = read(file.fd);
    struct stat st {};
    const bool replaced =
        error == 0 && file.check_replaced && (::fstat(file.fd, &st) != 0 || st.st_nlink == 0);
    if (error == 0 && !replaced) {
      file.read = true;
      return 0;
    }
    // Replaced, or an error (ENODEV from a removed device's attribute, ENOENT from a removed
    // directory): whatever the path names now is opened afresh.
    Close(it);
  }

  const int flags =
      mode == Mode::kDirectory ? O_RDONLY | O_DIRECTORY | O_CLOEXEC : O_RDONLY | O_CLOEXEC;
  const int fd = ::open(path.c_str(), flags);
  if (fd < 0) return errno;
  const int error = read(fd);
  // Files that fail to read (EINVAL: an unsupported sensor) are not kept: they fail each cycle.
  if (error != 0 || !ReserveCachedFile()) {
    ::close(fd);
    return error;
  }
  files_.emplace(path, File{fd, !OnKernelFilesystem(fd), true});
  return 0;
}

int OpenFileCache::ReadAttribute(const std::string& path, std::string& out) {
  return Read(path, out, Mode::kOneRead);
}

int OpenFileCache::ReadText(const std::string& path, std::string& out) {
  return Read(path, out, Mode::kToEnd);
}

const std::string& OpenFileCache::Text(const std::string& path) {
  if (const int error = ReadText(path, text_); error != 0) ThrowReadError(path, error);
  return text_;
}

std::optional<std::string> OpenFileCache::Attribute(const std::string& path) {
  if (ReadAttribute(path, text_) != 0) return std::nullopt;
  return TrimmedAttribute(text_);
}

int OpenFileCache::ListDirectory(const std::string& path, std::vector<std::string>& names) {
  names.clear();
  std::string packed;
  if (const int error = Read(path, packed, Mode::kDirectory); error != 0) return error;
  for (size_t at = 0; at < packed.size();) {
    const size_t end = packed.find('\0', at);
    names.emplace_back(packed, at, end - at);
    at = end + 1;
  }
  return 0;
}

void OpenFileCache::CloseUnread() {
  for (auto it = files_.begin(); it != files_.end();) {
    if (it->second.read) {
      it->second.read = false;
      ++it;
    } else {
      Close(it++);
    }
  }
}

}  // namespace accelmon::collectors
