// `accelmon replay`: feeds a recording back, either into a running exporter over the agents'
// own Ingest.Stream, as if its nodes were live, or into OpenMetrics files for Prometheus backfill
// (promtool tsdb create-blocks-from openmetrics).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "daemon/common/tls.h"
#include "daemon/tools/openmetrics_writer.h"
#include "recording/merged_reader.h"

namespace accelmon {

class Progress;

struct ReplayOptions {
  std::string exporter_address;  // HOST:PORT
  GrpcClientTls tls{};
  // Reports are sent at their recorded spacing divided by this; 0 sends as fast as the exporter
  // acknowledges (and its --grpc.max-reports-per-second lets each stream go).
  double speed = 1;
  // Moves every timestamp so the first report is stamped now and the rest follow at the replay's
  // pace, so that dashboards show the replay as current.
  bool shift_to_now = false;
  std::chrono::milliseconds connect_timeout{5000};
  // Reports sent to one node's stream and not yet acknowledged; the reader waits beyond it.
  size_t max_unacknowledged_per_node = 256;
};

struct ReplayResult {
  uint64_t read = 0;  // reports read from the input
  uint64_t sent = 0;
  uint64_t applied = 0;
  uint64_t duplicate = 0;
  uint64_t rejected = 0;
  std::map<std::string, uint64_t> rejected_reasons;
  size_t nodes = 0;  // streams opened, one per node
  std::chrono::duration<double> elapsed{};
  // Why reports went unacknowledged: the exporter unreachable, a stream ended early.
  std::vector<std::string> errors;

  uint64_t acknowledged() const { return applied + duplicate + rejected; }
};

// Streams every report of `reader` (one recording or several merged), one gRPC stream per node, and
// waits for every ack. Never throws for network trouble: it ends up in `errors`.
ReplayResult ReplayToExporter(recording::MergedReader& reader, const ReplayOptions& options,
                              Progress* progress = nullptr);

// Renders every report of `reader` into OpenMetrics files in `out_dir` (see
// OpenMetricsWriter), at their recorded timestamps. Throws std::runtime_error when a file cannot
// be written.
OpenMetricsWriter::Summary ReplayToOpenMetrics(recording::MergedReader& reader,
                                               const std::string& out_dir,
                                               Progress* progress = nullptr);

// Stamps reports for replay: unchanged, or shifted so the first one is `now` and later ones keep
// their distance from it divided by `speed` (0: undivided).
class TimeShift {
 public:
  TimeShift(bool enabled, double speed) : enabled_(enabled), speed_(speed) {}
  // `first` is the first report's timestamp (ns since the epoch); `now` the replay's start.
  void Start(int64_t first_ns, int64_t now_ns);
  int64_t Apply(int64_t ns) const;

 private:
  const bool enabled_;
  const double speed_;
  int64_t first_ns_ = 0;
  int64_t now_ns_ = 0;
};

}  // namespace accelmon
