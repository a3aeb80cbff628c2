#include "collectors/pcie.h"

#include <cmath>
#include <iterator>

namespace accelmon::collectors {
namespace {

// The share of the transferred bits that carry data is data_units / line_units (pcie.h).
struct Generation {
  double gts;  // transfers per second per lane, in billions
  double data_units;
  double line_units;
};

constexpr Generation kGenerations[] = {
    {2.5, 8, 10},      // gen1: 8b/10b
    {5.0, 8, 10},      // gen2: 8b/10b
    {8.0, 128, 130},   // gen3: 128b/130b
    {16.0, 128, 130},  // gen4
    {32.0, 128, 130},  // gen5
    {64.0, 242, 256},  // gen6: PAM4, FLIT mode, 242 of 256 bytes are TLPs and DLLPs
};

const Generation* Find(uint32_t generation) {
  if (generation < 1 || generation > std::size(kGenerations)) return nullptr;
  return &kGenerations[generation - 1];
}

// The numerator is an exact integer in a double, so the one division rounds correctly.
double Capacity(const Generation& g, uint32_t width) {
  return g.gts * 1e9 * width * g.data_units / (g.line_units * 8);
}

}  // namespace

std::optional<double> PcieLaneGts(uint32_t generation) {
  const Generation* g = Find(generation);
  if (g == nullptr) return std::nullopt;
  return g->gts;
}

std::optional<uint32_t> PcieGeneration(double gts) {
  for (uint32_t i = 0; i < std::size(kGenerations); ++i) {
    if (std::abs(gts - kGenerations[i].gts) < 0.01) return i + 1;
  }
  return std::nullopt;
}

std::optional<double> PcieLaneBytesPerSecond(uint32_t generation) {
  const Generation* g = Find(generation);
  if (g == nullptr) return std::nullopt;
  return Capacity(*g, 1);
}

std::optional<double> PcieMaxBytesPerSecond(uint32_t generation, uint32_t width) {
  const Generation* g = Find(generation);
  if (g == nullptr || width == 0) return std::nullopt;
  return Capacity(*g, width);
}

}  // namespace accelmon::collectors
