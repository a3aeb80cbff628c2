// A one-line progress bar on stderr for the long runs of the offline tools (record verify,
// export, import, replay): bytes read of the total, reports per second, time left. Drawn only
// when stderr is a terminal, so pipes and logs stay clean, and at most ten times a second.
// Not thread-safe: one thread updates it.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace accelmon {

class Progress {
 public:
  // `total_bytes` 0: unknown (standard input), shown without a bar or ETA.
  Progress(std::string label, uint64_t total_bytes);
  // For tests: draws on `fd` whether or not it is a terminal when `force` is set.
  Progress(std::string label, uint64_t total_bytes, int fd, bool force);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // Cheap enough to call for every report (a clock read; a redraw at most every 100 ms).
  void Update(uint64_t bytes_done, uint64_t reports);
  // Erases the line, so what is printed next starts clean. Idempotent.
  void Clear();

  bool enabled() const { return enabled_; }
  // Never draws (when the data itself goes to the same terminal).
  void Disable() {
    Clear();
    enabled_ = false;
  }

 private:
  void Draw(std::chrono::steady_clock::time_point now);

  const std::string label_;
  const uint64_t total_bytes_;
  const int fd_;
  bool enabled_;
  const std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_{};
  uint64_t bytes_ = 0;
  uint64_t reports_ = 0;
  bool drawn_ = false;
};

// "1.5 MiB", "320 B": sizes for people.
std::string HumanBytes(uint64_t bytes);
// Durations for people: FormatDuration in proto/time_format.h.

}  // namespace accelmon
