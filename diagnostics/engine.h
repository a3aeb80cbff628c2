// The diagnostics engine: runs every enabled rule over a stream of reports and keeps the
// findings they raise. Node rules see one node; job rules see one job across its nodes (rule.h).
// A device finding carries the device's job; a finding of a job that opens within
// `first_fault.window` after another finding of the same job started names that first fault in
// `consequence_of` (docs/diagnostics.md, "First fault"). The same engine runs online in the
// exporter (one report at a time as they are applied) and offline in `accelmon diagnose` (over a
// recording or JSON Lines).
//
// Not thread-safe: the exporter serialises calls (daemon/exporter/diagnostics_service.h).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "diagnostics/config.h"
#include "diagnostics/rule.h"

namespace accelmon::diagnostics {

enum class Change { kOpened, kEscalated, kClosed };

// Called for every finding that opens, rises in severity or closes (with `end` set).
using FindingListener = std::function<void(Change, const v1::Finding&)>;

struct EngineStats {
  uint64_t reports = 0;
  // Reports not newer than their node's previous one: skipped (rules need time order).
  uint64_t out_of_order = 0;
  uint64_t opened = 0;
  uint64_t closed = 0;
};

class Engine {
 public:
  // Runs the enabled ones of `rules` (tests pass their own).
  explicit Engine(Config config = {}, std::span<const RuleDefinition> rules = AllRules());
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  void set_listener(FindingListener listener) { listener_ = std::move(listener); }

  // New thresholds (a reload). Rules that stay enabled keep their state and judge the next report
  // by the new values; a rule enabled now starts on each node's next report; a rule disabled now
  // closes its open findings at their node's last report (through the listener).
  void Reconfigure(Config config);

  // Feeds one report. Each node's reports must come in time order; one not newer than the
  // node's previous report is skipped and counted.
  void Process(const v1::NodeReport& report);

  // The findings open now, sorted by node, then start, then rule.
  std::vector<v1::Finding> OpenFindings() const;
  // Whether any is open: OpenFindings() without the copies and the sort.
  bool HasOpenFindings() const;

  // Across a restart: the open findings with what their rules need to go on judging them
  // (Rule::Latch). The exporter saves them beside its recording.
  std::vector<v1::SavedFinding> Save() const;
  // Takes back findings saved before a restart, into an engine that has seen no report yet. Each
  // stays open as it was (start, severity, evidence, consequence): its rule takes it back
  // (Rule::Restore) and raises it while it holds, or the engine holds it until the rule raises
  // it again or has watched the node for its settle time without. The listener is not called
  // (they were announced before the restart). Findings of rules that are off now are dropped.
  // Returns how many were restored.
  size_t Restore(std::span<const v1::SavedFinding> saved);

  // Forgets a node that went away: closes its open findings at `now_ns` and drops its state.
  void ForgetNode(const std::string& node, int64_t now_ns);

  // The ids of the rules that run (enabled in the config).
  std::vector<std::string> rule_ids() const;

  const EngineStats& stats() const { return stats_; }
  const Config& config() const { return config_; }

 private:
  struct Restored;
  struct NodeState;
  struct JobState;
  struct Opening;
  class Context;
  class JobContext;

  NodeState& NodeFor(const std::string& node);
  // `report`, or a copy in which each device that reports no holder but had one, and is down or
  // has a finding open, holds its last known one again (marked last_known); keeps each device's
  // last holder with a job for that.
  const v1::NodeReport& WithLastKnownHolders(NodeState& state, const v1::NodeReport& report);
  // The job's state, made with its rule instances when it has none yet.
  JobState& JobFor(std::string_view job);
  // Runs the job rules over each job the devices of `report` (of the node `state`) hold and each
  // job that left the node; keeps the jobs the node holds now.
  void ProcessJobsOf(NodeState& state, const v1::NodeReport& report, int64_t now_ns);
  // Runs the job rules over one node's slice of `job`; drops the job once it is on no node.
  void ProcessJob(const JobSlice& slice);
  // What both contexts' Raise do with the finding they keep for the subject: one just made
  // (`opened`) is filled from `raised`, takes `job` and is announced; an open one takes a graver
  // severity, with its summary and action.
  void OpenOrEscalate(v1::Finding& finding, bool opened, std::string_view rule,
                      std::string_view node, std::string_view job, const Subject& subject,
                      Raised& raised, int64_t now_ns);
  // Ends an open finding at `end_ns` and announces it; the caller drops it.
  void Close(v1::Finding& finding, int64_t end_ns);
  // Sets `finding.consequence_of` from the job's recent openings and records this one.
  void NoteOpening(v1::Finding& finding, int64_t now_ns);
  // Sets `finding.caused_by` from the findings open on its node (kKnownCauses in engine.cc).
  void NoteCause(v1::Finding& finding) const;

  // Rules keep references into it (rule.h): assigned in place, never moved.
  Config config_;
  std::span<const RuleDefinition> all_rules_;     // enabled or not
  std::vector<const RuleDefinition*> rules_;      // enabled ones
  std::vector<const RuleDefinition*> job_rules_;  // enabled ones with a job part
  std::map<std::string, std::unique_ptr<NodeState>, std::less<>> nodes_;
  std::map<std::string, std::unique_ptr<JobState>, std::less<>> jobs_;
  std::map<std::string, std::vector<Opening>, std::less<>> openings_;  // by job
  FindingListener listener_;
  EngineStats stats_;
  std::vector<JobSlice> job_slices_;  // Process's, reused from report to report
  std::string key_scratch_;           // DeviceKeyView's
  v1::NodeReport with_last_known_;    // WithLastKnownHolders' copy, when it makes one
};

}  // namespace accelmon::diagnostics
