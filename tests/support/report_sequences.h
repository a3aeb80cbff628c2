// What the spool and report-log tests compare: the sequences of reports read back, against a
// run of consecutive sequences.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "accelmon/v1/telemetry.pb.h"

namespace accelmon::testing {

inline std::vector<uint64_t> Sequences(
    const std::vector<std::shared_ptr<const v1::NodeReport>>& reports) {
  std::vector<uint64_t> out;
  for (const auto& r : reports) out.push_back(r->sequence());
  return out;
}

// first, first + 1, ..., last.
inline std::vector<uint64_t> Range(uint64_t first, uint64_t last) {
  std::vector<uint64_t> out;
  for (uint64_t s = first; s <= last; ++s) out.push_back(s);
  return out;
}

}  // namespace accelmon::testing
