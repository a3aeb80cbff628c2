// Reads a recording back for the offline tools (record inspect/verify/export, replay): a
// recording directory (its segments in index order, each in the order written), a single .seg
// file, or a JSON Lines file. Every report that can be read is yielded; everything that cannot
// is summarised precisely (file, offset or line, bytes lost, why), so a damaged recording loses
// only what touches the damage. Not thread-safe: one reader per thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "accelmon/v1/telemetry.pb.h"
#include "recording/log_reader.h"
#include "recording/segment_names.h"

namespace accelmon::recording {

// The input cannot be read at all, or is not a recording (tools exit 2 on it).
class RecordingError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class InputFormat { kDirectory, kSegment, kJsonLines };

// Where a report came from.
struct ReportOrigin {
  std::string_view file;  // the segment's or JSON Lines file's path ("-": standard input)
  uint64_t offset = 0;    // of its record in the segment, or of its line in the JSON Lines file
  uint64_t line = 0;      // JSON Lines: 1-based line number; 0 for segments
};

// What could not be read.
struct DamageReport {
  std::string file;
  uint64_t offset = 0;  // in the file
  uint64_t bytes = 0;   // lost, from offset
  uint64_t line = 0;    // JSON Lines: the bad line (1-based); 0 for segments
  std::string reason;
};

// An incomplete record at the end of a segment: normal after a crash, not damage.
struct TornTail {
  std::string file;
  uint64_t offset = 0;
  uint64_t bytes = 0;
};

// One segment (or the JSON Lines file), filled in as it is read.
struct SegmentSummary {
  std::string path;
  uint64_t bytes = 0;   // file size
  std::string writer;   // from its SegmentHeader ("exporter", "agent-spool", "import")
  bool header = false;  // began with a readable SegmentHeader
  uint64_t records = 0;
  uint64_t reports = 0;
  uint64_t damaged_bytes = 0;
  uint64_t torn_tail_bytes = 0;
  // Oldest and newest report timestamp, nanoseconds since the epoch; absent without reports.
  std::optional<int64_t> first_time_ns;
  std::optional<int64_t> last_time_ns;
  // Bytes of the reports' wire encoding (before any compression): for a compression ratio.
  uint64_t report_bytes = 0;
};

struct ReadSummary {
  InputFormat format = InputFormat::kDirectory;
  std::vector<SegmentSummary> segments;  // JSON Lines: one entry, the file
  std::vector<DamageReport> damage;      // in read order
  std::vector<TornTail> torn_tails;
  uint64_t records = 0;  // ReportBatch records (JSON Lines: lines holding a report)
  uint64_t reports = 0;
  uint64_t bytes = 0;  // of every input file together

  uint64_t damaged_bytes() const;
  bool clean() const { return damage.empty(); }
};

struct ReaderOptions {
  // kSalvage reads past damage; kPointInTime stops at the first.
  ReadMode mode = ReadMode::kSalvage;
  // Read any file as JSON Lines, whatever its name or content (`record import --jsonl`).
  bool json_lines = false;
};

class RecordingReader {
 public:
  // Opens `input`: a directory of NNNNNNNNNNNNNNNNNNNN.seg files, a .seg file, a JSON Lines file
  // (by its .jsonl/.ndjson/.json name or by content), or "-" for JSON Lines on standard input.
  // Throws RecordingError when it cannot be opened or is none of these.
  explicit RecordingReader(const std::string& input, ReaderOptions options = {});
  ~RecordingReader();
  RecordingReader(const RecordingReader&) = delete;
  RecordingReader& operator=(const RecordingReader&) = delete;

  // The next report, valid until the next call (the same object is reused); null at the end.
  // `origin`'s file points into the reader and stays valid as long as the reader.
  const v1::NodeReport* Next(ReportOrigin* origin = nullptr);

  // Reads to the end, discarding the reports: what verify needs.
  void Drain();

  const ReadSummary& summary() const { return summary_; }
  InputFormat format() const { return summary_.format; }
  // For progress: input bytes read so far, of bytes_total() (0 when unknown, as for stdin).
  uint64_t bytes_done() const;
  uint64_t bytes_total() const { return summary_.bytes; }

  class Source;  // one segment or one JSON Lines file being read

 private:
  bool OpenNext();

  const std::string input_;
  const ReaderOptions options_;
  std::vector<std::string> files_;  // every input file, in order; never changed after opening
  size_t next_file_ = 0;
  std::unique_ptr<Source> source_;
  std::string buffer_;                // the segment being read, reused from one to the next
  uint64_t bytes_before_source_ = 0;  // sizes of the files already read
  bool stopped_ = false;              // kPointInTime met damage
  ReadSummary summary_;
  v1::NodeReport report_;
};

// The segment files of a recording directory, sorted by index; other files (a spool's `state`
// and `lock`) are ignored. Throws RecordingError when the directory cannot be listed.
std::vector<std::string> ListSegments(const std::string& dir);

}  // namespace accelmon::recording
