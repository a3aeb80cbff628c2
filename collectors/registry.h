// Which collectors an agent runs, and running them all for one tick.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "collectors/collector.h"
#include "collectors/path_resolver.h"
#include "collectors/processes.h"
#include "collectors/push.h"
#include "collectors/sim_scenario.h"

namespace accelmon::collectors {

struct CollectorConfig {
  PathResolver paths;
  // Host collectors turned on (true) or off (false) by name, as --collector.<name> and
  // --no-collector.<name> say; one not named here runs when its default_enabled says so.
  // CreateCollectors throws std::invalid_argument for a name that is not in HostCollectors().
  std::map<std::string, bool, std::less<>> host_collectors{};
  int sim_devices = 0;  // --sim N; 0 = no simulated devices
  uint64_t sim_seed = 0;
  std::shared_ptr<const Scenario> sim_scenario{};  // --sim.scenario; null: healthy devices
  std::string node{};                              // the node's name, for faults on one node
  // Device collectors; each is off by itself when its library or sysfs tree is absent.
  bool devices = false;                            // false in tests that want host collectors only
  std::string nvml_library = "libnvidia-ml.so.1";  // --nvml.library
  std::string dcmi_library = "libdcmi.so";         // --dcmi.library
  std::chrono::milliseconds device_timeout{2000};  // --collect.device-timeout
  // Allocator statistics pushed by training processes; the "push" collector runs last, after
  // every device collector, when set. Must outlive the collectors.
  PushStore* push = nullptr;
  // Who uses each device (the "processes" collector, after push): on whenever there can be
  // devices (`devices` or `sim_devices`), unless turned off.
  bool processes = true;
  ProcessesOptions processes_options{};  // --processes.max-per-device
  // The kubelet's pod-resources socket (--kubelet.pod-resources-socket); empty: no "kubelet"
  // collector. It runs last: it folds the processes' holders of a device into its pod's.
  std::string kubelet_socket{};
  std::chrono::milliseconds kubelet_timeout{500};    // --kubelet.timeout
  std::vector<std::string> kubelet_cdi_spec_dirs{};  // --kubelet.cdi-spec-dirs; empty: no DRA
  std::string kubelet_pod_logs_dir{};                // --kubelet.pod-logs-dir; empty: no pod uids
  // NCCL's RAS ports to ask (--nccl-ras.address); empty: no "nccl_ras" collector.
  std::vector<std::string> nccl_ras_addresses{};
  std::chrono::milliseconds nccl_ras_timeout{5000};  // --nccl-ras.timeout
  std::chrono::milliseconds interval{1000};          // --collect.interval: how often RAS is asked
};

// One host collector: the one place its name, help and default are spelled. The name is the
// collector's name() (the collector="..." label) and its flags, --collector.<name> and
// --no-collector.<name>.
struct HostCollectorInfo {
  std::string_view name;
  std::string_view help;  // one line for --help
  bool default_enabled;   // runs without a flag
  std::unique_ptr<Collector> (*create)(const PathResolver& paths);
};

// Every host collector, in the order they run: the one list of them.
std::span<const HostCollectorInfo> HostCollectors();

// One host collector by name (one of HostCollectors()), or nullptr.
std::unique_ptr<Collector> CreateHostCollector(std::string_view name, const PathResolver& paths);

// Whether the host collector `name` runs under `config`: its entry in config.host_collectors,
// else its default. Throws std::invalid_argument when no host collector has that name.
bool HostCollectorEnabled(const CollectorConfig& config, std::string_view name);

// The collectors for this configuration, in the order they run.
std::vector<std::unique_ptr<Collector>> CreateCollectors(const CollectorConfig& config);

// Runs a fixed set of collectors, one tick at a time.
class CollectorSet {
 public:
  explicit CollectorSet(std::vector<std::unique_ptr<Collector>> collectors);

  // Runs every collector into `report` and records each one's outcome in report.collectors().
  // A collector that throws is marked failed; the others still run. A collector that starts or
  // stops failing is logged once at info level, not on every tick.
  void CollectAll(v1::NodeReport& report);

  size_t size() const { return collectors_.size(); }

 private:
  std::vector<std::unique_ptr<Collector>> collectors_;
  std::vector<bool> failing_;
};

}  // namespace accelmon::collectors
