#include "daemon/agent/agent_command.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdio>
#include <stdexcept>
#include <utility>
#include <vector>

#include "collectors/sim.h"
#include "daemon/agent/spool.h"
#include "daemon/common/cli_validators.h"
#include "daemon/common/empty_values.h"
#include "daemon/common/exit_codes.h"
#include "daemon/common/flags.h"
#include "daemon/common/reload.h"
#include "daemon/common/sd_notify.h"
#include "daemon/common/shutdown_signals.h"
#include "daemon/common/tls_flags.h"

namespace accelmon {

using namespace cli;

std::string HostName() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') return "localhost";
  return buf;
}

void AddCollectorFlags(CLI::App& cmd, CollectorFlags& f) {
  cmd.add_option("--node.name", f.node_name, "Node name reported for this host")
      ->check(kNotEmpty)
      ->default_str("hostname: " + f.node_name);
  cmd.add_option("--collect.interval", f.interval, "How often to collect and report")
      ->check(kDuration)
      ->capture_default_str();
  cmd.add_option("--path.procfs", f.procfs, "procfs mount point")
      ->check(kDirectory)
      ->capture_default_str();
  cmd.add_option("--path.sysfs", f.sysfs, "sysfs mount point")
      ->check(kDirectory)
      ->capture_default_str();
  cmd.add_option("--sim", f.sim_devices, "Add N simulated accelerators (demos, tests)")
      ->check(CLI::Range(0, 64))
      ->capture_default_str();
  cmd.add_option("--sim.seed", f.sim_seed,
                 "Seed of the simulated devices (default: derived from the node name)");
  cmd.add_option("--sim.scenario", f.sim_scenario,
                 "YAML file of faults to inject into the simulated devices "
                 "(docs/simulation.md)");
  cmd.add_option("--nvml.library", f.nvml_library,
                 "NVIDIA NVML library to load; NVIDIA collection is off when it cannot be loaded")
      ->check(kNotEmpty)
      ->capture_default_str();
  cmd.add_option("--dcmi.library", f.dcmi_library,
                 "Huawei Ascend DCMI library to load; Ascend collection is off when it cannot be "
                 "loaded")
      ->check(kNotEmpty)
      ->capture_default_str();
  cmd.add_option("--collect.device-timeout", f.device_timeout,
                 "Give up on a device collector's tick after this long (a hung driver call)")
      ->check(kDuration)
      ->capture_default_str();
  // Allocator statistics pushed by training processes (docs/fragmentation.md).
  cmd.add_option("--push.socket", f.push.socket,
                 "Unix socket where training processes push allocator statistics (mode 0660; "
                 "\"\" turns it off)")
      ->capture_default_str();
  cmd.add_option("--push.max-processes-per-device", f.push.max_processes_per_device,
                 "Refuse pushes from more processes than this per device")
      ->check(CLI::Range(size_t{1}, size_t{256}))
      ->capture_default_str();
  cmd.add_option("--push.expire-after", f.push.expire_after,
                 "Forget a process that has not pushed for this long (or whose pid is gone)")
      ->check(kDuration)
      ->capture_default_str();
  // Attribution of devices to processes, users and Slurm jobs (docs/jobs.md).
  cmd.add_option("--processes.max-per-device", f.processes_max_per_device,
                 "Report at most this many processes per device, and pids per holder (those "
                 "using the most device memory, pushing processes first)")
      ->check(CLI::Range(size_t{1}, size_t{256}))
      ->capture_default_str();
  cmd.add_flag_callback(
         "--collector.processes", [&f] { f.processes = true; },
         "Who uses each device: NVML and amdgpu processes, their user, command and Slurm job "
         "from /proc (default: enabled)")
      ->trigger_on_parse()
      ->group("Collectors");
  cmd.add_flag_callback(
         "--no-collector.processes", [&f] { f.processes = false; },
         "Do not run the processes collector")
      ->trigger_on_parse()
      ->group("Collectors");
  // Kubernetes attribution (docs/jobs.md "Kubernetes").
  cmd.add_option("--kubelet.pod-resources-socket", f.kubelet_socket,
                 "The kubelet's pod-resources socket, to label devices with the pods they are "
                 "assigned to (off while it does not exist; \"\" turns it off)")
      ->capture_default_str();
  cmd.add_option("--kubelet.timeout", f.kubelet_timeout,
                 "How long a tick waits for the kubelet's answer (no pods that tick; no wait while "
                 "it is slow)")
      ->check(kDuration)
      ->capture_default_str();
  cmd.add_option("--kubelet.cdi-spec-dirs", f.kubelet_cdi_spec_dirs,
                 "Where DRA drivers write their CDI specs: which device each claim's CDI devices "
                 "are (\"\" leaves devices assigned through DRA out)")
      ->delimiter(',')
      ->capture_default_str();
  cmd.add_option("--kubelet.pod-logs-dir", f.kubelet_pod_logs_dir,
                 "The kubelet's pod log directory (its podLogsDirectory), whose "
                 "NAMESPACE_POD_UID entries give each pod's uid (\"\": no pod uids)")
      ->capture_default_str();
  // NCCL's own view of its collectives (docs/jobs.md "NCCL RAS").
  cmd.add_option("--nccl-ras.address", f.nccl_ras_addresses,
                 "NCCL RAS ports to ask each interval, host:port or a port (one per job whose "
                 "NCCL_RAS_ADDR differs; \"\" turns it off)")
      ->delimiter(',')
      ->capture_default_str();
  cmd.add_option("--nccl-ras.timeout", f.nccl_ras_timeout,
                 "Give up on a RAS answer after this long (asked off the collection tick, which "
                 "never waits for it)")
      ->check(kDuration)
      ->capture_default_str();
  // node_exporter's style: a pair of flags per host collector, generated from the one list.
  // Triggered as parsed, so that the last of --collector.X and --no-collector.X given wins.
  for (const collectors::HostCollectorInfo& info : collectors::HostCollectors()) {
    const std::string name(info.name);
    cmd.add_flag_callback(
           "--collector." + name, [&f, name] { f.host_collectors[name] = true; },
           fmt::format("{} (default: {})", info.help,
                       info.default_enabled ? "enabled" : "disabled"))
        ->trigger_on_parse()
        ->group("Collectors");
    cmd.add_flag_callback(
           "--no-collector." + name, [&f, name] { f.host_collectors[name] = false; },
           fmt::format("Do not run the {} collector", name))
        ->trigger_on_parse()
        ->group("Collectors");
  }
}

