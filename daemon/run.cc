#include "daemon/run.h"

#include <fmt/format.h>
#include <pthread.h>
#include <spdlog/spdlog.h>

#include <csignal>
#include <cstdio>
#include <memory>
#include <stdexcept>

#include "collectors/sim.h"
#include "daemon/agent.h"
#include "daemon/exporter.h"
#include "daemon/push_service.h"
#include "daemon/spool.h"
#include "daemon/web_config.h"

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
                         .node_expire_after = *ParseDuration(f.expire_after),
                         .limits = {.max_devices = f.max_devices_per_node,
                                    .max_links = f.max_links_per_node,
                                    .max_future = *ParseDuration(f.max_clock_skew)},
                         .max_recv_msg_size = static_cast<int>(*ParseByteSize(f.max_recv_msg_size)),
                         .max_reports_per_second = f.max_reports_per_second};
}

// The --record.* flags (checked by the CLI already; checked again for other callers).
std::optional<recording::RecorderOptions> ToRecorderOptions(const ExporterFlags& f,
                                                            std::string* error) {
  const auto segment_bytes = ParseByteSize(f.record_segment_size);
  const auto max_bytes = ParseByteSize(f.record_max_size);
  // "0" (off, or after every write) needs no unit.
  const auto duration_or_zero = [](const std::string& text) {
    return text == "0" ? std::optional(std::chrono::milliseconds(0)) : ParseDuration(text);
  };
  const auto retention = duration_or_zero(f.record_retention);
  const auto sync_interval = duration_or_zero(f.record_sync_interval);
  const auto bad = [&](const char* flag, const std::string& value, const char* what) {
    *error = fmt::format("{} \"{}\" is not {}", flag, value, what);
    return std::nullopt;
  };
  if (!segment_bytes || *segment_bytes == 0) {
    return bad("--record.segment-size", f.record_segment_size, "a size");
  }
  if (!max_bytes) return bad("--record.max-size", f.record_max_size, "a size");
  if (!retention) return bad("--record.retention", f.record_retention, "a duration");
  if (!sync_interval) return bad("--record.sync-interval", f.record_sync_interval, "a duration");
  if (f.record_compression != "zstd" && f.record_compression != "none") {
    return bad("--record.compression", f.record_compression, "zstd or none");
  }
  recording::RecorderOptions r;
  r.recording.dir = f.record_dir;
  r.recording.writer = "exporter";
  r.recording.segment_bytes = *segment_bytes;
  r.recording.max_bytes = *max_bytes;
  r.recording.retention = *retention;
  r.recording.compression = f.record_compression == "zstd" ? recording::Compression::kZstd
                                                           : recording::Compression::kNone;
  r.sync_interval = *sync_interval;
  return r;
}

// Settings that name files are checked before anything starts; a bad one is a usage error.
std::optional<ExporterOptions> LoadExporterOptions(const ExporterFlags& f) {
  ExporterOptions options = ToExporterOptions(f);
  options.grpc_tls = f.grpc_tls;
  if (auto error = CheckServerTls(options.grpc_tls)) {
    std::fprintf(stderr, "accelmon: %s\n", error->c_str());
    return std::nullopt;
  }
  if (!f.web_config_file.empty()) {
    try {
      options.web_config = LoadWebConfig(f.web_config_file);
    } catch (const WebConfigError& e) {
      std::fprintf(stderr, "accelmon: %s\n", e.what());
      return std::nullopt;
    }
  }
  if (f.no_diagnostics) {
    options.diagnostics.reset();
  } else if (!f.diagnostics_config.empty()) {
    try {
      options.diagnostics = diagnostics::LoadConfig(f.diagnostics_config);  // "FILE:LINE: what"
      options.diagnostics_config_file = f.diagnostics_config;
    } catch (const diagnostics::ConfigError& e) {
      std::fprintf(stderr, "accelmon: %s\n", e.what());
      return std::nullopt;
    }
  }
  if (!f.record_dir.empty()) {
    std::string error;
    options.recording = ToRecorderOptions(f, &error);
    if (!options.recording) {
      std::fprintf(stderr, "accelmon: %s\n", error.c_str());
      return std::nullopt;
    }
  }
  return options;
}

// The allocator push table and its socket. Built before the collectors, stopped after them.
struct Push {
  std::unique_ptr<collectors::PushStore> store;  // null: pushes off
  std::unique_ptr<PushService> service;
};

// Serves the push socket. Returns false (exit 2, reason on stderr) when a socket set on the
// command line cannot be served; the default socket only warns and the agent runs without it.
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

// Reads --sim.scenario and checks it against --sim. False (exit 2, "FILE:LINE: what" on stderr)
// when it is bad; `scenario` stays null without the flag.
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

