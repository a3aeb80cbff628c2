#include "recording/merged_reader.h"

#include "proto/time_format.h"

namespace accelmon::recording {

MergedReader::MergedReader(std::vector<std::string> inputs, ReaderOptions options)
    : inputs_(std::move(inputs)) {
  if (inputs_.empty()) throw RecordingError("no recording given");
  readers_.reserve(inputs_.size());
  for (const std::string& input : inputs_) {
    readers_.push_back(std::make_unique<RecordingReader>(input, options));
  }
  heads_.assign(readers_.size(), nullptr);
  origins_.resize(readers_.size());
  head_times_.assign(readers_.size(), 0);
  damage_seen_.assign(readers_.size(), 0);
}

void MergedReader::Advance(size_t i) {
  heads_[i] = readers_[i]->Next(&origins_[i]);
  if (heads_[i] != nullptr) head_times_[i] = ToNanos(heads_[i]->timestamp());
  const std::vector<DamageReport>& damage = readers_[i]->summary().damage;
  for (; damage_seen_[i] < damage.size(); ++damage_seen_[i]) {
    damage_.push_back(damage[damage_seen_[i]]);
  }
  summary_stale_ = true;
}

bool MergedReader::Before(size_t a, size_t b) const {
  if (head_times_[a] != head_times_[b]) return head_times_[a] < head_times_[b];
  // Same time: by node name, so that how the fleet was split over exporters (and the order of
  // the inputs) does not change the order the rules see.
  return heads_[a]->node() < heads_[b]->node();
}

bool MergedReader::IsDuplicate(const v1::NodeReport& report) {
  if (report.sequence() == 0) return false;
  auto it = watermarks_.find(report.node());
  if (it == watermarks_.end()) {
    watermarks_.emplace(report.node(), Watermark{report.agent_instance_id(), report.sequence()});
    return false;
  }
  Watermark& mark = it->second;
  if (mark.agent_instance_id == report.agent_instance_id()) {
    if (report.sequence() <= mark.sequence) return true;
    mark.sequence = report.sequence();
    return false;
  }
  // A new agent instance (the agent restarted) starts its sequences again.
  mark = Watermark{report.agent_instance_id(), report.sequence()};
  return false;
}

const v1::NodeReport* MergedReader::Next(ReportOrigin* origin) {
  if (readers_.size() == 1) {
    return readers_.front()->Next(origin);
  }
  if (!started_) {
    for (size_t i = 0; i < readers_.size(); ++i) Advance(i);
    started_ = true;
  } else if (yielded_ != SIZE_MAX) {
    Advance(yielded_);
  }
  yielded_ = SIZE_MAX;
  for (;;) {
    size_t oldest = SIZE_MAX;
    for (size_t i = 0; i < heads_.size(); ++i) {
      if (heads_[i] != nullptr && (oldest == SIZE_MAX || Before(i, oldest))) oldest = i;
    }
    if (oldest == SIZE_MAX) return nullptr;
    if (IsDuplicate(*heads_[oldest])) {
      ++duplicates_;
      Advance(oldest);
      continue;
    }
    yielded_ = oldest;
    if (origin != nullptr) *origin = origins_[oldest];
    return heads_[oldest];
  }
}

void MergedReader::Drain() {
  while (Next() != nullptr) {
  }
}

uint64_t MergedReader::reports() const {
  uint64_t n = 0;
  for (const auto& reader : readers_) n += reader->summary().reports;
  return n;
}

const std::vector<DamageReport>& MergedReader::damage() const {
  return readers_.size() == 1 ? readers_.front()->summary().damage : damage_;
}

const ReadSummary& MergedReader::summary() const {
  if (readers_.size() == 1) return readers_.front()->summary();
  if (!summary_stale_) return summary_;
  summary_ = ReadSummary{};
  summary_.format = format();
  for (const auto& reader : readers_) {
    const ReadSummary& s = reader->summary();
    summary_.segments.insert(summary_.segments.end(), s.segments.begin(), s.segments.end());
    summary_.torn_tails.insert(summary_.torn_tails.end(), s.torn_tails.begin(), s.torn_tails.end());
    summary_.records += s.records;
    summary_.reports += s.reports;
    summary_.bytes += s.bytes;
  }
  summary_.damage = damage_;
  summary_stale_ = false;
  return summary_;
}

uint64_t MergedReader::bytes_done() const {
  uint64_t n = 0;
  for (const auto& reader : readers_) n += reader->bytes_done();
  return n;
}

uint64_t MergedReader::bytes_total() const {
  uint64_t n = 0;
  for (const auto& reader : readers_) n += reader->bytes_total();
  return n;
}

}  // namespace accelmon::recording
