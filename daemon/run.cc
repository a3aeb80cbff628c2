#include "daemon/run.h"

#include <pthread.h>
#include <spdlog/spdlog.h>

#include <csignal>
#include <cstdio>
#include <stdexcept>

#include "collectors/sim.h"
#include "daemon/agent.h"
#include "daemon/exporter.h"

namespace accelmon {
namespace {

// Blocks SIGINT/SIGTERM in this thread and every thread started after it, so that only
// WaitForSignal() sees them. Must run before any thread (gRPC's too) is started.
sigset_t BlockShutdownSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  return set;
}

void WaitForSignal(const sigset_t& set) {
  int sig = 0;
  sigwait(&set, &sig);
  spdlog::info("received {}, shutting down", sig == SIGINT ? "SIGINT" : "SIGTERM");
}

std::string ListenTarget(const std::string& flag) {
  // Validated by the CLI already.
  return ParseHostPort(flag, nullptr)->ToString("0.0.0.0");
}

ExporterOptions ToExporterOptions(const ExporterFlags& f) {
  return ExporterOptions{.web_listen_address = ListenTarget(f.web_listen),
                         .grpc_listen_address = ListenTarget(f.grpc_listen),
                         .node_expire_after = *ParseDuration(f.expire_after)};
}

collectors::CollectorSet MakeCollectors(const CollectorFlags& f) {
  collectors::CollectorConfig config{
      .paths = collectors::PathResolver(f.procfs, f.sysfs),
      .sim_devices = f.sim_devices,
      .sim_seed = f.sim_seed.value_or(collectors::SimSeedForNode(f.node_name)),
      .devices = true,
      .nvml_library = f.nvml_library,
      .dcmi_library = f.dcmi_library,
      .device_timeout = *ParseDuration(f.device_timeout)};
  return collectors::CollectorSet(collectors::CreateCollectors(config));
}

AgentOptions ToAgentOptions(const CollectorFlags& f) {
  return AgentOptions{.node = f.node_name, .interval = *ParseDuration(f.interval)};
}

// Gives the uplink a moment to deliver what was collected last, then stops it.
void StopAgent(Agent& agent, Uplink& uplink) {
  agent.Stop();
  uplink.WaitUntilDrained(std::chrono::seconds(2));
  uplink.Stop();
}

}  // namespace

int RunAgent(const CollectorFlags& collector_flags, const std::string& exporter_address) {
  const sigset_t signals = BlockShutdownSignals();
  Uplink uplink(UplinkOptions{.exporter_address = exporter_address});
  Agent agent(ToAgentOptions(collector_flags), MakeCollectors(collector_flags), uplink);
  uplink.Start();
  agent.Start();
  spdlog::info("agent streaming to {}", exporter_address);
  WaitForSignal(signals);
  StopAgent(agent, uplink);
  return 0;
}

int RunExporter(const ExporterFlags& flags) {
  const sigset_t signals = BlockShutdownSignals();
  Exporter exporter(ToExporterOptions(flags));
  try {
    exporter.Start();
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    return 1;
  }
  WaitForSignal(signals);
  exporter.Stop();
  return 0;
}

int RunStandalone(const CollectorFlags& collector_flags, const ExporterFlags& exporter_flags) {
  const sigset_t signals = BlockShutdownSignals();
  Exporter exporter(ToExporterOptions(exporter_flags));
  try {
    exporter.Start();
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    return 1;
  }
  Uplink uplink(
      UplinkOptions{.exporter_address = "127.0.0.1:" + std::to_string(exporter.grpc_port())});
  Agent agent(ToAgentOptions(collector_flags), MakeCollectors(collector_flags), uplink);
  uplink.Start();
  agent.Start();

  // The port actually bound, so that ":0" prints something usable.
  auto web = *ParseHostPort(exporter_flags.web_listen, nullptr);
  if (web.host.empty() || web.host == "0.0.0.0") web.host = "localhost";
  web.port = static_cast<uint16_t>(exporter.web_port());
  std::printf("accelmon standalone: metrics at http://%s/metrics (Ctrl-C to stop)\n",
              web.ToString().c_str());
  std::fflush(stdout);

  WaitForSignal(signals);
  StopAgent(agent, uplink);
  exporter.Stop();
  return 0;
}

}  // namespace accelmon
