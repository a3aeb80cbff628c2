// How the rules write numbers into their summaries: one place for the printf formats they share.
#pragma once

#include <string>
#include <string_view>

namespace accelmon::diagnostics {

// `value` with `decimals` digits after the point (printf's "%.*f" rounding), then `unit` as
// given: FormatNumber(3.24, 1, " GiB") is "3.2 GiB", FormatNumber(71.6, 0, " °C") is "72 °C".
std::string FormatNumber(double value, int decimals, std::string_view unit);

// A share as a whole percentage, the sign right after the digits: 0.423 is "42%".
std::string PercentText(double share);

// Bytes in GiB with one decimal: "3.2 GiB".
std::string GibText(double bytes);

// Bytes in whole GiB, a half rounded away from zero (std::llround, not printf's rounding to
// even): "41 GiB" for 40.5 GiB.
std::string WholeGibText(double bytes);

}  // namespace accelmon::diagnostics
