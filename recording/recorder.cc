#include "recording/recorder.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <stdexcept>

namespace accelmon::recording {

Recorder::Recorder(RecorderOptions options, RecorderStats& stats)
    : options_(std::move(options)), stats_(stats) {
  writer_ = std::make_unique<SegmentWriter>(options_.recording);
  recovered_ = writer_->recovered();
  recovered_locations_ = writer_->recovered_locations();
  PublishStats();
  thread_ = std::thread([this] { Run(); });
}

Recorder::~Recorder() { Stop(); }

void Recorder::Append(std::string serialized_report, ReportKey key, RecordedFn on_recorded) {
  std::unique_lock lock(mu_);
  if (stopping_) {
    lock.unlock();
    on_recorded(false);
    return;
  }
  queued_bytes_ += serialized_report.size();
  queue_.push_back(Entry{std::move(serialized_report), std::move(key), std::move(on_recorded)});
  // The thread waits for the first report, or for a full record while a sync is not yet due.
  if (queue_.size() == 1 || queued_bytes_ >= options_.max_record_bytes) cv_.notify_one();
}

void Recorder::AfterRecorded(RecordedFn after) { Append({}, {}, std::move(after)); }

void Recorder::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
  writer_.reset();  // syncs, closes, unlocks the directory
}

void Recorder::Run() {
  std::deque<Entry> pending;   // not yet written: what failed first, then what was queued
  std::deque<Entry> unsynced;  // written, waiting for the sync
  std::unique_lock lock(mu_);
  for (;;) {
    if (unsynced.empty() && pending.empty()) {
      cv_.wait(lock, [&] { return !queue_.empty() || stopping_; });
    }
    if (stopping_ && queue_.empty() && unsynced.empty() && pending.empty()) break;
    const auto now = std::chrono::steady_clock::now();
    bool sync_due = false;
    if (!pending.empty()) {
      // Failing: try again every retry_interval (and once more when stopping).
      cv_.wait_until(lock, now + options_.retry_interval, [&] { return stopping_; });
      sync_due = true;
    } else {
      // Group commit: what arrives until the next sync is due goes into the same record, unless
      // a full record's worth is queued first.
      const auto sync_due_at = last_sync_ + options_.sync_interval;
      cv_.wait_until(lock, sync_due_at,
                     [&] { return stopping_ || queued_bytes_ >= options_.max_record_bytes; });
      sync_due = stopping_ || std::chrono::steady_clock::now() >= sync_due_at;
    }
    for (Entry& entry : queue_) pending.push_back(std::move(entry));
    queue_.clear();
    queued_bytes_ = 0;
    const bool stopping = stopping_;
    lock.unlock();
    const bool written = Write(pending, unsynced);
    if (sync_due || !written) SyncAndNotify(unsynced, pending);
    stats_.waiting = pending.size();
    if (stopping && !pending.empty()) {
      // The last try failed too: these are not recorded, and their reports not acknowledged.
      spdlog::error(
          "recording: stopping with {} report(s) not written ({}); agents send them again",
          pending.size(), failure());
      for (Entry& entry : pending) entry.on_recorded(false);
      pending.clear();
      stats_.waiting = 0;
    }
    lock.lock();
  }
}

bool Recorder::Write(std::deque<Entry>& pending, std::deque<Entry>& unsynced) {
  Batch batch;
  size_t taken = 0;  // entries at `pending`'s front that `batch` holds (barriers included)
  // Writes `batch`; its entries move to `unsynced` once written, stay in `pending` otherwise.
  const auto flush = [&] {
    if (!batch.empty()) {
      try {
        writer_->AppendBatch(batch);
        stats_.reports += batch.keys.size();
        NoteResult({});
      } catch (const std::exception& e) {
        ++stats_.errors;
        NoteResult(e.what());
        return false;
      }
      batch.Clear();
    }
    for (; taken > 0; --taken) {
      unsynced.push_back(std::move(pending.front()));
      pending.pop_front();
    }
    return true;
  };
  bool written = true;
  while (written && taken < pending.size()) {
    const Entry& entry = pending[taken];
    if (!batch.empty() && batch.body.size() + entry.report.size() > options_.max_record_bytes) {
      written = flush();
      continue;
    }
    if (!entry.report.empty()) batch.Add(entry.report, entry.key);
    ++taken;
  }
  if (written) written = flush();
  PublishStats();
  return written;
}

void Recorder::SyncAndNotify(std::deque<Entry>& unsynced, std::deque<Entry>& pending) {
  bool synced = true;
  try {
    writer_->Sync();
  } catch (const std::exception& e) {
    ++stats_.errors;
    NoteResult(e.what());
    synced = false;
  }
  last_sync_ = std::chrono::steady_clock::now();
  PublishStats();
  if (!synced) {
    // May or may not be on disk: written again, before anything newer.
    // Counted: the failed sync may have kept them after all, and then they are in the
    // recording twice (a replay or a restart applies each once: the second is a duplicate).
    stats_.rewritten += static_cast<uint64_t>(std::count_if(
        unsynced.begin(), unsynced.end(), [](const Entry& e) { return !e.report.empty(); }));
    while (!unsynced.empty()) {
      pending.push_front(std::move(unsynced.back()));
      unsynced.pop_back();
    }
    return;
  }
  for (Entry& entry : unsynced) entry.on_recorded(true);
  unsynced.clear();
}

void Recorder::NoteResult(const std::string& error) {
  if (!error.empty() && !failing_) {
    spdlog::error(
        "recording: {}; reports are no longer acknowledged (agents keep them in their spools) "
        "until writing works again, tried every {} ms",
        error, options_.retry_interval.count());
  } else if (error.empty() && failing_) {
    spdlog::info("recording: writing to {} again; acknowledging the reports held meanwhile",
                 options_.recording.dir);
  }
  failing_ = !error.empty();
  stats_.failing = failing_ ? 1 : 0;
  std::lock_guard lock(stats_.failure_mu);
  stats_.failure_reason = failing_ ? "cannot write the recording: " + error : std::string();
}

void Recorder::PublishStats() {
  const SegmentWriterStats& s = writer_->stats();
  stats_.bytes = s.bytes_written;
  stats_.segments = s.segments;
  stats_.segment_bytes = s.bytes;
}

}  // namespace accelmon::recording
