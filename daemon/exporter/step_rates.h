// Training steps per second of the processes that push a step counter (ProcessMemory.steps_total),
// from consecutive reports of one node. The node store keeps one tracker per node, next to the
// node's latest report, so /metrics renders the rates from the same state as everything else
// (accelmon_job_step_rate) without a second copy of the reports.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "accelmon/v1/telemetry.pb.h"

namespace accelmon {

struct StepRate {
  uint32_t device_index = 0;
  uint32_t pid = 0;
  double steps_per_second = 0;
};

class StepRateTracker {
 public:
  // A rate is measured over at least this much of the node's clock, so that a step counter read
  // every second (steps taking about as long) does not swing between 0 and 2 steps a second.
  static constexpr double kMinWindowSeconds = 10;

  // Takes the node's next report and returns the rate of every process in it whose rate is known
  // (sorted by device index, then pid; null when there is none): processes seen for less than one
  // window, or whose counter went back (a restart), have none yet. Processes not in `report` are
  // forgotten, so the tracker holds at most one entry per (device, pid) of the latest report. A new
  // agent instance (the agent restarted: pids and counters start over) forgets everything.
  std::shared_ptr<const std::vector<StepRate>> Update(const v1::NodeReport& report);

 private:
  struct Anchor {
    uint64_t steps = 0;
    double at_seconds = 0;  // node clock of the report that carried `steps`
    std::optional<double> rate;
  };

  std::string instance_;
  std::map<std::pair<uint32_t, uint32_t>, Anchor> anchors_;  // by (device index, pid)
};

}  // namespace accelmon
