// The diagnostics engine online in the exporter: every applied report goes through it; what it
// finds is served on /metrics (accelmon_diagnosis_*), logged, queried (GetFindings) and streamed
// to Watch clients (query_service.h).
//
// Ingest only hands the applied report (the pointer the node store keeps, no copy) to a bounded
// queue and returns. One worker thread runs the rules and fans reports and findings out to the
// Watch clients, whose own bounded queues never block it. With a state file (a recording), each
// queued report gets a ticket, and the tickets up to settled() are diagnosed with what they
// changed saved there: ingest acknowledges a report only then, so a kill -9 at any moment loses no
// acknowledged finding. The ticket is compared when the recorder is done with the report (the
// worker is usually ahead by then); only an ack still waiting registers a callback
// (CallWhenSettled), so the worker never takes a stream's lock for the common case. A
// full queue drops the report for diagnostics and Watch (counted), never slowing ingest. Scrapes
// read a snapshot the worker swaps in under a short lock, never waiting on the rules. The latest
// report of each node is the node store's: there is no second copy here.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "accelmon/v1/diagnostics.pb.h"
#include "accelmon/v1/telemetry.pb.h"
#include "daemon/exporter/node_store.h"
#include "daemon/exporter/report_validator.h"
#include "daemon/exporter/timer_queue.h"
#include "diagnostics/engine.h"

namespace accelmon {

struct DiagnosticsOptions {
  // The rules' thresholds; nullopt turns diagnostics off (reports are still streamed to Watch).
  std::optional<diagnostics::Config> config = diagnostics::Config{};
  // Where `config` came from, for the start-up log; empty: the built-in defaults.
  std::string config_file;
  // Closed findings kept for GetFindings(include_closed).
  size_t closed_capacity = 1000;
  // Applied reports waiting for the worker; beyond this a report is dropped for diagnostics and
  // Watch (counted), so a stalled worker costs ingest nothing and memory at most this many.
  size_t queue_capacity = 1024;
  // Where the open findings are kept across restarts (`findings.state` beside the recording):
  // rewritten (synced) after reports changed a finding, before those reports settle; every 10 s
  // while any is open (the rules' latches move on); and at Stop. Empty: not kept.
  std::string state_file{};
  // Group commit of those rewrites: at most one this often (a flapping finding must not cost a
  // sync per report). The exporter passes the recording's sync interval: acks wait for both.
  std::chrono::milliseconds state_save_interval{100};
};

// One event for Watch clients: a report or a finding (opened, escalated or closed).
struct WatchItem {
  std::shared_ptr<const v1::NodeReport> report;
  std::shared_ptr<const v1::Finding> finding;
  bool unrecorded = false;  // a report shown while the recording failed (NodeEntry::unrecorded)
};

// A Watch client as the service sees it (query_service.cc queues and writes).
class Watcher {
 public:
  Watcher(const std::vector<std::string>& nodes, bool reports)
      : nodes_(nodes.begin(), nodes.end()), reports_(reports) {}
  virtual ~Watcher() = default;

  bool Wants(const std::string& node) const { return nodes_.empty() || nodes_.count(node) != 0; }
  bool reports() const { return reports_; }

  // Called with the service's lock held (by the diagnostics worker, or on subscribing): queue
  // `item`, never block or write. `initial` items (the state at subscription) are never dropped.
  virtual void Push(WatchItem item, bool initial) = 0;
  // Called without the lock after Push: start writing what was queued.
  virtual void Flush() = 0;

 private:
  friend class DiagnosticsService;
  const std::set<std::string, std::less<>> nodes_;
  const bool reports_;
  // With the service's lock: for each node of the initial state, the store index of the report
  // sent in it. Reports still queued for the worker at or below it were already sent.
  std::map<std::string, uint64_t, std::less<>> initial_index_;
};

// What /metrics renders (metrics_renderer.h EmitDiagnostics).
struct DiagnosticsMetrics {
  struct Active {
    std::string rule, node, device, link, severity;
    std::string job{};  // the device's job, or the job of a job-wide finding; "" when none
    std::string consequence_of{};  // its first fault ("RULE on NODE device D"); "" when none
    std::string name{};            // its own, as consequence_of names it (FindingName)
  };
  bool enabled = false;
  std::vector<Active> active;
  // Findings that opened at (or rose to) each severity, by (rule, severity); every enabled rule
  // with both severities from the start.
  std::map<std::pair<std::string, std::string>, uint64_t> opened;
  uint64_t reports = 0;
  uint64_t out_of_order = 0;
  // Applied reports the diagnostics queue had no room for (neither diagnosed nor watched).
  uint64_t dropped = 0;
};

class DiagnosticsService {
 public:
  // `store` holds the latest report of each node (for Watch's initial state) and decides when a
  // node expired; it must outlive the service.
  DiagnosticsService(DiagnosticsOptions options, NodeStore& store);
  // Stops the worker.
  ~DiagnosticsService();
  DiagnosticsService(const DiagnosticsService&) = delete;
  DiagnosticsService& operator=(const DiagnosticsService&) = delete;

