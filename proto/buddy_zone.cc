#include "proto/buddy_zone.h"

#include <cmath>

namespace accelmon {

std::optional<double> UnusableFreeIndex(const v1::BuddyZone& zone, unsigned order) {
  const auto& blocks = zone.free_blocks();
  if (order >= static_cast<unsigned>(blocks.size())) return std::nullopt;
  // In pages, as doubles: 2^i * k_i overflows uint64 for hostile input, and the ratio needs
  // no more than double's precision.
  double total = 0;
  double unusable = 0;  // pages in blocks of order < `order`
  for (int i = 0; i < blocks.size(); ++i) {
    const double pages = std::ldexp(static_cast<double>(blocks[i]), i);
    total += pages;
    if (static_cast<unsigned>(i) < order) unusable += pages;
  }
  // Beyond ~1000 orders (hostile input only) the page count overflows even a double.
  if (total == 0 || !std::isfinite(total)) return std::nullopt;
  return unusable / total;
}

}  // namespace accelmon
