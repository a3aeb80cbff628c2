// Scenario files for the sim collector: faults injected into simulated devices at given offsets,
// so every diagnostics rule has a scenario where it must fire and near misses where it must not.
//
//   faults:
//     - at: 10m            # offset from the simulation's first report
//       fault: thermal_ramp
//       device: 3          # index or "all"; default 0
//       node: sim-2        # only on this node; default every node
//       duration: 20m      # default: until the end (some faults have their own default)
//       to: 92             # the fault's parameters
//
//   jobs:                  # who holds the devices; default: one Slurm job "sim-job" on all
//     - id: "4711"         # the job id, the same on every node
//       kind: slurm        # slurm (default) or pod
//       nodes: [sim-0, sim-1]  # default every node
//       devices: [0, 1]    # indexes or "all" (default)
//       user: alice        # default "sim"
//       pod: "trainer-{node}"  # pods: the name pattern ({job}, {node}, {device}, {rank})
//       namespace: ml      # pods: default "default"
//
// Unknown keys, faults and parameters are errors: a typo must not silently do nothing.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace accelmon::collectors {

// "FILE:LINE: what is wrong".
class ScenarioError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class FaultKind {
  kFragmentationCreep,
  kThermalRamp,
  kThermalSpike,
  kPowerThrottle,
  kLinkDown,
  kLinkFlap,
  kLinkDegrade,
  kLinkBurst,
  kStall,
  kPause,
  kJobEnd,
  kThroughputDrop,
  kLeak,
  kEccBurst,
  kXid,
  kDeviceLost,
  kFirmware,
  kOomKill,
  kStraggler,
  kRankHang,
};

// The name used in scenario files, e.g. "thermal_ramp".
std::string_view FaultKindName(FaultKind kind);

struct Fault {
  FaultKind kind = FaultKind::kStall;
  int line = 0;           // in the scenario file, for errors found when the fault is applied
  double at_s = 0;        // onset, seconds after the simulation's first report
  double duration_s = 0;  // 0: until the end
  int device = 0;         // -1: every device
  std::string node;       // empty: every node
  // Parameters; which ones a fault reads, and their defaults, are in docs/simulation.md's fault
  // table.
  double to = 0;        // fragmentation_creep (share), thermal_ramp/spike (celsius)
  double over_s = 600;  // fragmentation_creep, thermal_ramp: how long the ramp takes
  std::string link = "nvlink0";
  double period_s = 30;           // link_flap (30s), link_burst (20s)
  double capacity = 0.5;          // link_degrade
  double traffic = 1;             // link_degrade
  double factor = 0.3;            // throughput_drop (0.3), straggler (0.6)
  double rate = 64 << 20;         // leak, bytes per second
  uint64_t corrected = 0;         // ecc_burst
  uint64_t uncorrected = 1;       // ecc_burst
  uint64_t code = 79;             // xid
  std::string version = "0.9.0";  // firmware
  uint64_t count = 1;             // oom_kill

  bool ActiveAt(double elapsed_s) const {
    return elapsed_s >= at_s && (duration_s <= 0 || elapsed_s < at_s + duration_s);
  }
  bool AppliesTo(std::string_view node_name) const { return node.empty() || node == node_name; }
  bool AppliesTo(int device_index) const { return device < 0 || device == device_index; }
};

// A job placed on simulated devices (the scenario's `jobs:`).
struct SimJob {
  int line = 0;
  std::string id;
  bool pod = false;                // kind: pod (else slurm)
  std::vector<std::string> nodes;  // empty: every node
  std::vector<int> devices;        // empty: every device
  std::string user = "sim";
  std::string pod_pattern = "{job}-{node}";
  std::string pod_namespace = "default";

  bool OnNode(std::string_view node_name) const {
    return nodes.empty() || std::find(nodes.begin(), nodes.end(), node_name) != nodes.end();
  }
};

struct Scenario {
  std::string path;  // names the file in errors
  std::vector<Fault> faults;
  std::vector<SimJob> jobs;  // empty: the default job on every device
};

// Reads and checks a scenario file. Throws ScenarioError ("FILE:LINE: what") on any error.
Scenario LoadScenario(const std::string& path);
// The same from text; `name_for_errors` stands for the file in errors.
Scenario ParseScenario(const std::string& yaml_text, const std::string& name_for_errors);

}  // namespace accelmon::collectors
