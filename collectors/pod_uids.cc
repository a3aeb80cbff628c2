#include "collectors/pod_uids.h"

#include <system_error>

namespace accelmon::collectors {
namespace fs = std::filesystem;

PodUids ReadPodUids(const fs::path& dir) {
  PodUids uids;
  std::map<std::pair<std::string, std::string>, fs::file_time_type> seen_at;
  std::error_code ec;
  fs::directory_iterator it(dir, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const size_t first = name.find('_');
    const size_t second = first == std::string::npos ? first : name.find('_', first + 1);
    if (second == std::string::npos || name.find('_', second + 1) != std::string::npos) continue;
    if (first == 0 || second == first + 1 || second + 1 == name.size()) continue;
    std::error_code time_ec;
    const auto mtime = fs::last_write_time(it->path(), time_ec);
    std::pair key{name.substr(0, first), name.substr(first + 1, second - first - 1)};
    auto [at, inserted] = seen_at.emplace(key, mtime);
    if (!inserted && at->second >= mtime) continue;
    at->second = mtime;
    uids[std::move(key)] = name.substr(second + 1);
  }
  return uids;
}

}  // namespace accelmon::collectors
