#include "daemon/common/log_limiter.h"

#include <utility>

namespace accelmon {

std::optional<uint64_t> LogLimiter::Admit(const std::string& key, SteadyClock::time_point now) {
  std::lock_guard lock(mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) {
    if (entries_.size() >= max_keys_) {
      // Forget keys quiet for a whole period (their next line would be logged anyway).
      std::erase_if(entries_, [&](const auto& e) {
        return now - e.second.last_line >= period_ && e.second.suppressed == 0;
      });
    }
    const std::string overflow = "\x01overflow";
    const std::string& k = entries_.size() < max_keys_ ? key : overflow;
    it = entries_.find(k);
    if (it == entries_.end()) {
      entries_.emplace(k, Entry{now, 0});
      return 0;
    }
  }
  Entry& e = it->second;
  if (now - e.last_line < period_) {
    ++e.suppressed;
    return std::nullopt;
  }
  e.last_line = now;
  return std::exchange(e.suppressed, 0);
}

}  // namespace accelmon
