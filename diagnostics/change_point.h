// Where a trend began: the change point of a window of samples, so that a finding's `start` is
// when the condition began rather than when the rule's window happened to start.
#pragma once

#include <cstddef>
#include <span>

namespace accelmon::diagnostics {

// The index of the sample where a flat stretch (or a slow drift) turns into a straight-line
// trend: the bend k of the broken line y = a + b * t + c * max(0, t - t[k]) that fits the samples
// best (least squares over every k). 0 when one straight line fits as well (the whole window is
// one trend) or there are fewer than 3 samples. `t` must be
// ascending and as long as `y`. Linear in the number of samples.
size_t HingeChangePoint(std::span<const double> t, std::span<const double> y);

}  // namespace accelmon::diagnostics
