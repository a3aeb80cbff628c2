#include "daemon/exporter/exporter_flags.h"

#include <fmt/format.h>

#include <cstdio>

#include "daemon/common/cli_validators.h"
#include "daemon/common/config_path.h"
#include "daemon/common/flags.h"
#include "daemon/common/tls_flags.h"
#include "daemon/exporter/web_config.h"

namespace accelmon {

using namespace cli;

namespace {

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
                                    .max_future = *ParseDuration(f.max_clock_skew),
                                    .trim = {.series_per_node = f.series_per_node}},
                         .max_recv_msg_size = static_cast<int>(*ParseByteSize(f.max_recv_msg_size)),
                         .max_reports_per_second = f.max_reports_per_second,
                         .web_limits = {.max_connections = f.web_max_connections,
                                        .read_timeout = *ParseDuration(f.web_read_timeout)}};
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

}  // namespace

std::optional<ExporterOptions> LoadExporterOptions(const ExporterFlags& f, std::string* error) {
  ExporterOptions options = ToExporterOptions(f);
  options.grpc_tls = f.grpc_tls;
  std::erase(options.grpc_tls.reader_names, std::string());  // a config file's "": nobody
  if (auto tls_error = CheckServerTls(options.grpc_tls)) {
    *error = *tls_error;
    return std::nullopt;
  }
  if (!f.web_config_file.empty()) {
    if (auto bad = CheckConfigFilePath("--web.config.file", f.web_config_file)) {
      *error = *bad;
      return std::nullopt;
    }
    try {
      options.web_config = LoadWebConfig(f.web_config_file);
    } catch (const WebConfigError& e) {
      *error = e.what();
      return std::nullopt;
    }
  }
  if (f.no_diagnostics) {
    options.diagnostics.reset();
  } else if (!f.diagnostics_config.empty()) {
    if (auto bad = CheckConfigFilePath("--diagnostics.config", f.diagnostics_config)) {
      *error = *bad;
      return std::nullopt;
    }
    try {
      options.diagnostics = diagnostics::LoadConfig(f.diagnostics_config);  // "FILE:LINE: what"
      options.diagnostics_config_file = f.diagnostics_config;
    } catch (const diagnostics::ConfigError& e) {
      *error = e.what();
      return std::nullopt;
    }
  }
  if (!f.record_dir.empty()) {
    // The same rule as --spool.dir: a directory that cannot be made or written is a usage error.
    if (auto bad = PrepareWritableDirectory("--record.dir", f.record_dir)) {
      *error = *bad;
      return std::nullopt;
    }
    options.recording = ToRecorderOptions(f, error);
    if (!options.recording) return std::nullopt;
  }
  return options;
}

std::optional<ExporterOptions> LoadExporterOptions(const ExporterFlags& f) {
  std::string error;
  auto options = LoadExporterOptions(f, &error);
  if (!options) std::fprintf(stderr, "accelmon: %s\n", error.c_str());
  return options;
}

void AddExporterFlags(CLI::App& cmd, ExporterFlags& f) {
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
  // Limits on what agents send (docs/limits.md).
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
  cmd.add_option("--limits.series-per-node", f.series_per_node,
                 "Series one node's report may add to /metrics; beyond it the least telling parts "
                 "are dropped (sensors, links, processes, devices) and counted in "
                 "accelmon_exporter_ingest_dropped_total{reason=\"series_budget\"}")
      ->check(CLI::Range(size_t{100}, size_t{10'000'000}))
      ->capture_default_str();
  cmd.add_option("--grpc.max-reports-per-second", f.max_reports_per_second,
                 "Per agent stream; a faster stream is read more slowly (agents send 1 per "
                 "--collect.interval, more while catching up after an outage)")
      ->check(CLI::Range(0.001, 1e6))
      ->capture_default_str();
  cmd.add_option("--web.config.file", f.web_config_file,
                 "Prometheus exporter-toolkit web config (YAML): TLS and basic auth for /metrics; "
                 "/healthz stays open");
  cmd.add_option("--web.max-connections", f.web_max_connections,
                 "HTTP connections served at once (one thread each); more wait for a free one")
      ->check(CLI::Range(4, 65'536))
      ->capture_default_str();
  cmd.add_option("--web.read-timeout", f.web_read_timeout,
                 "Close an HTTP connection whose request header has not arrived in full after "
                 "this long (slow or idle clients); also bounds writing one response")
      ->check(kDuration)
      ->capture_default_str();
  cmd.add_option(
      "--diagnostics.config", f.diagnostics_config,
      "YAML thresholds of the diagnostics rules (docs/diagnostics.md); default: built-in");
  cmd.add_flag("--no-diagnostics", f.no_diagnostics,
               "Run no diagnostics rules (no accelmon_diagnosis_* series, no findings)");
  cmd.add_flag("--web.enable-lifecycle", f.web_enable_lifecycle,
               "Reload the configuration on POST /-/reload (behind the web config's TLS and basic "
               "auth), as SIGHUP does; off: 403");
}

void AddRecordFlags(CLI::App& cmd, ExporterFlags& f) {
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

}  // namespace accelmon
