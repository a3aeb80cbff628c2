#include "daemon/tools/progress.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "proto/time_format.h"

namespace accelmon {
namespace {

using SteadyClock = std::chrono::steady_clock;

constexpr auto kRedrawEvery = std::chrono::milliseconds(100);

int TerminalWidth(int fd) {
  winsize ws{};
  if (::ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 40) return ws.ws_col;
  return 80;
}

void WriteAll(int fd, const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    const ssize_t n = ::write(fd, s.data() + done, s.size() - done);
    if (n <= 0) return;  // a progress bar is not worth retrying for
    done += static_cast<size_t>(n);
  }
}

std::string HumanRate(double per_second) {
  char buf[32];
  if (per_second >= 1e6) {
    std::snprintf(buf, sizeof buf, "%.1fM", per_second / 1e6);
  } else if (per_second >= 1e3) {
    std::snprintf(buf, sizeof buf, "%.1fk", per_second / 1e3);
  } else {
    std::snprintf(buf, sizeof buf, "%.0f", per_second);
  }
  return buf;
}

}  // namespace

std::string HumanBytes(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  size_t unit = 0;
  while (value >= 1024 && unit + 1 < std::size(kUnits)) {
    value /= 1024;
    ++unit;
  }
  char buf[32];
  if (unit == 0) {
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  } else {
    std::snprintf(buf, sizeof buf, "%.1f %s", value, kUnits[unit]);
  }
  return buf;
}

Progress::Progress(std::string label, uint64_t total_bytes)
    : Progress(std::move(label), total_bytes, STDERR_FILENO, false) {}

Progress::Progress(std::string label, uint64_t total_bytes, int fd, bool force)
    : label_(std::move(label)),
      total_bytes_(total_bytes),
      fd_(fd),
      enabled_(force || ::isatty(fd) == 1),
      start_(SteadyClock::now()),
      last_draw_(start_) {}

Progress::~Progress() { Clear(); }

void Progress::Update(uint64_t bytes_done, uint64_t reports) {
  bytes_ = bytes_done;
  reports_ = reports;
  if (!enabled_) return;
  const auto now = SteadyClock::now();
  if (now - last_draw_ < kRedrawEvery) return;
  Draw(now);
}

void Progress::Draw(SteadyClock::time_point now) {
  last_draw_ = now;
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const double rate = elapsed > 0 ? static_cast<double>(reports_) / elapsed : 0;
  std::string line = "\r" + label_ + " ";
  std::string tail = HumanBytes(bytes_);
  if (total_bytes_ > 0) {
    const double fraction =
        std::min(1.0, static_cast<double>(bytes_) / static_cast<double>(total_bytes_));
    tail += " / " + HumanBytes(total_bytes_);
    char pct[16];
    std::snprintf(pct, sizeof pct, " %3.0f%%", fraction * 100);
    tail += pct;
    tail += "  " + HumanRate(rate) + " reports/s";
    if (fraction > 0 && elapsed > 0.5) {
      tail +=
          "  ETA " + FormatDuration(std::chrono::duration<double>(elapsed / fraction - elapsed));
    }
    // The bar takes what the terminal has left.
    const int room = TerminalWidth(fd_) - static_cast<int>(line.size() + tail.size()) - 4;
    const int width = std::clamp(room, 0, 40);
    if (width >= 10) {
      const int filled = static_cast<int>(fraction * width);
      line += "[" + std::string(static_cast<size_t>(filled), '=') +
              std::string(static_cast<size_t>(width - filled), ' ') + "] ";
    }
  } else {
    tail += "  " + HumanRate(rate) + " reports/s";
  }
  line += tail + "\x1b[K";
  WriteAll(fd_, line);
  drawn_ = true;
}

void Progress::Clear() {
  if (!drawn_) return;
  WriteAll(fd_, "\r\x1b[K");
  drawn_ = false;
}

}  // namespace accelmon
