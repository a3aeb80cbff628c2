// Per-link and per-device state the rules keep between reports, shared by the rule files.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "accelmon/v1/telemetry.pb.h"

namespace accelmon::diagnostics {

// State by name, found in O(1) while reports keep their order (the common case) and by a scan
// otherwise. A deque, so that references stay valid as slots are added.
template <typename T>
class Slots {
 public:
  T& Get(int position, std::string_view name) {
    const size_t p = static_cast<size_t>(position);
    if (p < slots_.size() && slots_[p].first == name) return slots_[p].second;
    for (auto& slot : slots_) {
      if (slot.first == name) return slot.second;
    }
    return slots_.emplace_back(std::string(name), T{}).second;
  }

 private:
  std::deque<std::pair<std::string, T>> slots_;
};

// A link's tx+rx byte rate between consecutive reports.
struct ByteCounters {
  bool seen = false;
  bool has_tx = false;
  bool has_rx = false;
  uint64_t tx = 0;
  uint64_t rx = 0;
  int64_t ns = 0;

  // The rate since the previous call; nullopt when unknown (no counters in both reports, or a
  // counter went down: a reset, whose interval is skipped).
  std::optional<double> Update(const v1::Link& link, int64_t now_ns) {
    std::optional<double> rate;
    if (seen && now_ns > ns) {
      bool any = false;
      bool reset = false;
      double delta = 0;
      if (has_tx && link.has_transmit_bytes_total()) {
        any = true;
        reset |= link.transmit_bytes_total() < tx;
        delta += static_cast<double>(link.transmit_bytes_total() - tx);
      }
      if (has_rx && link.has_receive_bytes_total()) {
        any = true;
        reset |= link.receive_bytes_total() < rx;
        delta += static_cast<double>(link.receive_bytes_total() - rx);
      }
      if (any && !reset) rate = delta / (static_cast<double>(now_ns - ns) / 1e9);
    }
    seen = true;
    has_tx = link.has_transmit_bytes_total();
    has_rx = link.has_receive_bytes_total();
    tx = link.transmit_bytes_total();
    rx = link.receive_bytes_total();
    ns = now_ns;
    return rate;
  }
};

}  // namespace accelmon::diagnostics