  // Before Start: takes back the open findings saved in `state_file` before a restart
  // (diagnostics::Engine::Restore). Returns how many; a missing file is none, an unreadable one
  // is logged and none.
  size_t RestoreState();

  // Starts the worker thread. Until then reports wait in the queue (and overflow it).
  void Start();
  // Processes what is queued, then ends the worker. Reports handed over later are dropped.
  void Stop();

  // For every applied report (not duplicates or rejects), with the index the store gave it
  // (ApplyResult::index). Never blocks: queues the report for the worker and returns its ticket,
  // or drops and counts it when the queue is full or the worker stopped (returns 0). The report
  // must not change afterwards (it is shared with the store and Watch queues). `unrecorded`:
  // shown while the recording fails (NodeStore::Show), so marked for Watch.
  uint64_t OnReport(std::shared_ptr<const v1::NodeReport> report, uint64_t index,
                    bool unrecorded = false);
  // The ticket of the last report queued: settled once everything queued so far is (for a
  // report recorded now that was diagnosed when it was shown).
  uint64_t LastTicket() const;
  // Every ticket up to this one is diagnosed, and what it changed saved (with a state file).
  // Waits while the state file cannot be written.
  uint64_t settled() const { return settled_.load(std::memory_order_acquire); }

  // Runs on a thread of its own, without the service's locks, once `ticket` is settled (true),
  // or when the service stopped before its changes could be saved (false): the worker only hands
  // them over, never waiting for a stream's lock. Must not block.
  using SettledFn = std::function<void(bool saved)>;
  enum class Settle { kSettled, kWaiting, kNeverSaved };
  // Registers `done` for `ticket` (kWaiting); kSettled when it is settled already, kNeverSaved
  // when the worker ended without saving it (in both `done` is dropped, never called).
  Settle CallWhenSettled(uint64_t ticket, SettledFn done);

  // Whether findings are saved (diagnostics on, with a state file): only then is OnReport's
  // callback worth waiting for.
  bool saves_findings() const { return engine_ != nullptr && !options_.state_file.empty(); }

  // For /metrics: the worker's latest snapshot, taken under a short lock (never waits on the
  // rules). Nodes silent for longer than --node.expire-after are forgotten by the worker, at
  // least once a second: their findings close.
  DiagnosticsMetrics Metrics() const;

  // Open findings of `nodes` (every node when empty), oldest first; then, with
  // `include_closed`, the recently closed ones in the order they closed. Waits for the worker's
  // current batch of reports (microseconds a report).
  std::vector<v1::Finding> Findings(const std::vector<std::string>& nodes, bool include_closed);

  // Streams events to `watcher` until Unsubscribe. With `initial_state` it first gets each
  // node's latest report (when it wants reports), then the open findings; reports still queued
  // that it got in that state are not sent again.
  void Subscribe(std::shared_ptr<Watcher> watcher, bool initial_state);
  void Unsubscribe(const Watcher* watcher);

  // Reports the worker processed and fanned out, and reports dropped at a full queue: once
  // ingest is idle and the worker caught up, their sum is the reports handed over.
  uint64_t processed() const { return processed_.load(); }
  uint64_t dropped() const { return dropped_.load(); }

  bool enabled() const { return engine_ != nullptr; }
  // "N rules (a, b, ...) with config FILE" for the start-up log.
  std::string Describe() const;

  // New thresholds from `config_file` (a reload; "" for the built-in defaults): see
  // diagnostics::Engine::Reconfigure. Findings a disabled rule closes go to Watch and the log.
  // Nothing to do with diagnostics off (--no-diagnostics is not changed by a reload).
  void Reconfigure(diagnostics::Config config, std::string config_file);

