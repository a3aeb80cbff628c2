// Turns a stream of NodeReports into OpenMetrics text files for Prometheus backfill
// (`promtool tsdb create-blocks-from openmetrics FILE TSDB_DIR`), with the same metric names and
// labels as the exporter's /metrics. Not thread-safe: one writer per thread.
//
// Files: one per two-hour window aligned like Prometheus's blocks (window = floor(ts / 2h)), named
// accelmon-<window start, unix seconds>.om so they sort by time. promtool reads a whole file into
// memory and parses it once per block window it spans, so small one-window files keep it fast.
//
// Order: promtool (2.42) silently drops a sample older than one already added for its series,
// and OpenMetrics forbids interleaving metric families. So the writer buffers a window's samples
// (series -> samples, about 12 bytes a sample: 66 MB per window for a node of 8 devices
// reporting every second) and writes the window family by family, each series in time order.
//
// Reports that arrive for a window already written (an agent's spool catching up, a node with a
// skewed clock) are not lost: their window is opened again and written to an extra file,
// accelmon-<window start>_<part>.om (part 001, 002, ...), which promtool turns into a block
// overlapping the first. Prometheus (since 2.39 without a flag) queries and compacts overlapping
// blocks as one.
#pragma once

#include <prometheus/metric_type.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "accelmon/v1/telemetry.pb.h"

namespace accelmon {

class OpenMetricsWriter {
 public:
  struct Options {
    // Windows buffered at once. When reports reach a window newer than any before, the windows
    // two or more back are written: time-ordered input keeps two open (the current one and the
    // one before, for nodes whose clocks straddle the boundary). Beyond this many (late or
    // skewed reports), the window that received a report least recently is written.
    size_t max_open_windows = 4;
  };

  struct Summary {
    std::vector<std::string> files;          // written, in the order written
    uint64_t reports = 0;                    // rendered
    uint64_t reports_without_timestamp = 0;  // skipped: they cannot be placed in time
    uint64_t samples = 0;
    uint64_t series = 0;  // distinct (name, labels)
    // Oldest and newest sample timestamp, milliseconds since the epoch; absent without samples.
    std::optional<int64_t> first_timestamp_ms;
    std::optional<int64_t> last_timestamp_ms;
  };

  static constexpr int64_t kWindowMs = int64_t{2} * 3600 * 1000;

  // Creates `out_dir` if needed. Files in it with the names above are overwritten. Throws
  // std::runtime_error (with the path and strerror) when the directory cannot be created.
  explicit OpenMetricsWriter(std::string out_dir) : OpenMetricsWriter(std::move(out_dir), {}) {}
  OpenMetricsWriter(std::string out_dir, Options options);
  ~OpenMetricsWriter();
  OpenMetricsWriter(const OpenMetricsWriter&) = delete;
  OpenMetricsWriter& operator=(const OpenMetricsWriter&) = delete;

  // Renders `report` at its own timestamp (so accelmon_node_up is 1) and buffers its samples.
  // May write the files of windows it closes; throws std::runtime_error when it cannot.
  void Add(const v1::NodeReport& report);

  // Writes every window still buffered and returns what was written. Call once, at the end;
  // what is still buffered when the writer is destroyed without it is lost.
  Summary Finish();

  // Buffered samples, for progress and memory estimates.
  uint64_t buffered_samples() const { return buffered_samples_; }

  // The file name of `part` (0 = the first) of the window starting at `window_start_ms`.
  static std::string FileName(int64_t window_start_ms, int part);
  // OpenMetrics timestamp text for `ms`: seconds with three decimals ("1764680000.123"), checked
  // to come back as `ms` through promtool's parse (float seconds * 1000, truncated).
  static std::string FormatTimestamp(int64_t ms);

 private:
  struct Family;
  struct Window;

  uint32_t FamilyIndex(const std::string& name, const std::string& help,
                       prometheus::MetricType type);
  Window& OpenWindow(int64_t window);
  void WriteWindow(int64_t window, Window& w);

  const std::string out_dir_;
  const Options options_;
  std::vector<Family> families_;  // in the order first seen
  std::unordered_map<std::string, uint32_t> family_index_;
  // Every series seen, keyed by its family index (4 bytes) and its OpenMetrics label text
  // ({a="b",...}); series_ points at those keys, which stay put in an unordered_map.
  std::unordered_map<std::string, uint32_t> series_index_;
  std::vector<const std::string*> series_;
  std::map<int64_t, std::unique_ptr<Window>> open_;  // by window index
  std::map<int64_t, int> parts_written_;             // by window index
  std::optional<int64_t> newest_window_;             // the newest window index any report reached
  uint64_t adds_ = 0;
  uint64_t buffered_samples_ = 0;
  std::string key_;  // scratch for series lookups
  Summary summary_;
};

}  // namespace accelmon
