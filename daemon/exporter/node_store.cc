#include "daemon/exporter/node_store.h"

#include <algorithm>

#include "proto/time_format.h"

namespace accelmon {
namespace {

// A report parsed on an arena of its own: its hundreds of strings and sub-messages cost one
// block allocation instead of one malloc each, and are freed at once when the store lets the
// report go (malloc and free were a third of ingest CPU).
struct ArenaReport {
  static google::protobuf::ArenaOptions Options() {
    google::protobuf::ArenaOptions options;
    options.start_block_size = 16 << 10;
    options.max_block_size = 256 << 10;
    return options;
  }
  google::protobuf::Arena arena{Options()};
  v1::NodeReport* report = google::protobuf::Arena::CreateMessage<v1::NodeReport>(&arena);
};

}  // namespace

bool NodeIsUp(const NodeEntry& entry, Clock::time_point now) {
  const v1::NodeReport& r = *entry.report;
  const auto interval = r.has_interval() ? std::chrono::seconds(r.interval().seconds()) +
                                               std::chrono::nanoseconds(r.interval().nanos())
                                         : std::chrono::nanoseconds(std::chrono::seconds(1));
  return !entry.restored && now - entry.received_at <= 3 * interval;
}

std::shared_ptr<v1::NodeReport> NewArenaReport() {
  auto holder = std::make_shared<ArenaReport>();
  v1::NodeReport* report = holder->report;
  return {std::move(holder), report};  // shares the holder's lifetime
}

NodeStore::NodeStore(std::chrono::milliseconds expire_after, ValidationLimits limits)
    : expire_after_(expire_after), limits_(limits) {}

ApplyResult NodeStore::Apply(std::shared_ptr<const v1::NodeReport> report, Clock::time_point now) {
  // Outside the lock: it walks the whole report.
  if (std::string reason = ValidateReport(*report, this->limits(), now); !reason.empty()) {
    return {ApplyOutcome::kRejected, std::move(reason)};
  }
  // `report` is released (or, replacing the node's, takes the previous one) after the lock.
  std::lock_guard lock(mu_);
  auto it = nodes_.find(report->node());
  if (it == nodes_.end()) {
    it = nodes_.emplace(report->node(), Slot{}).first;
  } else if (it->second.instance == report->agent_instance_id() &&
             report->sequence() <= it->second.last_sequence) {
    return {ApplyOutcome::kDuplicate, {}};
  }
  Slot& slot = it->second;
  slot.instance = report->agent_instance_id();
  slot.last_sequence = report->sequence();
  if (slot.shown_sequence != 0 && slot.shown_instance == slot.instance &&
      report->sequence() <= slot.shown_sequence) {
    // Sent again to be recorded: the newer report shown stays the node's latest, and is
    // recorded once this reaches it.
    if (report->sequence() == slot.shown_sequence) {
      slot.entry.unrecorded = false;
      slot.shown_sequence = 0;
    }
    return {ApplyOutcome::kApplied, {}, ++applied_, /*shown_before=*/true};
  }
  slot.shown_sequence = 0;
  ReplaceLocked(slot, report, now);
  slot.entry.unrecorded = false;
  return {ApplyOutcome::kApplied, {}, slot.entry.index};
}

ApplyResult NodeStore::Show(std::shared_ptr<const v1::NodeReport> report, Clock::time_point now) {
  // Outside the lock: it walks the whole report.
  if (std::string reason = ValidateReport(*report, this->limits(), now); !reason.empty()) {
    return {ApplyOutcome::kRejected, std::move(reason)};
  }
  std::lock_guard lock(mu_);
  Slot& slot = nodes_[report->node()];
  const bool same = slot.instance == report->agent_instance_id();
  const bool shown_same = slot.shown_instance == report->agent_instance_id();
  if ((same && report->sequence() <= slot.last_sequence) ||
      (slot.shown_sequence != 0 && shown_same && report->sequence() <= slot.shown_sequence)) {
    return {ApplyOutcome::kDuplicate, {}};
  }
  slot.shown_instance = report->agent_instance_id();
  slot.shown_sequence = report->sequence();
  ReplaceLocked(slot, report, now);
  slot.entry.unrecorded = true;
  return {ApplyOutcome::kApplied, {}, slot.entry.index};
}

void NodeStore::ReplaceLocked(Slot& slot, std::shared_ptr<const v1::NodeReport>& report,
                              Clock::time_point now) {
  slot.entry.step_rates = slot.steps.Update(*report);
  // The previous report goes back in `report`, released by the caller outside the lock.
  slot.entry.report.swap(report);
  slot.entry.received_at = now;
  slot.entry.restored = false;
  slot.entry.index = ++applied_;
}

void NodeStore::Seed(const std::string& node, const std::string& instance, uint64_t sequence,
                     Clock::time_point now) {
  std::lock_guard lock(mu_);
  auto [it, inserted] = nodes_.try_emplace(node);
  if (!inserted) return;  // a node that already reported knows better
  it->second.instance = instance;
  it->second.last_sequence = sequence;
  it->second.entry.received_at = now;
}

bool NodeStore::Restore(std::shared_ptr<const v1::NodeReport> report, Clock::time_point now) {
  const auto at = Clock::time_point(std::chrono::duration_cast<Clock::duration>(
      std::chrono::nanoseconds(ToNanos(report->timestamp()))));
  std::lock_guard lock(mu_);
  auto [it, inserted] = nodes_.try_emplace(report->node());
  Slot& slot = it->second;
  if (slot.entry.report) return false;
  if (inserted) {
    slot.instance = report->agent_instance_id();
    slot.last_sequence = report->sequence();
  }
  slot.entry.report = std::move(report);
  slot.entry.received_at = std::min(at, now);
  slot.entry.restored = true;
  slot.entry.index = ++applied_;
  return true;
}

std::vector<NodeEntry> NodeStore::Snapshot(Clock::time_point now) {
  std::vector<NodeEntry> out;
  std::lock_guard lock(mu_);
  out.reserve(nodes_.size());
  for (auto it = nodes_.begin(); it != nodes_.end();) {
    if (now - it->second.entry.received_at > expire_after_) {
      it = nodes_.erase(it);
      continue;
    }
    if (it->second.entry.report) out.push_back(it->second.entry);
    ++it;
  }
  return out;
}

void NodeStore::Reconfigure(std::chrono::milliseconds expire_after, ValidationLimits limits) {
  std::lock_guard lock(mu_);
  expire_after_ = expire_after;
  limits_ = limits;
}

ValidationLimits NodeStore::limits() const {
  std::lock_guard lock(mu_);
  return limits_;
}

std::chrono::milliseconds NodeStore::expire_after() const {
  std::lock_guard lock(mu_);
  return expire_after_;
}

size_t NodeStore::size() const {
  std::lock_guard lock(mu_);
  return static_cast<size_t>(std::count_if(nodes_.begin(), nodes_.end(),
                                           [](const auto& n) { return n.second.entry.report; }));
}

}  // namespace accelmon