 private:
  struct Change {
    diagnostics::Change change;
    std::shared_ptr<const v1::Finding> finding;
  };
  // One applied report waiting for the worker.
  struct Queued {
    std::shared_ptr<const v1::NodeReport> report;
    uint64_t index = 0;
    uint64_t ticket = 0;
    bool unrecorded = false;
  };
  // What Metrics() serves besides the counters: rebuilt by the worker when findings change.
  struct FindingsSnapshot {
    std::vector<DiagnosticsMetrics::Active> active;
    std::map<std::pair<std::string, std::string>, uint64_t> opened;
  };

  void Run();
  // With mu_ held: the rules and the fan-out of one batch; changes and watchers to flush go
  // to Publish.
  void ProcessLocked(const std::vector<Queued>& batch, std::vector<Change>& changes,
                     std::vector<std::shared_ptr<Watcher>>& flush);
  // The engine's listener, with mu_ held.
  void OnChangeLocked(diagnostics::Change change, const v1::Finding& finding);
  // Forgets the nodes the store no longer has (expired at `now`).
  void ExpireNodesLocked(Clock::time_point now);
  // Queues `report` (if any) and the pending changes to the watchers that want them; takes
  // the pending changes into `changes` and the watchers to flush into `flush`.
  void DispatchLocked(const Queued* report, std::vector<Change>& changes,
                      std::vector<std::shared_ptr<Watcher>>& flush);
  // With mu_ held, after a batch: the counters for Metrics() and, when findings changed, a fresh
  // snapshot of them.
  void SwapSnapshotLocked(bool findings_changed);
  // With mu_ held: the open findings to save (serialised), when a save is due (findings changed
  // and are not saved yet, state_save_interval after the last save; or the 10 s refresh);
  // nullopt when not. `*next` becomes when the worker must look again for a change not saved.
  std::optional<std::string> StateToSaveLocked(Clock::time_point now, bool findings_changed,
                                               Clock::time_point* next);
  // Without mu_: writes `state` to state_file (a temporary file, synced and renamed); false
  // when that failed (logged once until a save works).
  bool WriteState(const std::string& state);
  // Without mu_: logs the changes and starts the watchers' writes.
  static void Publish(const std::vector<Change>& changes,
                      const std::vector<std::shared_ptr<Watcher>>& flush);

  const DiagnosticsOptions options_;
  NodeStore& store_;
  std::string config_file_;  // with mu_; options_.config_file until a reload

  // The hand-off from ingest to the worker.
  mutable std::mutex queue_mu_;
  std::condition_variable queue_cv_;
  std::deque<Queued> queue_;
  bool stopping_ = false;
  std::thread worker_;

  // The engine and the watchers: held by the worker while it processes a batch.
  mutable std::mutex mu_;
  std::unique_ptr<diagnostics::Engine> engine_;      // null when off
  std::set<std::string, std::less<>> engine_nodes_;  // nodes the engine has seen, to expire
  std::vector<Change> pending_;                      // from the engine's listener, until dispatched
  std::deque<std::shared_ptr<const v1::Finding>> closed_;
  std::map<std::pair<std::string, std::string>, uint64_t> opened_;
  std::vector<std::shared_ptr<Watcher>> watchers_;
  Clock::time_point last_expiry_{};
  bool state_dirty_ = false;       // findings changed since the last save
  Clock::time_point last_save_{};  // with mu_
  bool save_failing_ = false;      // the worker's: logged once until a save works
  // Tickets: handed out under queue_mu_; settled_ advanced by the worker under waiters_mu_, where
  // the acks still waiting for it are kept by ticket.
  uint64_t tickets_ = 0;
  uint64_t processed_ticket_ = 0;  // the worker's: the last ticket it diagnosed
  std::atomic<uint64_t> settled_{0};
  std::mutex waiters_mu_;
  std::multimap<uint64_t, SettledFn> waiters_;
  bool waiters_closed_ = false;  // with waiters_mu_: the worker ended
  // Runs the settled waiters, a batch at a time.
  TimerQueue notifier_;

  // For scrapes: swapped under its own short lock.
  mutable std::mutex snapshot_mu_;
  std::shared_ptr<const FindingsSnapshot> snapshot_;
  uint64_t reports_ = 0;
  uint64_t out_of_order_ = 0;
  std::atomic<uint64_t> processed_{0};
  std::atomic<uint64_t> dropped_{0};
};

}  // namespace accelmon
