// Rate-limits log lines that a client can cause (rejected reports, floods): at most one line per
// key and period, and that line says how many were suppressed since the previous one.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>

namespace accelmon {

class LogLimiter {
 public:
  using SteadyClock = std::chrono::steady_clock;

  // Keeps at most `max_keys` keys; beyond that, new keys share one overflow key.
  explicit LogLimiter(std::chrono::milliseconds period = std::chrono::minutes(1),
                      size_t max_keys = 4096)
      : period_(period), max_keys_(max_keys) {}

  // Whether to log an event for `key` now. When yes, returns how many events of that key were
  // suppressed since its previous line; when no, counts this one as suppressed.
  std::optional<uint64_t> Admit(const std::string& key, SteadyClock::time_point now);

 private:
  struct Entry {
    SteadyClock::time_point last_line;
    uint64_t suppressed = 0;
  };

  const std::chrono::milliseconds period_;
  const size_t max_keys_;
  std::mutex mu_;
  std::map<std::string, Entry, std::less<>> entries_;
};

}  // namespace accelmon
