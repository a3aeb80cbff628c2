// Running each role until SIGINT or SIGTERM. Each returns the process exit code.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "daemon/flags.h"
#include "daemon/tls.h"

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
};

struct ExporterFlags {
  std::string web_listen = ":9477";
  std::string grpc_listen = ":9478";
  std::string expire_after = "10m";
  // What the exporter takes from agents (see ValidationLimits).
  std::string max_recv_msg_size = "1MiB";
  size_t max_devices_per_node = 64;
  size_t max_links_per_node = 512;
  std::string max_clock_skew = "5m";
  double max_reports_per_second = 50;
  GrpcServerTls grpc_tls{};     // exporter only
  std::string web_config_file;  // exporter-toolkit web config: TLS and basic auth for /metrics
  // Thresholds of the diagnostics rules (YAML; empty: built-in); a bad file exits 2.
  std::string diagnostics_config;
  bool no_diagnostics = false;
  // The flight recorder (--record.*); an empty dir turns it off. A bad value exits 2; a directory
  // that cannot be created, written or locked (another exporter records into it) exits 1, like a
  // port in use.
  std::string record_dir;
  std::string record_segment_size = "64MiB";
  std::string record_max_size = "10GiB";  // 0: no limit
  std::string record_retention = "7d";    // 0: forever
  std::string record_sync_interval = "100ms";
  std::string record_compression = "zstd";  // or "none"
};

// The agent's disk spool; an empty dir keeps reports in memory only.
struct SpoolFlags {
  std::string dir;
  std::string max_bytes = "256MiB";
};

// A bad TLS, web config or spool setting exits 2 before anything starts.
// Several exporter addresses: the agent picks one by rendezvous hashing of its node name.
int RunAgent(const CollectorFlags& collectors, const std::vector<std::string>& exporter_addresses,
             const GrpcClientTls& tls = {}, const SpoolFlags& spool = {});
int RunExporter(const ExporterFlags& exporter);
int RunStandalone(const CollectorFlags& collectors, const ExporterFlags& exporter);

}  // namespace accelmon
