#include "daemon/agent/report_log.h"

#include <algorithm>

namespace accelmon {
namespace {

bool SequenceBelow(const std::shared_ptr<const v1::NodeReport>& r, uint64_t sequence) {
  return r->sequence() < sequence;
}

}  // namespace

void MemoryReportLog::Append(std::shared_ptr<const v1::NodeReport> report) {
  std::lock_guard lock(mu_);
  const uint64_t sequence = report->sequence();
  if (sequence <= acknowledged_) return;  // settled already
  if (reports_.size() >= max_reports_ && !reports_.empty()) {
    reports_.pop_front();
    ++dropped_;
  }
  last_sequence_ = std::max(last_sequence_, sequence);
  reports_.insert(std::lower_bound(reports_.begin(), reports_.end(), sequence, SequenceBelow),
                  std::move(report));
}

std::vector<std::shared_ptr<const v1::NodeReport>> MemoryReportLog::Read(
    uint64_t after, uint64_t before, size_t limit, uint64_t* scanned_through) {
  std::lock_guard lock(mu_);
  std::vector<std::shared_ptr<const v1::NodeReport>> out;
  auto it = std::lower_bound(reports_.begin(), reports_.end(), after + 1, SequenceBelow);
  for (; it != reports_.end() && (*it)->sequence() < before && out.size() < limit; ++it) {
    out.push_back(*it);
  }
  if (scanned_through != nullptr) {
    *scanned_through = out.size() >= limit && !out.empty()
                           ? out.back()->sequence()
                           : std::min(last_sequence_, before == 0 ? 0 : before - 1);
  }
  return out;
}

void MemoryReportLog::SettleLocked(uint64_t sequence) {
  acknowledged_ = std::max(acknowledged_, sequence);
  while (!reports_.empty() && reports_.front()->sequence() <= acknowledged_) reports_.pop_front();
}

void MemoryReportLog::Acknowledge(uint64_t sequence) {
  std::lock_guard lock(mu_);
  SettleLocked(sequence);
}

void MemoryReportLog::GiveUp(uint64_t sequence) {
  std::lock_guard lock(mu_);
  SettleLocked(sequence);
  ++dropped_;
}

uint64_t MemoryReportLog::acknowledged() const {
  std::lock_guard lock(mu_);
  return acknowledged_;
}

uint64_t MemoryReportLog::last_sequence() const {
  std::lock_guard lock(mu_);
  return last_sequence_;
}

uint64_t MemoryReportLog::unacknowledged() const {
  std::lock_guard lock(mu_);
  return reports_.size();
}

uint64_t MemoryReportLog::dropped_reports() const {
  std::lock_guard lock(mu_);
  return dropped_;
}

}  // namespace accelmon
