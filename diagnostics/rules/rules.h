// One factory per rule; each rule lives in the file named after its id.
#pragma once

#include <memory>

#include "diagnostics/rule.h"

namespace accelmon::diagnostics {

// Byte units for the rules' summaries ("3.2 GiB").
inline constexpr double kMiB = 1024.0 * 1024.0;
inline constexpr double kGiB = 1024.0 * kMiB;

std::unique_ptr<Rule> MakeMemoryFragmentationRule(const Config& config);
std::unique_ptr<Rule> MakeHostOomKillRule(const Config& config);
std::unique_ptr<Rule> MakeThermalThrottlingRule(const Config& config);
std::unique_ptr<Rule> MakeLinkDownRule(const Config& config);
std::unique_ptr<Rule> MakeLinkDegradedRule(const Config& config);
std::unique_ptr<Rule> MakeLinkFlappingRule(const Config& config);
std::unique_ptr<Rule> MakeJobStallRule(const Config& config);
std::unique_ptr<JobRule> MakeJobStallJobRule(const Config& config);
std::unique_ptr<JobRule> MakeJobStragglerRule(const Config& config);
std::unique_ptr<Rule> MakeThroughputDropRule(const Config& config);
std::unique_ptr<Rule> MakeLowSmActivityRule(const Config& config);
std::unique_ptr<Rule> MakeMemoryLeakRule(const Config& config);
std::unique_ptr<Rule> MakeEccErrorsRule(const Config& config);
std::unique_ptr<Rule> MakeXidErrorRule(const Config& config);
std::unique_ptr<Rule> MakeFirmwareBelowMinimumRule(const Config& config);
std::unique_ptr<Rule> MakeDeviceLostRule(const Config& config);

}  // namespace accelmon::diagnostics
