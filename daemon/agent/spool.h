// The agent's disk spool: every report is appended to a segment file before it is sent, so that
// neither an exporter restart nor an agent crash loses it.
//
// Layout of the directory (docs/recording-format.md):
//   NNNNNNNNNNNNNNNNNNNN.seg  segments in the recording format, oldest first, rotated at about
//                             4 MiB: a SegmentHeader record (writer "agent-spool"), then one
//                             ReportBatch record per report holding just that report,
//                             uncompressed, sequences increasing
//   state                     agent instance id and acknowledged watermark (temp file + rename)
//   lock                      flock()ed while an agent uses the directory
//
// Appends are one write(2) per report, so a killed agent loses nothing the kernel has; fdatasync
// runs at most once a second, so a power loss can cost the last second. Segments are read point
// in time: a torn or damaged record ends its segment (later segments are still read). Each is read
// whole once, at open; Read then starts at a remembered record offset near the sequence it wants.
// Everything is built from recording/: LogWriter, LogReader, the record codec, file_io.
//
// A report the disk refuses (full, unwritable) is kept in memory instead, in a tail that Read
// serves with the spooled ones in sequence order, until it is acknowledged; the tail counts
// against max_bytes like the segments, and the oldest report, on disk or in the tail, goes first.
// It is lost if the agent dies; the disk format does not change.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "accelmon/v1/telemetry.pb.h"
#include "daemon/agent/report_log.h"
#include "recording/log_writer.h"

namespace accelmon {

struct SpoolOptions {
  std::string dir;
  uint64_t max_bytes = uint64_t{256} << 20;
  // Rotation size; never more than a quarter of max_bytes, so dropping the oldest segment frees
  // room without touching the one being written.
  uint64_t segment_bytes = uint64_t{4} << 20;
};

// The first record of every spool segment, a SegmentHeader from writer "agent-spool", framed by
// `writer` and appended to `out`.
void AppendSpoolSegmentHeader(recording::LogWriter* writer, std::string* out);
// One report (its wire bytes) as the spool stores it, framed by `writer` and appended to `out`.
void AppendSpoolReport(std::string_view serialized_report, recording::LogWriter* writer,
                       std::string* out);

struct SegmentScan {
  uint64_t records = 0;
  uint64_t valid_bytes = 0;    // up to the end of the last good record
  uint64_t skipped_bytes = 0;  // from the first damaged or torn record to the end of the file
  std::string damage;  // why and where reading stopped early; empty when the file ended cleanly
};

// Reads one segment file as it is now, calling `on_record` with the wire bytes of each intact
// report in order. Stops at the first torn or damaged record (point in time). `error` is set when
// the file cannot be read at all.
SegmentScan ScanSegment(const std::string& path,
                        const std::function<void(std::string_view payload)>& on_record,
                        std::string* error);

struct SpoolState {
  std::string instance_id;
  uint64_t acknowledged = 0;  // every sequence up to here is acknowledged (or given up)
};

// The state file, written to a temporary file and renamed over the old one.
bool WriteSpoolState(const std::string& dir, const SpoolState& state, std::string* error);
// Empty instance id with `error` set when missing or unreadable.
SpoolState ReadSpoolState(const std::string& dir, std::string* error);

class Spool final : public ReportLog {
 public:
  // Opens (creating) the directory and reads what an earlier run left. Keeps the instance id found
  // there, or takes `fresh_instance_id`. Throws std::runtime_error with a one-line reason.
  Spool(SpoolOptions options, const std::string& fresh_instance_id);
  ~Spool();

  Spool(const Spool&) = delete;
  Spool& operator=(const Spool&) = delete;

  const std::string& instance_id() const { return instance_id_; }
  // Bytes of damaged or torn records found when opening.
  uint64_t skipped_bytes_at_open() const { return skipped_at_open_; }

