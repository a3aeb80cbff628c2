// Writes a recording directory (docs/recording-format.md): numbered segment files, each a
// SegmentHeader record followed by ReportBatch records, rotated by size and kept by total size and
// age. Used by the exporter's flight recorder (recorder.h) and by `accelmon record import`.
//
// Not thread-safe: one thread owns a SegmentWriter. The directory is locked (flock on its `lock`
// file) for as long as the writer lives, so two writers never share a directory.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "accelmon/v1/telemetry.pb.h"
#include "recording/log_writer.h"
#include "recording/record_codec.h"
#include "recording/report_key.h"
#include "recording/segment_names.h"
#include "recording/tail_index.h"

namespace accelmon::recording {

struct RecordingOptions {
  std::string dir;
  // The SegmentHeader's `writer`: "exporter", "import".
  std::string writer = "exporter";
  // A segment is closed and a new one begun before a batch would take it past this. With
  // max_bytes set, segments are at most a quarter of it, so that deleting the oldest keeps the
  // total near max_bytes.
  uint64_t segment_bytes = uint64_t{64} << 20;
  // 0: no limit. Beyond it the oldest segments are deleted (never the one being written).
  uint64_t max_bytes = uint64_t{10} << 30;
  // 0: forever. A segment whose newest record is older than this is deleted.
  std::chrono::milliseconds retention = std::chrono::hours(24 * 7);
  Compression compression = Compression::kZstd;
  int zstd_level = 3;
  // With zstd: the largest zstd dictionary a segment header carries (0: none). The writer
  // samples the first `dictionary_sample_bytes` of reports of each segment; once it has them, the
  // dictionary made from them goes into the next segment's header (the first segment after a
  // start is closed early for it), and that segment's records are compressed with it.
  size_t dictionary_bytes = size_t{32} << 10;
  size_t dictionary_sample_bytes = size_t{256} << 10;
  // Keep `tail.index` (tail_index.h): the exporter's recorder does, `record import` not.
  bool tail_index = false;
  // A node's watermark is left out of new segment headers (and the tail index) once nothing was
  // appended for it this long, as the exporter forgets an expired node (--node.expire-after):
  // otherwise every node ever seen stays in every header. 0: kept forever.
  std::chrono::milliseconds forget_watermarks_after{0};
};

// One ReportBatch record under construction: the reports' wire bytes and their keys, in order.
struct Batch {
  std::string body;             // ReportBatch wire encoding (AppendReportToBatch)
  std::vector<ReportKey> keys;  // one per report

  void Add(std::string_view serialized_report, ReportKey key);
  void Add(const v1::NodeReport& report);  // serialises it
  bool empty() const { return keys.empty(); }
  void Clear();
};

// What the directory's newest segments say about every node (see RecoverWatermarks).
struct RecoveredWatermarks {
  Watermarks watermarks;
  // The segment whose header the watermarks start from; empty when none was found.
  std::string segment;
  // Reports read after that header (in it and in newer headerless segments).
  uint64_t reports = 0;
  // Bytes the salvage reader skipped, and why (one line per damage), in the segments read.
  uint64_t damaged_bytes = 0;
  std::vector<std::string> damage;
};

// Reads the newest segment of `dir` in salvage mode: its header's watermarks advanced by every
// report after it. A newest segment with no readable header (empty, or torn by a crash as it was
// created) falls back to the one before, whose reports come first. A missing or empty directory
// recovers nothing. Throws std::runtime_error (path and strerror) when a file cannot be read.
RecoveredWatermarks RecoverWatermarks(const std::string& dir);

struct SegmentWriterStats {
  uint64_t segments = 0;         // in the directory now, the one being written included
  uint64_t bytes = 0;            // of those segments
  uint64_t records_written = 0;  // ReportBatch records written by this writer
  uint64_t reports_written = 0;
  uint64_t bytes_written = 0;     // appended to segment files by this writer, headers included
  uint64_t segments_deleted = 0;  // by retention
  uint64_t dictionaries = 0;      // zstd dictionaries made (one per segment at most)
  uint64_t dictionary_bytes = 0;  // of the current dictionary
};

class SegmentWriter {
 public:
  // Creates and locks options.dir, applies retention, and begins a new segment (never appending
  // to an earlier writer's segment, whose tail may be torn). Its header holds `watermarks`, or,
  // when absent, those recovered from the directory under the lock (see recovered()).
  // Throws std::runtime_error naming the path and the reason; a directory locked by another
  // writer says so.
  explicit SegmentWriter(RecordingOptions options,
                         std::optional<Watermarks> watermarks = std::nullopt);
  ~SegmentWriter();  // syncs and closes; the lock goes with it
  SegmentWriter(const SegmentWriter&) = delete;
  SegmentWriter& operator=(const SegmentWriter&) = delete;

