// What the uplink has sent or will send and the exporter has not yet acknowledged: the one book
// it keeps. Two kinds: the disk Spool (spool.h) when --spool.dir is set, and MemoryReportLog,
// a bounded queue in memory, when it is not. Reports are appended with increasing sequences.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "accelmon/v1/telemetry.pb.h"

namespace accelmon {

class ReportLog {
 public:
  virtual ~ReportLog() = default;

  // Keeps a report until it is acknowledged. Beyond the log's limit the oldest are dropped and
  // counted in dropped_reports().
  virtual void Append(std::shared_ptr<const v1::NodeReport> report) = 0;
  // Kept reports with after < sequence < before, oldest first, at most `limit`. Sets
  // `scanned_through` to the highest sequence that could have been found.
  virtual std::vector<std::shared_ptr<const v1::NodeReport>> Read(uint64_t after, uint64_t before,
                                                                  size_t limit,
                                                                  uint64_t* scanned_through) = 0;
  // Everything up to `sequence` is acknowledged.
  virtual void Acknowledge(uint64_t sequence) = 0;
  // Everything before `sequence` is acknowledged; `sequence` itself is given up (a report the
  // exporter can never take) and counted in dropped_reports().
  virtual void GiveUp(uint64_t sequence) = 0;

  // Every sequence up to here is acknowledged (or given up).
  virtual uint64_t acknowledged() const = 0;
  // The highest sequence ever appended.
  virtual uint64_t last_sequence() const = 0;
  // Reports appended and neither acknowledged nor dropped.
  virtual uint64_t unacknowledged() const = 0;
  virtual uint64_t dropped_reports() const = 0;
};

// The book without a disk spool: at most `max_reports` in memory, the oldest dropped first.
class MemoryReportLog final : public ReportLog {
 public:
  explicit MemoryReportLog(size_t max_reports) : max_reports_(max_reports) {}

  void Append(std::shared_ptr<const v1::NodeReport> report) override;
  std::vector<std::shared_ptr<const v1::NodeReport>> Read(uint64_t after, uint64_t before,
                                                          size_t limit,
                                                          uint64_t* scanned_through) override;
  void Acknowledge(uint64_t sequence) override;
  void GiveUp(uint64_t sequence) override;

  uint64_t acknowledged() const override;
  uint64_t last_sequence() const override;
  uint64_t unacknowledged() const override;
  uint64_t dropped_reports() const override;

 private:
  void SettleLocked(uint64_t sequence);

  const size_t max_reports_;
  mutable std::mutex mu_;
  std::deque<std::shared_ptr<const v1::NodeReport>> reports_;  // sorted by sequence
  uint64_t acknowledged_ = 0;
  uint64_t last_sequence_ = 0;
  uint64_t dropped_ = 0;
};

}  // namespace accelmon
