// The exporter's flags and how they become ExporterOptions: shared by `accelmon exporter`,
// `standalone` and the reloader, which parses them again.
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>

#include "daemon/common/tls.h"
#include "daemon/exporter/exporter.h"

namespace accelmon {

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
  size_t series_per_node = 20'000;
  GrpcServerTls grpc_tls{};     // exporter only
  std::string web_config_file;  // exporter-toolkit web config: TLS and basic auth for /metrics
  // Thresholds of the diagnostics rules (YAML; empty: built-in); a bad file exits 2.
  std::string diagnostics_config;
  bool no_diagnostics = false;
  // What one HTTP client may hold (docs/security.md): a worker thread per connection, and the
  // time a request's header may take before the connection is closed.
  // Each idle thread costs about 20 KiB, and civetweb starts them all with the server: 1000 slow
  // clients want 1024 (bench/README.md, "Slow clients"; docs/security.md).
  int web_max_connections = 256;
  std::string web_read_timeout = "10s";
  // POST /-/reload reloads the configuration (as Prometheus' flag); off: 403.
  bool web_enable_lifecycle = false;
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

// Listen addresses, expiry, limits, web config and diagnostics (exporter and standalone).
void AddExporterFlags(CLI::App& cmd, ExporterFlags& f);
// The flight recorder's --record.* flags.
void AddRecordFlags(CLI::App& cmd, ExporterFlags& f);

// Settings that name files are checked before anything starts; a bad one is a usage error
// (exit 2), said on stderr.
std::optional<ExporterOptions> LoadExporterOptions(const ExporterFlags& f);
// The same, for a reload: the reason in `error` instead.
std::optional<ExporterOptions> LoadExporterOptions(const ExporterFlags& f, std::string* error);

}  // namespace accelmon
