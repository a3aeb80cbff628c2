#include "diagnostics/rules/format.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "diagnostics/rules/rules.h"

namespace accelmon::diagnostics {

std::string FormatNumber(double value, int decimals, std::string_view unit) {
  // Sized first: a fixed buffer would cut a large value short.
  const int digits = std::snprintf(nullptr, 0, "%.*f", decimals, value);
  std::string out(static_cast<size_t>(std::max(digits, 0)), '\0');
  std::snprintf(out.data(), out.size() + 1, "%.*f", decimals, value);
  out += unit;
  return out;
}

std::string PercentText(double share) { return FormatNumber(share * 100, 0, "%"); }

std::string GibText(double bytes) { return FormatNumber(bytes / kGiB, 1, " GiB"); }

std::string WholeGibText(double bytes) {
  return std::to_string(std::llround(bytes / kGiB)) + " GiB";
}

}  // namespace accelmon::diagnostics