void NotePushSocketSet(const CLI::App& cmd, CollectorFlags& f) {
  // Only a socket named on the command line is worth stopping for when it cannot be served.
  f.push.socket_set = cmd.count("--push.socket") > 0;
}

bool StartPush(const CollectorFlags& f, Push& push) {
  if (f.push.socket.empty()) return true;
  push.store = std::make_unique<collectors::PushStore>(
      collectors::PushStoreOptions{.max_processes_per_device = f.push.max_processes_per_device,
                                   .expire_after = *ParseDuration(f.push.expire_after),
                                   .procfs = f.procfs});
  push.service = std::make_unique<PushService>(
      PushServiceOptions{.socket_path = f.push.socket,
                         .create_directory = f.push.socket == kDefaultPushSocket},
      *push.store);
  try {
    push.service->Start();
  } catch (const PushServiceError& e) {
    push.service.reset();
    push.store.reset();
    if (f.push.socket_set) {
      std::fprintf(stderr, "accelmon: %s\n", e.what());
      return false;
    }
    spdlog::warn(
        "{}; running without allocator pushes (set --push.socket, or \"\" to turn "
        "them off)",
        e.what());
  }
  return true;
}

bool LoadSimScenario(const CollectorFlags& f,
                     std::shared_ptr<const collectors::Scenario>& scenario) {
  if (f.sim_scenario.empty()) return true;
  if (f.sim_devices <= 0) {
    std::fprintf(stderr, "accelmon: --sim.scenario needs simulated devices (--sim N)\n");
    return false;
  }
  try {
    auto loaded =
        std::make_shared<const collectors::Scenario>(collectors::LoadScenario(f.sim_scenario));
    collectors::CheckSimScenario(*loaded, f.sim_devices);
    spdlog::info("sim: scenario {} with {} fault(s)", f.sim_scenario, loaded->faults.size());
    scenario = std::move(loaded);
  } catch (const collectors::ScenarioError& e) {
    std::fprintf(stderr, "accelmon: %s\n", e.what());
    return false;
  }
  return true;
}

