// `accelmon loadgen`: a fleet of simulated agents in one process, to measure an exporter (or any
// server of Ingest.Stream) under load. Every node has its own stream, as a real agent does; the
// streams run on gRPC's callback API and share a few channels, so thousands of them need no
// thread each. Reports are simulated devices with links, serialised once per node ahead of time:
// each send only appends the sequence and timestamp, so the generator stays cheap next to the
// server it measures.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace accelmon {

struct LoadgenOptions {
  std::string exporter_address;  // HOST:PORT, plain text
  int nodes = 100;
  int devices = 8;
  // Links per device; 0 keeps what the simulator wires (a full NVLink mesh plus PCIe: 8 with 8
  // devices). More are added as extra NVLinks, fewer drop the last ones.
  int links_per_device = 0;
  // How often each node reports, its first report at a random point of the first interval so
  // the fleet is spread evenly. Zero: as fast as acks allow (saturation), with up to
  // `max_in_flight` unacknowledged reports per stream.
  std::chrono::milliseconds interval{1000};
  std::chrono::milliseconds duration{30'000};
  // Unacknowledged reports a stream may have; at an interval, a report due beyond it is skipped
  // (and counted), as a server that falls this far behind is already the answer.
  size_t max_in_flight = 64;
  int channels = 16;  // TCP connections the streams are spread over, round robin
  std::string node_prefix = "loadgen-";
  // After `duration`, how long to wait for the acks still due before cancelling the streams.
  std::chrono::milliseconds drain_timeout{10'000};
  std::chrono::milliseconds connect_timeout{5'000};
};

// Acknowledgement latency: from the moment a report is due (queued on its stream) to its ack.
struct LatencySummary {
  uint64_t count = 0;
  double p50_ms = 0;
  double p90_ms = 0;
  double p99_ms = 0;
  double max_ms = 0;
};

struct LoadgenResult {
  int nodes = 0;
  size_t report_bytes = 0;  // the wire size of one report (the first node's first)
  int links_per_device = 0;
  uint64_t sent = 0;
  uint64_t skipped = 0;  // due while `max_in_flight` were unacknowledged
  uint64_t applied = 0;
  uint64_t duplicate = 0;
  uint64_t rejected = 0;
  std::map<std::string, uint64_t> rejected_reasons;
  // Acks received within `duration` after the first report, and that window.
  uint64_t acked_in_window = 0;
  double window_seconds = 0;
  double reports_per_second = 0;
  double device_samples_per_second = 0;  // reports/s x devices
  LatencySummary ack_latency;
  double cpu_seconds = 0;  // this process, over the window
  // Why reports went unacknowledged: the server unreachable, streams that ended early.
  std::vector<std::string> errors;

  uint64_t acknowledged() const { return applied + duplicate + rejected; }
};

// One node's simulated reports as loadgen sends them (devices and links as `options` says),
// serialised without sequence and timestamp, which each send appends. Also what
// bench/parse_bench.cc parses: the ingest floor's "same bytes".
std::vector<std::string> LoadgenReportBodies(const std::string& node, const LoadgenOptions& options,
                                             int64_t start_ns);

// Runs the load for `options.duration`, then waits for the outstanding acks. Never throws for
// network trouble: it ends up in `errors`.
LoadgenResult RunLoadgen(const LoadgenOptions& options);

// The result as printed by `accelmon loadgen`: one "name: values" line per aspect, stable for
// scripts (bench/ingest_vs_echo.sh reads it).
std::string FormatLoadgenResult(const LoadgenOptions& options, const LoadgenResult& result);

}  // namespace accelmon
