// Reads several recordings as one, for the offline tools (diagnose, replay, record inspect and
// export): each exporter of a fleet records only its own nodes, so the post-mortem of a job that
// spans exporters needs all of their recordings. Reports come out merged by report time, and a
// report that two recordings both hold comes out once: a node that moved between exporters while
// a report was in flight, or whose agent re-sent its spool to another exporter, is in both. One
// input is read exactly as RecordingReader reads it. Not thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "accelmon/v1/telemetry.pb.h"
#include "recording/recording_reader.h"
#include "recording/report_key.h"

namespace accelmon::recording {

class MergedReader {
 public:
  // Opens every input (as RecordingReader does); throws RecordingError naming the first that
  // cannot be opened. `inputs` must not be empty.
  explicit MergedReader(std::vector<std::string> inputs, ReaderOptions options = {});

  // The next report of all inputs, the oldest of their next ones (ties: by node name, then the
  // earlier input);
  // valid until the next call. Null when every input is at its end.
  //
  // With several inputs a report is a duplicate, and skipped, when its node's previous report
  // yielded came from the same agent instance with a sequence at least as high: the exporters
  // each deduplicate their own nodes, and sequences grow with time, so after merging by time a
  // report already seen is one not above its node's watermark. Sequence 0 (no sequence) is never
  // a duplicate.
  const v1::NodeReport* Next(ReportOrigin* origin = nullptr);

  // Reads to the end, discarding the reports.
  void Drain();

  const std::vector<std::string>& inputs() const { return inputs_; }
  // The reader of inputs()[i]: its own summary (segments, damage, torn tails).
  const RecordingReader& reader(size_t i) const { return *readers_[i]; }

  // All inputs together: segments, damage and torn tails of each input in input order, counts
  // summed, the first input's format. Rebuilt when asked after reading on (cheap for one input);
  // loops should use reports() and damage() instead.
  const ReadSummary& summary() const;
  // Reports read from all inputs so far, duplicates included.
  uint64_t reports() const;
  // Reports skipped as duplicates (0 with one input).
  uint64_t duplicates() const { return duplicates_; }
  // What could not be read in any input, in the order met.
  const std::vector<DamageReport>& damage() const;

  uint64_t bytes_done() const;
  uint64_t bytes_total() const;
  InputFormat format() const { return readers_.front()->format(); }

 private:
  void Advance(size_t i);
  bool Before(size_t a, size_t b) const;  // whether input a's head comes before input b's
  bool IsDuplicate(const v1::NodeReport& report);

  const std::vector<std::string> inputs_;
  std::vector<std::unique_ptr<RecordingReader>> readers_;
  // With several inputs: each input's next report (null at its end), where it came from, and
  // its time.
  std::vector<const v1::NodeReport*> heads_;
  std::vector<ReportOrigin> origins_;
  std::vector<int64_t> head_times_;
  bool started_ = false;
  size_t yielded_ = SIZE_MAX;  // the input whose head the caller holds; advanced on the next call
  Watermarks watermarks_;      // per node: the agent instance and highest sequence yielded
  uint64_t duplicates_ = 0;
  std::vector<DamageReport> damage_;  // several inputs: all inputs' damage, in the order met
  std::vector<size_t> damage_seen_;   // per input: how much of its damage is in damage_
  mutable ReadSummary summary_;       // several inputs: the combined summary, when asked
  mutable bool summary_stale_ = true;
};

}  // namespace accelmon::recording