  // Writes `batch` as one ReportBatch record (compressed as configured) with write(2), after
  // rotating when it would take the current segment past its size. Advances the watermarks by
  // its keys once it is written. On failure throws std::runtime_error (path and strerror) and
  // leaves the directory readable: the partial record is cut off, or the next append begins a
  // new segment; the caller may simply try again later. An empty batch writes nothing.
  void AppendBatch(const Batch& batch);

  // fdatasync of the current segment, when anything was written since the last. Throws
  // std::runtime_error on failure; the next append then begins a new segment, since what the
  // failed sync covered may or may not be on disk. With `tail_index` on, then rewrites
  // `tail.index` when a second has passed since it last did (a failure there is only logged).
  void Sync();

  // Applies retention now (AppendBatch does at most once a minute, and on rotation).
  void EnforceRetention();

  // The watermarks after everything appended (the header's, advanced by each batch).
  const Watermarks& watermarks() const { return watermarks_; }
  // When constructed without watermarks: what was read from the directory.
  const RecoveredWatermarks& recovered() const { return recovered_; }
  // When constructed without watermarks: where each node's latest report was (tail_index.h).
  const RecoveredLocations& recovered_locations() const { return recovered_locations_; }
  const SegmentWriterStats& stats() const { return stats_; }
  const RecordingOptions& options() const { return options_; }
  // The segment being written ("" between a failure and the next append).
  std::string current_segment() const;

 private:
  struct Segment {
    uint64_t index = 0;
    std::string path;
    uint64_t bytes = 0;
    std::chrono::system_clock::time_point newest;  // last write (the file's mtime)
  };

  void ScanDirectory();
  // Begins segment index `next_index_`, with a header holding the current watermarks.
  void OpenSegment();
  void CloseSegment();
  // Writes `bytes` (whole framed records) at the end of the current segment.
  void WriteFramed(const std::string& bytes);
  void DeleteOldest();
  // Keeps copies of the batch's reports as dictionary samples, up to the sample budget.
  void SampleReports(const Batch& batch);
  bool SamplesReady() const;
  // Makes the dictionary for the next segment from the samples, when there are enough.
  void MakeDictionary();
  // Drops the watermarks of nodes silent for longer than forget_watermarks_after.
  void ForgetSilentNodes();
  // Rewrites `tail.index` for what is synced now, dropping nodes whose segment is gone.
  void WriteIndex();

  const RecordingOptions options_;
  const uint64_t segment_limit_;
  int lock_fd_ = -1;
  int fd_ = -1;  // the current segment; -1 when none is open
  LogWriter log_{0};
  bool dirty_ = false;  // written since the last sync
  bool current_has_batches_ = false;
  uint64_t next_index_ = 1;
  std::vector<Segment> segments_;  // oldest first; the last is current while fd_ >= 0
  std::chrono::steady_clock::time_point last_retention_check_;
  Watermarks watermarks_;
  // When each node in watermarks_ last had a report appended (recovered ones: when opened).
  std::map<std::string, std::chrono::steady_clock::time_point, std::less<>> last_appended_;
  RecoveredWatermarks recovered_;
  RecoveredLocations recovered_locations_;
  ReportLocations latest_;  // of every node, while tail_index is on
  std::chrono::steady_clock::time_point last_index_write_{};
  bool index_dirty_ = false;
  bool synced_ = true;          // everything appended is synced (the index may be written)
  bool index_failing_ = false;  // logged once until it works again
  SegmentWriterStats stats_;
  std::string framed_;  // scratch
  // The zstd dictionary of the next segments' headers ("" for none), and the compressor loaded
  // with the one of the current segment (unloaded when it has none).
  std::string dictionary_;
  DictionaryCompressor compressor_;
  std::vector<std::string> samples_;  // of the current segment's first reports
  size_t sample_bytes_ = 0;
  std::vector<std::string_view> split_;  // scratch
};

}  // namespace accelmon::recording