namespace {
// `--nccl-ras.address ""` gives one empty address: none.
std::vector<std::string> NonEmpty(std::vector<std::string> addresses) {
  std::erase_if(addresses, [](const std::string& a) { return a.empty(); });
  return addresses;
}
}  // namespace

collectors::CollectorConfig MakeCollectorConfig(
    const CollectorFlags& f, collectors::PushStore* push,
    std::shared_ptr<const collectors::Scenario> scenario) {
  return collectors::CollectorConfig{
      .paths = collectors::PathResolver(f.procfs, f.sysfs),
      .host_collectors = f.host_collectors,
      .sim_devices = f.sim_devices,
      .sim_seed = f.sim_seed.value_or(collectors::SimSeedForNode(f.node_name)),
      .sim_scenario = std::move(scenario),
      .node = f.node_name,
      .devices = true,
      .nvml_library = f.nvml_library,
      .dcmi_library = f.dcmi_library,
      .device_timeout = *ParseDuration(f.device_timeout),
      .push = push,
      .processes = f.processes,
      .processes_options = {.max_per_device = f.processes_max_per_device},
      .kubelet_socket = f.kubelet_socket,
      .kubelet_timeout = *ParseDuration(f.kubelet_timeout),
      .kubelet_cdi_spec_dirs = NonEmpty(f.kubelet_cdi_spec_dirs),
      .kubelet_pod_logs_dir = f.kubelet_pod_logs_dir,
      .nccl_ras_addresses = NonEmpty(f.nccl_ras_addresses),
      .nccl_ras_timeout = *ParseDuration(f.nccl_ras_timeout),
      .interval = *ParseDuration(f.interval)};
}

collectors::CollectorSet MakeCollectors(const CollectorFlags& f, collectors::PushStore* push,
                                        std::shared_ptr<const collectors::Scenario> scenario) {
  return collectors::CollectorSet(
      collectors::CreateCollectors(MakeCollectorConfig(f, push, std::move(scenario))));
}

AgentOptions ToAgentOptions(const CollectorFlags& f) {
  return AgentOptions{.node = f.node_name, .interval = *ParseDuration(f.interval)};
}

void StopAgent(Agent& agent, Uplink& uplink) {
  agent.Stop();
  uplink.WaitUntilDrained(std::chrono::seconds(2));
  uplink.Stop();
}

