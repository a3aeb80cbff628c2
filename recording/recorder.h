// The exporter's flight recorder: every applied report, group-committed to a recording directory
// (segment_writer.h) by one writer thread.
//
// Append() queues a report's wire bytes; the thread takes everything queued, writes it as one
// ReportBatch record (several when it holds more than max_record_bytes), fdatasyncs at most once
// per sync_interval, and only then runs the reports' callbacks, in the order they were appended.
// An agent's report is acknowledged from its callback, so an acknowledged report is on disk.
//
// A failed write or sync (a full or failing disk) is logged once per change of state, counted,
// and retried with the next batch; the callbacks of the reports it held still run. The exporter
// then keeps acknowledging and serving reports it could not record: live monitoring matters more
// than the recording, and holding acks back would only fill every agent's spool.
//
// Thread-safe: Append() and stats() from any thread.
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
};

// What the recorder did, for the exporter's self-metrics.
struct RecorderStats {
  std::atomic<uint64_t> reports{0};        // written to the recording
  std::atomic<uint64_t> bytes{0};          // appended to segment files
  std::atomic<uint64_t> errors{0};         // failed writes and syncs
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

  // Queues one report (its wire bytes and key). `on_recorded` runs on the writer thread once the
  // report is written and synced (or its write failed); it must not block. After Stop() it runs
  // at once, the report unrecorded.
  void Append(std::string serialized_report, ReportKey key, std::function<void()> on_recorded);

  // Writes and syncs everything queued, runs the remaining callbacks and ends the thread.
  void Stop();

 private:
  struct Entry {
    std::string report;
    ReportKey key;
    std::function<void()> on_recorded;
  };

  void Run();
  // Writes `entries` as ReportBatch records; their callbacks join `unsynced`.
  void Write(std::deque<Entry>& entries, std::vector<std::function<void()>>& unsynced);
  void SyncAndNotify(std::vector<std::function<void()>>& unsynced);
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
