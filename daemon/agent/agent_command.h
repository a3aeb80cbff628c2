// `accelmon agent` on the command line: the collector flags, the uplink to the exporter and the
// spool, and the parts of a running agent that `standalone` builds the same way.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "collectors/registry.h"
#include "collectors/sim_scenario.h"
#include "daemon/agent/agent.h"
#include "daemon/agent/push_service.h"
#include "daemon/common/subcommand.h"

namespace accelmon {

// Allocator statistics pushed by training processes (push_service.h).
struct PushFlags {
  std::string socket = "/run/accelmon/agent.sock";  // empty: off
  // Given on the command line: failing to serve it stops start-up (the default only warns).
  bool socket_set = false;
  size_t max_processes_per_device = 64;
  std::string expire_after = "30s";
};

struct CollectorFlags {
  std::string node_name;
  std::string interval = "1s";
  std::string procfs = "/proc";
  std::string sysfs = "/sys";
  int sim_devices = 0;
  std::optional<uint64_t> sim_seed;
  std::string sim_scenario;  // --sim.scenario FILE: faults to inject; empty: none
  std::string nvml_library = "libnvidia-ml.so.1";
  std::string dcmi_library = "libdcmi.so";
  std::string device_timeout = "2s";
  PushFlags push{};
  // Who uses each device (docs/jobs.md): --no-collector.processes, --processes.max-per-device.
  bool processes = true;
  size_t processes_max_per_device = 64;
  // The kubelet's pod-resources API (collectors/kubelet.h); empty: no Kubernetes attribution.
  std::string kubelet_socket = "/var/lib/kubelet/pod-resources/kubelet.sock";
  std::string kubelet_timeout = "500ms";
  std::vector<std::string> kubelet_cdi_spec_dirs{"/etc/cdi", "/var/run/cdi"};
  std::string kubelet_pod_logs_dir = "/var/log/pods";
  // NCCL's RAS ports (collectors/nccl_ras.h); empty: not asked.
  std::vector<std::string> nccl_ras_addresses{"localhost:28028"};
  std::string nccl_ras_timeout = "5s";
  // --collector.<name> (true) and --no-collector.<name> (false), one pair per host collector in
  // collectors::HostCollectors(); the last one given for a name wins, and a collector not named
  // runs by its default.
  std::map<std::string, bool, std::less<>> host_collectors{};
};

// The flags of everything that collects on a node (agent and standalone). `f.node_name` is the
// default shown in --help.
void AddCollectorFlags(CLI::App& cmd, CollectorFlags& f);
// After parsing: whether --push.socket was given on `cmd`'s command line.
void NotePushSocketSet(const CLI::App& cmd, CollectorFlags& f);

// This host's name, the default --node.name.
std::string HostName();

// The allocator push table and its socket. Built before the collectors, stopped after them.
struct Push {
  std::unique_ptr<collectors::PushStore> store;  // null: pushes off
  std::unique_ptr<PushService> service;
};

// Serves the push socket. Returns false (exit 2, reason on stderr) when a socket set on the
// command line cannot be served; the default socket only warns and the agent runs without it.
bool StartPush(const CollectorFlags& f, Push& push);

// Reads --sim.scenario and checks it against --sim. False (exit 2, "FILE:LINE: what" on stderr)
// when it is bad; `scenario` stays null without the flag.
bool LoadSimScenario(const CollectorFlags& f,
                     std::shared_ptr<const collectors::Scenario>& scenario);

// What MakeCollectors builds from the flags (device collectors included).
collectors::CollectorConfig MakeCollectorConfig(
    const CollectorFlags& f, collectors::PushStore* push = nullptr,
    std::shared_ptr<const collectors::Scenario> scenario = nullptr);

collectors::CollectorSet MakeCollectors(
    const CollectorFlags& f, collectors::PushStore* push = nullptr,
    std::shared_ptr<const collectors::Scenario> scenario = nullptr);

AgentOptions ToAgentOptions(const CollectorFlags& f);

// Gives the uplink a moment to deliver what was collected last, then stops it.
void StopAgent(Agent& agent, Uplink& uplink);

SubcommandRunner RegisterAgentCommand(CLI::App& app);

}  // namespace accelmon
