// One JSON string literal, for the writers that build JSON by hand: `diagnose --format json` and
// its score (diagnostics/timeline.cc, score.cc) and the exporter's /api/v1/status
// (daemon/exporter/status_json.cc). In accelmon_proto for the reason time_format.h gives: the
// lowest library both link.
#pragma once

#include <string>
#include <string_view>

namespace accelmon {

// `s` as a JSON string literal, quotes included; control characters as \uXXXX.
std::string JsonString(std::string_view s);

}  // namespace accelmon
