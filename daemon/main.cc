// accelmon: one binary, subcommands for each role (as Thanos and promtool do).
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "daemon/cli_validators.h"
#include "daemon/diagnose_command.h"
#include "daemon/loadgen_command.h"
#include "daemon/record_commands.h"
#include "daemon/run.h"
#include "daemon/simulate_command.h"
#include "daemon/version.h"

namespace {

using namespace accelmon::cli;

std::string HostName() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') return "localhost";
  return buf;
}

void AddCollectorFlags(CLI::App& cmd, accelmon::CollectorFlags& f) {
  cmd.add_option("--node.name", f.node_name, "Node name reported for this host")
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
                 "YAML file of faults to inject into the simulated devices (README \"Fault "
                 "scenarios\")");
  cmd.add_option("--nvml.library", f.nvml_library,
                 "NVIDIA NVML library to load; NVIDIA collection is off when it cannot be loaded")
      ->capture_default_str();
  cmd.add_option("--dcmi.library", f.dcmi_library,
                 "Huawei Ascend DCMI library to load; Ascend collection is off when it cannot be "
                 "loaded")
      ->capture_default_str();
  cmd.add_option("--collect.device-timeout", f.device_timeout,
                 "Give up on a device collector's tick after this long (a hung driver call)")
      ->check(kDuration)
      ->capture_default_str();
  // Allocator statistics pushed by training processes (README "Device memory fragmentation").
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
}

void AddExporterFlags(CLI::App& cmd, accelmon::ExporterFlags& f) {
  cmd.add_option("--web.listen-address", f.web_listen, "Address for /metrics and /healthz")
      ->check(kHostPort)
      ->capture_default_str();
  cmd.add_option("--grpc.listen-address", f.grpc_listen, "Address for agent streams (gRPC)")
      ->check(kHostPort)
      ->capture_default_str();
  cmd.add_option("--node.expire-after", f.expire_after,
                 "Drop a silent node's series from /metrics after this long")
      ->check(kDuration)
      ->capture_default_str();
  // Limits on what agents send (README "Limits and bad input").
  cmd.add_option("--grpc.max-recv-msg-size", f.max_recv_msg_size,
                 "Largest report accepted; a larger one ends its stream (RESOURCE_EXHAUSTED) and "
                 "the agent drops it")
      ->check(kMessageSize)
      ->capture_default_str();
  cmd.add_option("--grpc.max-devices-per-node", f.max_devices_per_node,
                 "Reject reports with more devices than this")
      ->check(CLI::Range(size_t{1}, size_t{1'000'000}))
      ->capture_default_str();
  cmd.add_option("--grpc.max-links-per-node", f.max_links_per_node,
                 "Reject reports with more links (device and host links together) than this")
      ->check(CLI::Range(size_t{1}, size_t{1'000'000}))
      ->capture_default_str();
  cmd.add_option("--grpc.max-clock-skew", f.max_clock_skew,
                 "Reject reports timestamped further than this ahead of the exporter's clock")
      ->check(kDuration)
      ->capture_default_str();
  cmd.add_option("--grpc.max-reports-per-second", f.max_reports_per_second,
                 "Per agent stream; a faster stream is read more slowly (agents send 1 per "
                 "--collect.interval, more while catching up after an outage)")
      ->check(CLI::Range(0.001, 1e6))
      ->capture_default_str();
  cmd.add_option("--web.config.file", f.web_config_file,
                 "Prometheus exporter-toolkit web config (YAML): TLS and basic auth for /metrics; "
                 "/healthz stays open");
  cmd.add_option(
      "--diagnostics.config", f.diagnostics_config,
      "YAML thresholds of the diagnostics rules (docs/diagnostics.md); default: built-in");
  cmd.add_flag("--no-diagnostics", f.no_diagnostics,
               "Run no diagnostics rules (no accelmon_diagnosis_* series, no findings)");
}

void AddRecordFlags(CLI::App& cmd, accelmon::ExporterFlags& f) {
  cmd.add_option("--record.dir", f.record_dir,
                 "Record every applied report into this directory (the flight recorder; "
                 "default: off); agents are acknowledged once a report is written");
  cmd.add_option("--record.segment-size", f.record_segment_size,
                 "Begin a new segment file beyond this size")
      ->check(kSegmentSize)
      ->capture_default_str();
  cmd.add_option("--record.max-size", f.record_max_size,
                 "Delete the oldest segments beyond this total size (0: no limit)")
      ->check(kSizeOrZero)
      ->capture_default_str();
  cmd.add_option("--record.retention", f.record_retention,
                 "Delete segments whose newest report is older than this (0: keep forever)")
      ->check(kDurationOrZero)
      ->capture_default_str();
  cmd.add_option("--record.sync-interval", f.record_sync_interval,
                 "Group commit: fdatasync the recording at most this often (0: after every "
                 "write); acks wait for it")
      ->check(kDurationOrZero)
      ->capture_default_str();
  cmd.add_option("--record.compression", f.record_compression, "Compression of each record")
      ->check(CLI::IsMember({"zstd", "none"}))
      ->capture_default_str();
}

// Ingest TLS; certificate files are re-read when they change (checked every 10s).
void AddGrpcServerTlsFlags(CLI::App& cmd, accelmon::GrpcServerTls& f) {
  cmd.add_option("--grpc.tls-cert", f.cert_file,
                 "PEM certificate (chain) for agent streams; TLS when set (with --grpc.tls-key)");
  cmd.add_option("--grpc.tls-key", f.key_file, "PEM private key of --grpc.tls-cert");
  cmd.add_option("--grpc.tls-client-ca", f.client_ca_file,
                 "PEM CA bundle: require and verify agents' client certificates (mutual TLS); a "
                 "report's node must then match the certificate's DNS name (or common name)");
}

