#include "collectors/pod_uids.h"

#include <system_error>
#include <vector>

namespace accelmon::collectors {
namespace fs = std::filesystem;

PodUids ReadPodUids(const fs::path& dir) {
  PodUids uids;
  // Names alone, no stat per entry (a tick lists up to the kubelet's 110 pods): a directory is
  // stat'ed only when its pod name was already seen with another uid.
  std::map<std::pair<std::string, std::string>, fs::path> first_dir;
  std::error_code ec;
  fs::directory_iterator it(dir, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const size_t first = name.find('_');
    const size_t second = first == std::string::npos ? first : name.find('_', first + 1);
    if (second == std::string::npos || name.find('_', second + 1) != std::string::npos) continue;
    if (first == 0 || second == first + 1 || second + 1 == name.size()) continue;
    std::pair key{name.substr(0, first), name.substr(first + 1, second - first - 1)};
    std::string uid = name.substr(second + 1);
    auto [seen, inserted] = first_dir.emplace(key, it->path());
    if (!inserted) {
      // The same pod name twice: the newer directory's uid.
      std::error_code a_ec, b_ec;
      const auto kept = fs::last_write_time(seen->second, a_ec);
      const auto other = fs::last_write_time(it->path(), b_ec);
      if (b_ec || (!a_ec && other <= kept)) continue;
      seen->second = it->path();
    }
    uids[std::move(key)] = std::move(uid);
  }
  return uids;
}

const PodUids& PodLogDirectory::Refresh(bool& exists) {
  std::error_code ec;
  const auto mtime = fs::last_write_time(dir_, ec);
  exists = !ec && fs::is_directory(dir_, ec) && !ec;
  if (!exists) {
    read_at_.reset();
    uids_.clear();
  } else if (read_at_ != mtime) {
    uids_ = ReadPodUids(dir_);
    read_at_ = mtime;
  }
  return uids_;
}

}  // namespace accelmon::collectors
