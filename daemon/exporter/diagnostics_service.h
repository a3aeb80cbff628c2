// The diagnostics engine online in the exporter: every applied report goes through it; what it
// finds is served on /metrics (accelmon_diagnosis_*), logged, queried (GetFindings) and streamed
// to Watch clients (query_service.h).
//
// One mutex serialises the engine (Process is microseconds a report). Log lines are written and
// Watch streams are written to after it is released: a slow disk or client never holds ingest.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "accelmon/v1/diagnostics.pb.h"
#include "accelmon/v1/telemetry.pb.h"
#include "daemon/exporter/report_validator.h"
#include "diagnostics/engine.h"

namespace accelmon {

struct DiagnosticsOptions {
  // The rules' thresholds; nullopt turns diagnostics off (reports are still streamed to Watch).
  std::optional<diagnostics::Config> config = diagnostics::Config{};
  // Where `config` came from, for the start-up log; empty: the built-in defaults.
  std::string config_file;
  // As --node.expire-after: a node silent this long is forgotten and its findings close.
  std::chrono::milliseconds node_expire_after = std::chrono::minutes(10);
  // Closed findings kept for GetFindings(include_closed).
  size_t closed_capacity = 1000;
};

// One event for Watch clients: a report or a finding (opened, escalated or closed).
struct WatchItem {
  std::shared_ptr<const v1::NodeReport> report;
  std::shared_ptr<const v1::Finding> finding;
};

// A Watch client as the service sees it (query_service.cc queues and writes).
class Watcher {
 public:
  Watcher(const std::vector<std::string>& nodes, bool reports)
      : nodes_(nodes.begin(), nodes.end()), reports_(reports) {}
  virtual ~Watcher() = default;

  bool Wants(const std::string& node) const { return nodes_.empty() || nodes_.count(node) != 0; }
  bool reports() const { return reports_; }

  // Called with the service's lock held: queue `item`, never block or write. `initial` items
  // (the state at subscription) are never dropped.
  virtual void Push(WatchItem item, bool initial) = 0;
  // Called without the lock after Push: start writing what was queued.
  virtual void Flush() = 0;

 private:
  const std::set<std::string, std::less<>> nodes_;
  const bool reports_;
};

// What /metrics renders (metrics_renderer.h EmitDiagnostics).
struct DiagnosticsMetrics {
  struct Active {
    std::string rule, node, device, link, severity;
  };
  bool enabled = false;
  std::vector<Active> active;
  // Findings that opened at (or rose to) each severity, by (rule, severity); every enabled rule
  // with both severities from the start.
  std::map<std::pair<std::string, std::string>, uint64_t> opened;
  uint64_t reports = 0;
  uint64_t out_of_order = 0;
};

class DiagnosticsService {
 public:
  explicit DiagnosticsService(DiagnosticsOptions options);
  ~DiagnosticsService();
  DiagnosticsService(const DiagnosticsService&) = delete;
  DiagnosticsService& operator=(const DiagnosticsService&) = delete;

  // For every applied report (not duplicates or rejects), received at `now`. The report must not
  // change afterwards (it is shared with the store and Watch queues).
  void OnReport(std::shared_ptr<const v1::NodeReport> report, Clock::time_point now);

  // Forgets nodes silent for longer than --node.expire-after: their findings close. Cheap;
  // called on scrapes, queries and (at most once a second) on ingest.
  void ExpireNodes(Clock::time_point now);

  // For /metrics, after expiring silent nodes.
  DiagnosticsMetrics Metrics(Clock::time_point now);

  // Open findings of `nodes` (every node when empty), oldest first; then, with
  // `include_closed`, the recently closed ones in the order they closed.
  std::vector<v1::Finding> Findings(const std::vector<std::string>& nodes, bool include_closed);

  // Streams events to `watcher` until Unsubscribe. With `initial_state` it first gets each
  // node's latest report (when it wants reports), then the open findings.
  void Subscribe(std::shared_ptr<Watcher> watcher, bool initial_state);
  void Unsubscribe(const Watcher* watcher);

  bool enabled() const { return engine_ != nullptr; }
  // "N rules (a, b, ...) with config FILE" for the start-up log.
  std::string Describe() const;

 private:
  struct Change {
    diagnostics::Change change;
    std::shared_ptr<const v1::Finding> finding;
  };
  struct NodeInfo {
    std::shared_ptr<const v1::NodeReport> report;
    Clock::time_point received_at;
  };

  // The engine's listener, with mu_ held.
  void OnChangeLocked(diagnostics::Change change, const v1::Finding& finding);
  void ExpireNodesLocked(Clock::time_point now);
  // Queues `report` (if any) and the pending changes to the watchers that want them; takes
  // the pending changes into `changes` and the watchers to flush into `flush`.
  void DispatchLocked(const std::shared_ptr<const v1::NodeReport>& report,
                      std::vector<Change>& changes, std::vector<std::shared_ptr<Watcher>>& flush);
  // Without mu_: logs the changes and starts the watchers' writes.
  static void Publish(const std::vector<Change>& changes,
                      const std::vector<std::shared_ptr<Watcher>>& flush);

  const DiagnosticsOptions options_;
  mutable std::mutex mu_;
  std::unique_ptr<diagnostics::Engine> engine_;  // null when off
  std::map<std::string, NodeInfo, std::less<>> nodes_;
  std::vector<Change> pending_;  // from the engine's listener, until dispatched
  std::deque<std::shared_ptr<const v1::Finding>> closed_;
  std::map<std::pair<std::string, std::string>, uint64_t> opened_;
  std::vector<std::shared_ptr<Watcher>> watchers_;
  Clock::time_point last_expiry_{};
};

}  // namespace accelmon
