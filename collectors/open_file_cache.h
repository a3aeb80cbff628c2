// Keeps the procfs and sysfs files a collector reads every cycle open between cycles, and reads
// each again with pread(2) at offset 0. The kernel renders a pseudo-file anew on every read from
// its start (seq_file, kernfs: the way sysfs documents re-reading an attribute after poll), so
// a cycle saves each file's path walk, open and close: 7 us -> 1.4 us a file on the bench
// machine, most of a host collection's cost (bench/README.md, "Agent").
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace accelmon::collectors {

// Paths are strings (a std::filesystem::path converts): building a path object splits it into
// components, a cost per file comparable to the read itself.
class OpenFileCache {
 public:
  OpenFileCache() = default;
  ~OpenFileCache();
  OpenFileCache(const OpenFileCache&) = delete;
  OpenFileCache& operator=(const OpenFileCache&) = delete;

  // As TryReadAttributeFile: one read of at most a page into `out`. Returns 0 or the errno.
  int ReadAttribute(const std::string& path, std::string& out);
  // As TryReadTextFile: reads to end of file. Returns 0 or the errno.
  int ReadText(const std::string& path, std::string& out);
  // As ReadTextFile: the whole file, or CollectorError("read <path>: <strerror>"). The text is
  // the cache's own buffer, reused (no allocation a cycle): valid until the next call.
  const std::string& Text(const std::string& path);
  // As collectors::ReadAttribute: the trimmed text, nullopt when missing, unreadable or empty.
  std::optional<std::string> Attribute(const std::string& path);

  // The entry names of directory `path` (no "." or ".."), in the order the kernel gives them,
  // through a kept-open descriptor rewound each time. Returns 0 or the errno.
  int ListDirectory(const std::string& path, std::vector<std::string>& names);

  // Closes every file not read since the previous call, so the files of a device that went away
  // do not stay open. Collectors call it once a cycle (SweepAtExit).
  void CloseUnread();

  size_t open_files() const { return files_.size(); }

  // Calls CloseUnread when a Collect returns or throws.
  class SweepAtExit {
   public:
    explicit SweepAtExit(OpenFileCache& cache) : cache_(cache) {}
    ~SweepAtExit() { cache_.CloseUnread(); }
    SweepAtExit(const SweepAtExit&) = delete;
    SweepAtExit& operator=(const SweepAtExit&) = delete;

   private:
    OpenFileCache& cache_;
  };

 private:
  struct File {
    int fd = -1;
    // Not on procfs or sysfs (a fixture tree): a file replaced by rename(2) or removed keeps
    // its old inode open, so each read checks that the path still names it (st_nlink > 0).
    bool check_replaced = false;
    bool read = false;
  };
  enum class Mode { kOneRead, kToEnd, kDirectory };

  // Reads `path` in `mode` into `out` (for kDirectory: NUL-separated names).
  int Read(const std::string& path, std::string& out, Mode mode);
  void Close(std::unordered_map<std::string, File>::iterator it);

  std::unordered_map<std::string, File> files_;
  std::string text_;  // Text's and Attribute's buffer
};

}  // namespace accelmon::collectors