void AddGrpcClientTlsFlags(CLI::App& cmd, accelmon::GrpcClientTls& f) {
  cmd.add_flag("--exporter.tls", f.enabled,
               "Connect with TLS (implied by any other --exporter.tls-* flag); default plain text");
  cmd.add_option("--exporter.tls-ca", f.ca_file,
                 "PEM CA bundle to verify the exporter with (default: the system's roots)");
  cmd.add_option("--exporter.tls-cert", f.cert_file,
                 "PEM client certificate for mutual TLS (with --exporter.tls-key)");
  cmd.add_option("--exporter.tls-key", f.key_file, "PEM private key of --exporter.tls-cert");
  cmd.add_option("--exporter.tls-server-name", f.server_name,
                 "Name to verify in the exporter's certificate when it differs from the address");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "accelmon: monitoring and diagnostics for GPU and NPU training clusters.\n"
      "Agents collect device and host telemetry on every node and stream it to an exporter,\n"
      "which serves Prometheus /metrics. `standalone` runs both in one process."};
  app.set_version_flag("--version", std::string("accelmon ") + accelmon::kVersion);
  app.require_subcommand(1);
  app.fallthrough();  // global flags (--log.level) also after the subcommand
  app.failure_message([](const CLI::App*, const CLI::Error& e) {
    return std::string("accelmon: ") + e.what() + " (see --help)\n";
  });

  std::string log_level = "info";
  app.add_option("--log.level", log_level, "Log level")
      ->check(CLI::IsMember({"debug", "info", "warn", "error"}))
      ->capture_default_str();

  accelmon::CollectorFlags collector_flags;
  collector_flags.node_name = HostName();
  accelmon::ExporterFlags exporter_flags;
  std::vector<std::string> exporter_addresses{"localhost:9478"};
  accelmon::SpoolFlags spool_flags;

  CLI::App* agent =
      app.add_subcommand("agent", "Collect this node's telemetry and stream it to an exporter");
  AddCollectorFlags(*agent, collector_flags);
  agent
      ->add_option("--exporter.address", exporter_addresses,
                   "Exporter to stream to; several (repeated or comma-separated): the one ranked "
                   "first for this node by rendezvous hashing, failing over down the ranking")
      ->delimiter(',')
      ->allow_extra_args(false)
      ->check(kConnectAddress)
      ->capture_default_str();
  agent
      ->add_option("--spool.dir", spool_flags.dir,
                   "Keep unacknowledged reports in this directory across exporter outages and "
                   "agent restarts (recommended: /var/lib/accelmon/spool; default: memory only)")
      ->capture_default_str();
  agent
      ->add_option("--spool.max-bytes", spool_flags.max_bytes,
                   "Disk the spool may use; beyond it the oldest reports are dropped")
      ->check(kSpoolSize)
      ->capture_default_str();
  accelmon::GrpcClientTls agent_tls;
  AddGrpcClientTlsFlags(*agent, agent_tls);

  CLI::App* exporter =
      app.add_subcommand("exporter", "Receive agents' streams and serve Prometheus /metrics");
  AddExporterFlags(*exporter, exporter_flags);
  AddRecordFlags(*exporter, exporter_flags);
  AddGrpcServerTlsFlags(*exporter, exporter_flags.grpc_tls);

  accelmon::ExporterFlags standalone_exporter_flags;
  // In one process the ingest port only needs to be reachable from this host.
  standalone_exporter_flags.grpc_listen = "127.0.0.1:0";
  CLI::App* standalone = app.add_subcommand(
      "standalone", "Agent and exporter in one process on this host: the first thing to run");
  AddCollectorFlags(*standalone, collector_flags);
  AddExporterFlags(*standalone, standalone_exporter_flags);
  AddRecordFlags(*standalone, standalone_exporter_flags);

  accelmon::RecordingCommands recording_commands;  // record inspect|verify|export|import, replay
  accelmon::AddRecordingCommands(app, recording_commands);
  accelmon::LoadgenCommand loadgen_command;  // simulated agents against an exporter
  accelmon::AddLoadgenCommand(app, loadgen_command);
  accelmon::DiagnoseCommand diagnose_command;  // the diagnostics rules over a recording
  accelmon::AddDiagnoseCommand(app, diagnose_command);
  accelmon::SimulateCommand simulate_command;  // a simulated fleet's reports, faster than real time
  accelmon::AddSimulateCommand(app, simulate_command);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;  // usage errors exit 2, as the Prometheus tools do
  }

  auto logger = spdlog::stderr_color_mt("accelmon");
  spdlog::set_default_logger(logger);
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e%z %^%-5l%$ %v");
  spdlog::set_level(spdlog::level::from_str(log_level));

  if (auto rc = accelmon::RunRecordingCommand(recording_commands)) return *rc;
  if (auto rc = accelmon::RunLoadgenCommand(loadgen_command)) return *rc;
  if (auto rc = accelmon::RunDiagnoseCommand(diagnose_command)) return *rc;
  if (auto rc = accelmon::RunSimulateCommand(simulate_command)) return *rc;

  // Only a socket named on the command line is worth stopping for when it cannot be served.
  CLI::App* collecting = agent->parsed() ? agent : standalone;
  collector_flags.push.socket_set = collecting->count("--push.socket") > 0;

  if (agent->parsed()) {
    agent_tls.enabled = agent_tls.enabled || !agent_tls.ca_file.empty() ||
                        !agent_tls.cert_file.empty() || !agent_tls.server_name.empty();
    return accelmon::RunAgent(collector_flags, exporter_addresses, agent_tls, spool_flags);
  }
  if (exporter->parsed()) return accelmon::RunExporter(exporter_flags);
  return accelmon::RunStandalone(collector_flags, standalone_exporter_flags);
}
