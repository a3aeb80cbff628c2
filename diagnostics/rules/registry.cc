#include <array>

#include "diagnostics/rules/rules.h"

namespace accelmon::diagnostics {
namespace {

// Whether the rule whose settings are `Section` of the config is on.
template <auto Section>
bool Enabled(const Config& config) {
  return (config.*Section).enabled;
}

}  // namespace

std::span<const RuleDefinition> AllRules() {
  static const std::array kRules = {
      RuleDefinition{"memory_fragmentation", &MakeMemoryFragmentationRule,
                     &Enabled<&Config::memory_fragmentation>},
      RuleDefinition{"host_oom_kill", &MakeHostOomKillRule, &Enabled<&Config::host_oom_kill>},
      RuleDefinition{"thermal_throttling", &MakeThermalThrottlingRule,
                     &Enabled<&Config::thermal_throttling>},
      RuleDefinition{"link_down", &MakeLinkDownRule, &Enabled<&Config::link_down>},
      RuleDefinition{"link_degraded", &MakeLinkDegradedRule, &Enabled<&Config::link_degraded>},
      RuleDefinition{"link_flapping", &MakeLinkFlappingRule, &Enabled<&Config::link_flapping>},
      RuleDefinition{"job_stall", &MakeJobStallRule, &Enabled<&Config::job_stall>,
                     &MakeJobStallJobRule},
      RuleDefinition{"job_straggler", nullptr, &Enabled<&Config::job_straggler>,
                     &MakeJobStragglerRule},
      RuleDefinition{"throughput_drop", &MakeThroughputDropRule,
                     &Enabled<&Config::throughput_drop>},
      RuleDefinition{"low_sm_activity", &MakeLowSmActivityRule, &Enabled<&Config::low_sm_activity>},
      RuleDefinition{"memory_leak", &MakeMemoryLeakRule, &Enabled<&Config::memory_leak>},
      RuleDefinition{"ecc_errors", &MakeEccErrorsRule, &Enabled<&Config::ecc_errors>},
      RuleDefinition{"xid_error", &MakeXidErrorRule, &Enabled<&Config::xid_error>},
      RuleDefinition{"firmware_below_minimum", &MakeFirmwareBelowMinimumRule,
                     &Enabled<&Config::firmware_below_minimum>},
      RuleDefinition{"device_lost", &MakeDeviceLostRule, &Enabled<&Config::device_lost>},
  };
  return kRules;
}

}  // namespace accelmon::diagnostics
