#include "recording/recorder.h"

#include <spdlog/spdlog.h>

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

void Recorder::Append(std::string serialized_report, ReportKey key,
                      std::function<void()> on_recorded) {
  std::unique_lock lock(mu_);
  if (stopping_) {
    lock.unlock();
    on_recorded();
    return;
  }
  queued_bytes_ += serialized_report.size();
  queue_.push_back(Entry{std::move(serialized_report), std::move(key), std::move(on_recorded)});
  // The thread waits for the first report, or for a full record while a sync is not yet due.
  if (queue_.size() == 1 || queued_bytes_ >= options_.max_record_bytes) cv_.notify_one();
}

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
  std::vector<std::function<void()>> unsynced;
  std::unique_lock lock(mu_);
  for (;;) {
    if (unsynced.empty()) cv_.wait(lock, [&] { return !queue_.empty() || stopping_; });
    if (stopping_ && queue_.empty() && unsynced.empty()) break;
    // Group commit: what arrives until the next sync is due goes into the same record, unless a
    // full record's worth is queued first.
    const auto sync_due_at = last_sync_ + options_.sync_interval;
    cv_.wait_until(lock, sync_due_at,
                   [&] { return stopping_ || queued_bytes_ >= options_.max_record_bytes; });
    const bool sync_due = stopping_ || std::chrono::steady_clock::now() >= sync_due_at;
    std::deque<Entry> taken;
    taken.swap(queue_);
    queued_bytes_ = 0;
    lock.unlock();
    Write(taken, unsynced);
    if (sync_due) SyncAndNotify(unsynced);
    lock.lock();
  }
}

void Recorder::Write(std::deque<Entry>& entries, std::vector<std::function<void()>>& unsynced) {
  Batch batch;
  const auto flush = [&] {
    if (batch.empty()) return;
    try {
      writer_->AppendBatch(batch);
      stats_.reports += batch.keys.size();
      NoteResult({});
    } catch (const std::exception& e) {
      ++stats_.errors;
      NoteResult(e.what());
    }
    batch.Clear();
  };
  for (Entry& entry : entries) {
    if (!batch.empty() && batch.body.size() + entry.report.size() > options_.max_record_bytes) {
      flush();
    }
    batch.Add(entry.report, std::move(entry.key));
    unsynced.push_back(std::move(entry.on_recorded));
  }
  flush();
  PublishStats();
}

void Recorder::SyncAndNotify(std::vector<std::function<void()>>& unsynced) {
  try {
    writer_->Sync();
  } catch (const std::exception& e) {
    ++stats_.errors;
    NoteResult(e.what());
  }
  last_sync_ = std::chrono::steady_clock::now();
  PublishStats();
  for (auto& callback : unsynced) callback();
  unsynced.clear();
}

void Recorder::NoteResult(const std::string& error) {
  if (!error.empty() && !failing_) {
    spdlog::error(
        "recording: {}; reports are still acknowledged and served, but not recorded until "
        "writing works again (retried with every batch)",
        error);
  } else if (error.empty() && failing_) {
    spdlog::info("recording: writing to {} again", options_.recording.dir);
  }
  failing_ = !error.empty();
}

void Recorder::PublishStats() {
  const SegmentWriterStats& s = writer_->stats();
  stats_.bytes = s.bytes_written;
  stats_.segments = s.segments;
  stats_.segment_bytes = s.bytes;
}

}  // namespace accelmon::recording
