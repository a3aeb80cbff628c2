// The exporter's flight recorder: every applied report, group-committed to a recording directory
// (segment_writer.h) by one writer thread.
//
// Append() queues a report's wire bytes; the thread takes everything queued, writes it as one
// ReportBatch record (several when it holds more than max_record_bytes), fdatasyncs at most once
// per sync_interval, and only then runs the reports' callbacks, in the order they were appended.
// An agent's report is acknowledged from its callback, so an acknowledged report is on disk.
//
// A failed write or sync (a full or failing disk) is logged once per change of state and
// counted, and the reports it held are kept and written again, first, every retry_interval until
// it works: their callbacks wait, so the exporter acknowledges nothing it has not recorded and
// agents keep those reports in their spools. failure() says why meanwhile (/readyz). Reports
// whose sync failed are written again into a new segment; the failed sync may have kept them
// after all, so such a report can be in the recording twice (a replay applies it once).
//
// Thread-safe: Append(), failure() and stats() from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "recording/segment_writer.h"

namespace accelmon::recording {

struct RecorderOptions {
  RecordingOptions recording;
  // Group commit: at most one fdatasync this often (0: after every write).
  std::chrono::milliseconds sync_interval{100};
  // A ReportBatch record holds about this many bytes of reports at most (before compression).
  size_t max_record_bytes = size_t{4} << 20;
  // While writing fails: how often to try again.
  std::chrono::milliseconds retry_interval{1000};
};

// What the recorder did, for the exporter's self-metrics.
struct RecorderStats {
  std::atomic<uint64_t> reports{0};  // written to the recording
  std::atomic<uint64_t> bytes{0};    // appended to segment files
  std::atomic<uint64_t> errors{0};   // failed writes and syncs
  // Reports written again after a failed sync: maybe in the recording twice (applied once).
  std::atomic<uint64_t> rewritten{0};
  std::atomic<uint64_t> failing{0};  // 1 while writing fails (reports wait, unacknowledged)
  std::atomic<uint64_t> waiting{0};  // reports held for the next try while failing

  // Why the recording cannot be written now; empty while it can (/readyz says it).
  std::string failure() const {
    std::lock_guard lock(failure_mu);
    return failure_reason;
  }
  mutable std::mutex failure_mu;
  std::string failure_reason;
  std::atomic<uint64_t> segments{0};       // in the directory now
  std::atomic<uint64_t> segment_bytes{0};  // of those segments
};

class Recorder {
 public:
  // Opens (and locks) the directory, recovering the watermarks of the recording in it (see
  // recovered()), begins a new segment and starts the writer thread. `stats` must outlive the
  // recorder. Throws std::runtime_error naming the path and the reason.
  Recorder(RecorderOptions options, RecorderStats& stats);
  ~Recorder();  // Stop()
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  // What the directory held when opened: seeds the exporter's dedup, so that a report recorded
  // before a restart and sent again is a duplicate, not recorded twice.
  const RecoveredWatermarks& recovered() const { return recovered_; }
  // Where each node's latest report is (with options.recording.tail_index).
  const RecoveredLocations& recovered_locations() const { return recovered_locations_; }
  const RecorderOptions& options() const { return options_; }

  // Runs on the writer thread when a report is written and synced (true), or when the recorder
  // stopped before it could be (false: not recorded). Must not block.
  using RecordedFn = std::function<void(bool recorded)>;

  // Queues one report (its wire bytes and key); `on_recorded` runs once it is recorded. After
  // Stop() it runs at once with false.
  void Append(std::string serialized_report, ReportKey key, RecordedFn on_recorded);
  // `after` runs once everything appended before it is recorded (a barrier: a duplicate report
  // is acknowledged only when its first copy is on disk), or with false as Append's.
  void AfterRecorded(RecordedFn after);

  // Why the recording cannot be written now; empty while it can.
  std::string failure() const { return stats_.failure(); }

  // Writes and syncs everything queued, runs the remaining callbacks and ends the thread.
  void Stop();

 private:
  struct Entry {
    std::string report;  // empty: a barrier (AfterRecorded)
    ReportKey key;
    RecordedFn on_recorded;
  };

  void Run();
  // Writes `pending` as ReportBatch records, in order, moving each written entry to `unsynced`;
  // after a failure the rest stay in `pending`. Returns whether all were written.
  bool Write(std::deque<Entry>& pending, std::deque<Entry>& unsynced);
  // Syncs and calls back `unsynced`; after a failed sync they go back to the front of `pending`.
  void SyncAndNotify(std::deque<Entry>& unsynced, std::deque<Entry>& pending);
  // Logs a failure once per change of state; `error` empty means success.
  void NoteResult(const std::string& error);
  void PublishStats();

  const RecorderOptions options_;
  RecorderStats& stats_;
  std::unique_ptr<SegmentWriter> writer_;  // the writer thread's only
  RecoveredWatermarks recovered_;
  RecoveredLocations recovered_locations_;
  bool failing_ = false;  // writer thread only

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Entry> queue_;
  size_t queued_bytes_ = 0;
  bool stopping_ = false;
  std::chrono::steady_clock::time_point last_sync_{};
  std::thread thread_;
};

}  // namespace accelmon::recording
