// The exporter's state: the latest report of every node. Ingest replaces a node's report by
// swapping one pointer under a short lock; scrapes take a snapshot of pointers and render from
// it without holding the lock, so a scrape never blocks ingest for longer than a copy of pointers.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "accelmon/v1/telemetry.pb.h"
#include "daemon/exporter/report_validator.h"
#include "daemon/exporter/step_rates.h"

namespace accelmon {

struct NodeEntry {
  std::shared_ptr<const v1::NodeReport> report;
  Clock::time_point received_at;
  // ApplyResult::index of `report`.
  uint64_t index = 0;
  // Training steps per second of the node's processes that push a step counter, from this
  // report and the node's earlier ones (step_rates.h); null when none is known.
  std::shared_ptr<const std::vector<StepRate>> step_rates = nullptr;
  // Put back from the recording after a restart (Restore) and not reported since: the node is
  // down (accelmon_node_up 0) whatever the report's age.
  bool restored = false;
  // Shown while the recording could not be written (Show), and not recorded yet: its agent
  // still holds it and sends it again.
  bool unrecorded = false;
};

// Whether the node's agent still reports: not restored-and-silent, and heard from within three
// of its collection intervals (an agent that sent no interval is assumed at 1 s). What
// accelmon_node_up and the status page say.
bool NodeIsUp(const NodeEntry& entry, Clock::time_point now);

// An empty report for the store, to parse into, on an arena of its own (ingest, restore).
std::shared_ptr<v1::NodeReport> NewArenaReport();

enum class ApplyOutcome { kApplied, kDuplicate, kRejected };

struct ApplyResult {
  ApplyOutcome outcome;
  // For kRejected: a short lower snake case reason, also the `reason` label.
  std::string reason;
  // For kApplied: how many reports the store applied, this one included. A node's reports are
  // ordered by it whatever stream they came on (Watch's initial state uses it).
  uint64_t index = 0;
  // For kApplied: the report was shown already (Show) while the recording failed, and is sent
  // again now to be recorded. It changed nothing shown: do not diagnose or watch it again.
  bool shown_before = false;
};

class NodeStore {
 public:
  // Nodes silent for longer than `expire_after` leave the state (and /metrics). Reports outside
  // `limits` are rejected.
  explicit NodeStore(std::chrono::milliseconds expire_after, ValidationLimits limits = {});

  // Validates and applies one report received at `now`. A report whose (node, agent instance,
  // sequence) was already applied is a duplicate and changes nothing.
  ApplyResult Apply(std::shared_ptr<const v1::NodeReport> report, Clock::time_point now);

  // While the recording cannot be written: shows one report (validated as Apply does) without
  // counting it applied. It becomes the node's latest, marked unrecorded, but a report of the
  // same agent instance at or below its sequence is not a duplicate for Apply afterwards: the
  // agent sends it again once the recording works, and Apply takes it then for the record only
  // (shown_before). kDuplicate when it was shown or applied before.
  ApplyResult Show(std::shared_ptr<const v1::NodeReport> report, Clock::time_point now);

  // Seeds the dedup state of `node` (from a recording, after a restart): a report of `instance`
  // at or below `sequence` is then a duplicate. A seeded node stays out of Snapshot() until it
  // reports, and is forgotten like a silent node once `expire_after` has passed since `now`.
  void Seed(const std::string& node, const std::string& instance, uint64_t sequence,
            Clock::time_point now);

  // Puts back a node's latest report from before a restart (read from the recording): the node
  // is in Snapshot() at once, marked restored (down) until it reports again, and expires
  // `expire_after` after that report's time. Dedup stays as seeded (Seed), or, for a node
  // without a watermark, follows this report. A node that already reported is left alone.
  // False when the report is not restored for that reason.
  bool Restore(std::shared_ptr<const v1::NodeReport> report, Clock::time_point now);

  // Every live node, sorted by name. Drops nodes that expired by `now`.
  std::vector<NodeEntry> Snapshot(Clock::time_point now);

  // Nodes with a report (seeded ones not yet reporting are not counted).
  size_t size() const;

  // A reload's new expiry and limits: the next Snapshot and the next report use them.
  void Reconfigure(std::chrono::milliseconds expire_after, ValidationLimits limits);
  std::chrono::milliseconds expire_after() const;
  ValidationLimits limits() const;

 private:
  struct Slot {
    NodeEntry entry;  // entry.report is null while only seeded
    StepRateTracker steps;
    std::string instance;
    uint64_t last_sequence = 0;
    // The newest report shown unrecorded (Show), while it is not applied: its instance and
    // sequence.
    std::string shown_instance;
    uint64_t shown_sequence = 0;
  };
  // With mu_: makes `report` the node's latest.
  void ReplaceLocked(Slot& slot, std::shared_ptr<const v1::NodeReport>& report,
                     Clock::time_point now);

  mutable std::mutex mu_;
  std::chrono::milliseconds expire_after_;  // with mu_
  ValidationLimits limits_;                 // with mu_
  std::map<std::string, Slot, std::less<>> nodes_;
  uint64_t applied_ = 0;
};

}  // namespace accelmon