namespace {

// The agent's disk spool; an empty dir keeps reports in memory only.
struct SpoolFlags {
  std::string dir;
  std::string max_bytes = "256MiB";
};

struct AgentCommand {
  CollectorFlags collectors;
  // Several exporter addresses: the agent picks one by rendezvous hashing of its node name.
  std::vector<std::string> exporter_addresses{"localhost:9478"};
  GrpcClientTls tls;
  SpoolFlags spool;
};

// A bad TLS, scenario, push socket or spool setting exits 2 before anything starts.
int RunAgent(AgentCommand& c, const AgentCommand& defaults) {
  if (auto error = CheckClientTls(c.tls)) {
    std::fprintf(stderr, "accelmon: %s\n", error->c_str());
    return kExitUsage;
  }
  std::shared_ptr<const collectors::Scenario> scenario;
  if (!LoadSimScenario(c.collectors, scenario)) return kExitUsage;
  std::unique_ptr<Spool> spool;  // outlives the uplink
  AgentOptions agent_options = ToAgentOptions(c.collectors);
  if (!c.spool.dir.empty()) {
    const SpoolOptions spool_options{
        .dir = c.spool.dir,
        .max_bytes = ParseByteSize(c.spool.max_bytes).value_or(SpoolOptions{}.max_bytes)};
    try {
      spool = std::make_unique<Spool>(spool_options, NewAgentInstanceId());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "accelmon: %s\n", e.what());
      return kExitUsage;
    }
    // The same instance, continuing its sequences: the exporter recognises re-sent reports.
    agent_options.instance_id = spool->instance_id();
    agent_options.last_sequence = spool->last_sequence();
    spdlog::info(
        "spool {} (at most {} bytes): instance {}, {} unacknowledged report(s) after sequence {}",
        c.spool.dir, spool_options.max_bytes, spool->instance_id(), spool->unacknowledged(),
        spool->acknowledged());
  }
  const sigset_t signals = BlockShutdownSignals();
  Push push;  // outlives the agent and its collectors
  if (!StartPush(c.collectors, push)) return kExitUsage;
  Uplink uplink(UplinkOptions{.tls = c.tls,
                              .spool = spool.get(),
                              .exporter_addresses = c.exporter_addresses,
                              .node = c.collectors.node_name});
  Agent agent(std::move(agent_options),
              MakeCollectors(c.collectors, push.store.get(), std::move(scenario)), uplink);
  // Ready once the first collection ran (the push socket already listens): the node has data
  // to send, whether or not an exporter is reachable yet (the uplink keeps it meanwhile).
  agent.set_report_observer([notified = false](const v1::NodeReport&) mutable {
    if (!std::exchange(notified, true)) SdNotify("READY=1\nSTATUS=collecting");
  });
  uplink.Start();
  agent.Start();
  spdlog::info("agent streaming to {}", fmt::join(c.exporter_addresses, ", "));
  // SIGHUP: the log level from the command line and config file parsed again (reload.h).
  const CommandLine* command_line = GetCommandLine();
  std::map<std::string, std::string> given;
  if (command_line != nullptr) given = GivenFlags(*command_line->app);
  WaitForShutdownSignal(signals, [&] {
    if (command_line == nullptr) return;
    TypedFlagsReparse<AgentCommand> reparse(*command_line, c, defaults);
    ReloadLogLevelOnly(reparse, given, "SIGHUP");
  });
  SdNotify("STOPPING=1");
  StopAgent(agent, uplink);
  const uint64_t unacknowledged = uplink.stats().pending;
  spdlog::info("agent stopped after sequence {}; {} report(s) unacknowledged{}",
               agent.last_sequence(), unacknowledged,
               unacknowledged == 0 ? "" : (spool ? ", kept in the spool" : ", lost"));
  return kExitOk;
}

}  // namespace

SubcommandRunner RegisterAgentCommand(CLI::App& app) {
  auto c = std::make_shared<AgentCommand>();
  c->collectors.node_name = HostName();
  CLI::App* cmd =
      app.add_subcommand("agent", "Collect this node's telemetry and stream it to an exporter");
  AddCollectorFlags(*cmd, c->collectors);
  cmd->add_option("--exporter.address", c->exporter_addresses,
                  "Exporter to stream to; several (repeated or comma-separated): the one ranked "
                  "first for this node by rendezvous hashing, failing over down the ranking")
      ->delimiter(',')
      ->allow_extra_args(false)
      ->check(kConnectAddress)
      ->capture_default_str();
  cmd->add_option("--spool.dir", c->spool.dir,
                  "Keep unacknowledged reports in this directory across exporter outages and "
                  "agent restarts (recommended: /var/lib/accelmon/spool; default: memory only)")
      ->capture_default_str();
  cmd->add_option("--spool.max-bytes", c->spool.max_bytes,
                  "Disk the spool may use; beyond it the oldest reports are dropped")
      ->check(kSpoolSize)
      ->capture_default_str();
  AddGrpcClientTlsFlags(*cmd, c->tls);
  auto defaults = std::make_shared<const AgentCommand>(*c);  // what a reload resets to
  return [c, defaults, cmd]() -> std::optional<int> {
    if (!cmd->parsed()) return std::nullopt;
    NotePushSocketSet(*cmd, c->collectors);
    ImplyClientTls(c->tls);
    return RunAgent(*c, *defaults);
  };
}

}  // namespace accelmon
