// Simulated accelerators: N deterministic devices whose telemetry evolves plausibly over time,
// so dashboards, alerts and diagnostics can be shown and tested without a GPU or NPU.
//
// Deterministic: the same seed and the same sequence of report timestamps give the same values.
// Counters (link bytes, energy, ECC) only ever increase.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "collectors/collector.h"
#include "collectors/sim_scenario.h"

namespace accelmon::collectors {

struct SimOptions {
  int devices = 8;
  uint64_t seed = 1;
  // Faults to inject (sim_scenario.h); null: a healthy cluster.
  std::shared_ptr<const Scenario> scenario{};
  std::string node{};  // for faults and jobs limited to some nodes (`node:`, `nodes:`)
  // This node's place in the simulated fleet (`simulate --nodes` numbers them), for the default
  // job's global ranks: rank = node_index * devices + device, world size = nodes * devices.
  int node_index = 0;
  int nodes = 1;
  // The default job's id (when the scenario places no jobs); empty: "sim-job".
  std::string job{};
  // False: the devices alone, held by nobody the sim knows of (no holders, no pushed job or rank):
  // for tests of the attribution sources (kubelet, processes) over simulated devices.
  bool jobs = true;
  // False: no NCCL communicators of its jobs (tests where the nccl_ras collector reports them).
  bool communicators = true;
};

// Throws ScenarioError ("FILE:LINE: what") when a fault names a device or link that a simulation
// of `devices` devices does not have; what SimCollector's constructor checks, for start-up.
void CheckSimScenario(const Scenario& scenario, int devices);

// A stable seed for a node name (FNV-1a), so every node of a simulated fleet differs.
uint64_t SimSeedForNode(std::string_view node);

class SimCollector final : public Collector {
 public:
  // Throws ScenarioError when the scenario names a device or link this simulation lacks.
  explicit SimCollector(SimOptions options);

  std::string_view name() const override { return "sim"; }
  void Collect(v1::NodeReport& report) override;

  static constexpr uint64_t kMemoryTotalBytes = 128ULL << 30;  // 128 GiB HBM, as on current NPUs
  static constexpr double kPowerLimitWatts = 700;
  static constexpr double kNvlinkBytesPerSecond = 50e9;  // per link, per direction
  static constexpr double kPcieBytesPerSecond = 63e9;    // PCIe 5.0 x16, per direction
  static constexpr double kCollectivesPerSecond = 4;     // NCCL collectives a rank launches

 private:
  struct SimLink {
    std::string name;
    v1::LinkKind kind;
    uint32_t index;
    std::string peer;
    double max_bytes_per_second;
    double share;  // share of capacity this link carries while the device is busy
    uint64_t tx = 0;
    uint64_t rx = 0;
  };
  // The job holding a device (the scenario's jobs, or the default one).
  struct Placement {
    std::string job{};
    bool pod = false;
    std::string pod_name{};
    std::string pod_namespace{};
    std::string user{};
    uint32_t rank = 0;
    uint32_t world_size = 0;
  };
  struct SimDevice {
    std::mt19937_64 rng;
    std::optional<Placement> placement;  // none: nobody holds the device (it idles)
    double steps = 0;                    // the job's training steps on this device
    uint32_t steps_restarts = 0;         // the restart the steps count from
    std::string uuid;
    std::string pci_bus_id;
    double working_set_bytes = 0;  // what the simulated job settles at
    double fragmentation_max = 0;  // where fragmentation creeps towards over hours
    // The simulated job's process: it restarts every few hours (a new pid, memory loads again and
    // its allocator's cache starts unfragmented).
    double job_start_s = 0;
    double job_end_s = 0;
    uint32_t restarts = 0;
    uint64_t alloc_retries = 0;
    double busy_level = 0;  // typical compute utilization
    double core_celsius = 35;
    double energy_joules = 0;
    uint64_t ecc_corrected = 0;
    std::vector<SimLink> links;
    // Faults: the job's memory before a stall (a hung job allocates nothing), and when the job
    // last came back after a job_end.
    double last_allocated = 0;
    double last_cached_share = 0;
    double restart_floor_s = 0;
    bool process_gone = false;  // as of the last tick: its job ended, or nobody holds it
  };
  // The job (and rank, where known) on `device` of `node`, as the scenario places them.
  struct RankAt {
    std::string job;
    std::optional<uint32_t> rank;
  };
  std::optional<RankAt> JobAt(const std::string& node, int device) const;
  // Whether rank_hang `f` hangs `job`.
  bool Hangs(const Fault& f, const std::string& job) const;
  void AddCommunicators(v1::NodeReport& report, int64_t now_ns);
  struct FaultState {
    bool onset_done = false;  // its onset's events and one-off effects are out
    bool end_done = false;    // job_end: the job restarted after it
  };

  // One tick of one device, in parts that draw from its generator in a fixed order (the same
  // seed gives the same fleet): what the faults do, then utilization, memory and its process,
  // power and temperature, errors, links.
  void Step(SimDevice& device, uint32_t index, double elapsed_s, double dt_s,
            v1::DeviceTelemetry& out);
  struct TickFaults;  // what this tick's active faults do to one device (sim.cc)
  TickFaults FaultsOn(const SimDevice& device, uint32_t index, double elapsed_s) const;
  // The job's memory, its process (with its holder) and training steps; what it uses.
  void StepMemory(SimDevice& device, uint32_t index, double dt_s, double job_age_s, double loaded,
                  double compute, const TickFaults& faults, v1::DeviceTelemetry& out);
  void StepErrors(SimDevice& device, uint32_t index, double elapsed_s, double dt_s,
                  v1::DeviceTelemetry& out) const;
  void StepLinks(SimDevice& device, uint32_t index, double elapsed_s, double dt_s, double compute,
                 const TickFaults& faults, v1::DeviceTelemetry& out) const;
  // Onset events and job restarts of the faults at this tick; fills active_.
  void StartAndEndFaults(v1::NodeReport& report, double elapsed_s);
  // Places the scenario's jobs (or the default job) on this node's devices.
  void PlaceJobs();
  static void AddHolder(const Placement& job, uint32_t pid, uint64_t used_bytes,
                        v1::DeviceTelemetry& out);

  SimOptions options_;
  std::vector<Fault> faults_;  // the scenario's faults for this node
  std::vector<FaultState> fault_states_;
  std::vector<const Fault*> active_;  // this tick's active faults
  std::vector<SimDevice> devices_;
  bool started_ = false;
  int64_t start_ns_ = 0;
  int64_t last_ns_ = 0;
};

}  // namespace accelmon::collectors