collectors::CollectorSet MakeCollectors(
    const CollectorFlags& f, collectors::PushStore* push = nullptr,
    std::shared_ptr<const collectors::Scenario> scenario = nullptr) {
  collectors::CollectorConfig config{
      .paths = collectors::PathResolver(f.procfs, f.sysfs),
      .sim_devices = f.sim_devices,
      .sim_seed = f.sim_seed.value_or(collectors::SimSeedForNode(f.node_name)),
      .sim_scenario = std::move(scenario),
      .node = f.node_name,
      .devices = true,
      .nvml_library = f.nvml_library,
      .dcmi_library = f.dcmi_library,
      .device_timeout = *ParseDuration(f.device_timeout),
      .push = push};
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

int RunAgent(const CollectorFlags& collector_flags,
             const std::vector<std::string>& exporter_addresses, const GrpcClientTls& tls,
             const SpoolFlags& spool_flags) {
  if (auto error = CheckClientTls(tls)) {
    std::fprintf(stderr, "accelmon: %s\n", error->c_str());
    return 2;
  }
  std::shared_ptr<const collectors::Scenario> scenario;
  if (!LoadSimScenario(collector_flags, scenario)) return 2;
  std::unique_ptr<Spool> spool;  // outlives the uplink
  AgentOptions agent_options = ToAgentOptions(collector_flags);
  if (!spool_flags.dir.empty()) {
    const SpoolOptions spool_options{
        .dir = spool_flags.dir,
        .max_bytes = ParseByteSize(spool_flags.max_bytes).value_or(SpoolOptions{}.max_bytes)};
    try {
      spool = std::make_unique<Spool>(spool_options, NewAgentInstanceId());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "accelmon: %s\n", e.what());
      return 2;
    }
    // The same instance, continuing its sequences: the exporter recognises re-sent reports.
    agent_options.instance_id = spool->instance_id();
    agent_options.last_sequence = spool->last_sequence();
    spdlog::info(
        "spool {} (at most {} bytes): instance {}, {} unacknowledged report(s) after sequence {}",
        spool_flags.dir, spool_options.max_bytes, spool->instance_id(), spool->unacknowledged(),
        spool->acknowledged());
  }
  const sigset_t signals = BlockShutdownSignals();
  Push push;  // outlives the agent and its collectors
  if (!StartPush(collector_flags, push)) return 2;
  Uplink uplink(UplinkOptions{.tls = tls,
                              .spool = spool.get(),
                              .exporter_addresses = exporter_addresses,
                              .node = collector_flags.node_name});
  Agent agent(std::move(agent_options),
              MakeCollectors(collector_flags, push.store.get(), std::move(scenario)), uplink);
  uplink.Start();
  agent.Start();
  spdlog::info("agent streaming to {}", fmt::join(exporter_addresses, ", "));
  WaitForSignal(signals);
  StopAgent(agent, uplink);
  const uint64_t unacknowledged = uplink.stats().pending;
  spdlog::info("agent stopped after sequence {}; {} report(s) unacknowledged{}",
               agent.last_sequence(), unacknowledged,
               unacknowledged == 0 ? "" : (spool ? ", kept in the spool" : ", lost"));
  return 0;
}

int RunExporter(const ExporterFlags& flags) {
  auto options = LoadExporterOptions(flags);
  if (!options) return 2;
  const sigset_t signals = BlockShutdownSignals();
  Exporter exporter(std::move(*options));
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
  auto options = LoadExporterOptions(exporter_flags);
  if (!options) return 2;
  std::shared_ptr<const collectors::Scenario> scenario;
  if (!LoadSimScenario(collector_flags, scenario)) return 2;
  const bool https = options->web_config.tls;
  const sigset_t signals = BlockShutdownSignals();
  Push push;  // outlives the agent and its collectors
  if (!StartPush(collector_flags, push)) return 2;
  Exporter exporter(std::move(*options));
  try {
    exporter.Start();
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    return 1;
  }
  Uplink uplink(
      UplinkOptions{.exporter_address = "127.0.0.1:" + std::to_string(exporter.grpc_port())});
  Agent agent(ToAgentOptions(collector_flags),
              MakeCollectors(collector_flags, push.store.get(), std::move(scenario)), uplink);
  uplink.Start();
  agent.Start();

  // The port actually bound, so that ":0" prints something usable.
  auto web = *ParseHostPort(exporter_flags.web_listen, nullptr);
  if (web.host.empty() || web.host == "0.0.0.0") web.host = "localhost";
  web.port = static_cast<uint16_t>(exporter.web_port());
  std::printf("accelmon standalone: metrics at %s://%s/metrics (Ctrl-C to stop)\n",
              https ? "https" : "http", web.ToString().c_str());
  std::fflush(stdout);

  WaitForSignal(signals);
  StopAgent(agent, uplink);
  exporter.Stop();
  return 0;
}

}  // namespace accelmon