  // The highest sequence ever appended (continued from the previous run), the tail's included.
  uint64_t last_sequence() const override { return last_sequence_.load(); }
  uint64_t acknowledged() const override;
  // Reports appended and not yet acknowledged or dropped (sequences are consecutive).
  uint64_t unacknowledged() const override;
  uint64_t dropped_reports() const override;
  // Every sequence up to here was dropped or acknowledged.
  uint64_t dropped_through() const;
  // On disk.
  uint64_t bytes() const;
  size_t segments() const;
  // Refused by the disk and kept in memory.
  size_t tail_reports() const;
  uint64_t tail_bytes() const;

  // Writes one report; false (and logged) when the disk refuses it, and then the report is kept
  // in the tail in memory.
  bool Append(const v1::NodeReport& report);
  // The same, sharing the report when it goes to the tail.
  void Append(std::shared_ptr<const v1::NodeReport> report) override;

  // Everything up to `sequence` is acknowledged. Persists the watermark and deletes settled
  // segments at most once a second.
  void Acknowledge(uint64_t sequence) override;
  void GiveUp(uint64_t sequence) override;

  // Reports with after < sequence < before, spooled or in the tail, oldest first, at most
  // `limit`. Sets `scanned_through` to the highest sequence that could have been found.
  std::vector<std::shared_ptr<const v1::NodeReport>> Read(uint64_t after, uint64_t before,
                                                          size_t limit,
                                                          uint64_t* scanned_through) override;

  // Writes the state and syncs (also done by the destructor).
  void Close();

 private:
  struct Segment {
    uint64_t index = 0;
    std::string path;
    uint64_t first_sequence = 0;  // 0 while empty
    uint64_t last_sequence = 0;
    uint64_t records = 0;
    uint64_t bytes = 0;
    // Reads stop here: the end of the last good record (found at open, or written since).
    uint64_t readable_end = 0;
    // Where reading for a sequence may begin: {sequence, offset of its record}, increasing, the
    // first report's and then at most one a block, so that Read starts within about a block of
    // what it wants instead of at the top of the segment.
    std::vector<std::pair<uint64_t, uint64_t>> marks{};

    void AddMark(uint64_t sequence, uint64_t offset);
  };

  struct TailEntry {
    std::shared_ptr<const v1::NodeReport> report;
    uint64_t bytes = 0;
  };

  bool AppendShared(const v1::NodeReport& report, std::shared_ptr<const v1::NodeReport> shared);
  void OpenNewSegmentLocked();
  void PersistLocked();
  void PersistSoonLocked();
  // Over max_bytes: drops the oldest report, a segment's or the tail's, until under it.
  void EnforceLimitLocked();
  void DropOldestLocked();
  void DropTailFrontLocked();
  // After acknowledged_ or dropped_through_ moved: forgets what they settled in the tail.
  void SettleTailLocked();
  void SyncLocked();

  const SpoolOptions options_;
  const uint64_t segment_bytes_;
  std::string instance_id_;
  uint64_t skipped_at_open_ = 0;
  int lock_fd_ = -1;

  mutable std::mutex mu_;
  std::vector<Segment> segments_;  // oldest first; back() is written to
  int fd_ = -1;
  recording::LogWriter writer_;  // frames the records of segments_.back()
  bool header_pending_ = false;  // its SegmentHeader goes out with the first report
  std::string framed_;           // scratch for Append
  std::atomic<uint64_t> last_sequence_{0};
  uint64_t acknowledged_ = 0;
  uint64_t persisted_acknowledged_ = 0;
  bool state_failing_ = false;  // the last state write failed (logged once)
  uint64_t dropped_ = 0;
  uint64_t dropped_through_ = 0;
  uint64_t total_bytes_ = 0;
  std::deque<TailEntry> tail_;  // sorted by sequence; none settled
  uint64_t tail_bytes_ = 0;
  // Tail reports dropped above the settled watermark while older ones stayed on disk (holes in
  // the consecutive sequences), increasing.
  std::deque<uint64_t> holes_;
  bool tail_dropping_ = false;  // logged once until the tail empties
  bool dirty_ = false;          // written since the last fdatasync
  bool append_failing_ = false;
  std::chrono::steady_clock::time_point last_sync_{};
  std::chrono::steady_clock::time_point last_persist_{};
};

}  // namespace accelmon
