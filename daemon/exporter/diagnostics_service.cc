#include "daemon/exporter/diagnostics_service.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <future>

#include "proto/time_format.h"
#include "recording/file_io.h"

namespace accelmon {
namespace {

using diagnostics::ToNanos;

int64_t Nanos(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

// "node=n1 device=0 link=nvlink0", leaving out what the finding is not about.
std::string Where(const v1::Finding& f) {
  std::string out = "node=" + f.node();
  if (!f.device().empty()) out += " device=" + f.device();
  if (!f.link().empty()) out += " link=" + f.link();
  return out;
}

bool Wanted(const std::set<std::string, std::less<>>& nodes, const std::string& node) {
  return nodes.empty() || nodes.count(node) != 0;
}

const std::string& NodeName(const NodeEntry& e) { return e.report->node(); }
const std::string& NodeName(const std::string& node) { return node; }

// "; began 300.0s before; caused by RULE on NODE device D; action: reset_device": what a finding
// says beyond its summary, for the log line that opens it.
std::string Context(const v1::Finding& f) {
  std::string out;
  if (f.has_detected_at() && ToNanos(f.detected_at()) > ToNanos(f.start())) {
    out += fmt::format("; began {:.1f}s before",
                       static_cast<double>(ToNanos(f.detected_at()) - ToNanos(f.start())) / 1e9);
  }
  if (!f.caused_by().empty()) out += "; caused by " + f.caused_by();
  if (!f.action().empty()) out += "; action: " + f.action();
  return out;
}

}  // namespace

// A batch of queued reports processed under one hold of mu_: fewer snapshots and flushes when
// the worker is behind, short enough that Subscribe and Findings hardly wait, and small beside a
// Watch client's queue (a burst of a batch's events must not overflow a client that keeps up).
constexpr size_t kMaxBatch = 16;

DiagnosticsService::DiagnosticsService(DiagnosticsOptions options, NodeStore& store)
    : options_(std::move(options)), store_(store), config_file_(options_.config_file) {
  if (options_.config) {
    engine_ = std::make_unique<diagnostics::Engine>(*options_.config);
    // The listener runs inside Process/ForgetNode, with mu_ held.
    engine_->set_listener(
        [this](diagnostics::Change change, const v1::Finding& f) { OnChangeLocked(change, f); });
    // Present at 0 from the start, so rate() and alerts work before the first finding.
    for (const std::string& rule : engine_->rule_ids()) {
      opened_[{rule, std::string(diagnostics::kWarning)}] = 0;
      opened_[{rule, std::string(diagnostics::kCritical)}] = 0;
    }
  }
  std::lock_guard lock(mu_);
  if (engine_) SwapSnapshotLocked(/*findings_changed=*/true);
}

DiagnosticsService::~DiagnosticsService() { Stop(); }

void DiagnosticsService::Start() {
  std::lock_guard lock(queue_mu_);
  if (worker_.joinable() || stopping_) return;
  worker_ = std::thread([this] { Run(); });
}

void DiagnosticsService::Stop() {
  {
    std::lock_guard lock(queue_mu_);
    stopping_ = true;
  }
  queue_cv_.notify_one();
  if (worker_.joinable()) worker_.join();
  // The callbacks the worker handed over run before Stop returns: they reach into the streams,
  // which may go away after it.
  std::promise<void> drained;
  notifier_.Schedule(TimerQueue::SteadyClock::now(), [&drained] { drained.set_value(); });
  drained.get_future().wait();
}

std::string DiagnosticsService::Describe() const {
  if (!engine_) return "off (--no-diagnostics)";
  std::lock_guard lock(mu_);
  const std::vector<std::string> ids = engine_->rule_ids();
  return fmt::format("{} rules ({}) with config {}", ids.size(), fmt::join(ids, ", "),
                     config_file_.empty() ? std::string("built-in defaults") : config_file_);
}

void DiagnosticsService::Reconfigure(diagnostics::Config config, std::string config_file) {
  if (!engine_) return;
  std::vector<Change> changes;
  std::vector<std::shared_ptr<Watcher>> flush;
  {
    std::lock_guard lock(mu_);  // between two batches of the worker
    engine_->Reconfigure(std::move(config));
    state_dirty_ = true;
    config_file_ = std::move(config_file);
    for (const std::string& rule : engine_->rule_ids()) {
      opened_.try_emplace({rule, std::string(diagnostics::kWarning)}, 0);
      opened_.try_emplace({rule, std::string(diagnostics::kCritical)}, 0);
    }
    DispatchLocked(nullptr, changes, flush);
    SwapSnapshotLocked(/*findings_changed=*/true);
  }
  Publish(changes, flush);
}

uint64_t DiagnosticsService::OnReport(std::shared_ptr<const v1::NodeReport> report, uint64_t index,
                                      bool unrecorded) {
  uint64_t ticket = 0;
  {
    std::lock_guard lock(queue_mu_);
    if (stopping_ || queue_.size() >= options_.queue_capacity) {
      ++dropped_;
      return 0;
    }
    ticket = ++tickets_;
    queue_.push_back({std::move(report), index, ticket, unrecorded});
  }
  queue_cv_.notify_one();
  return ticket;
}

uint64_t DiagnosticsService::LastTicket() const {
  std::lock_guard lock(queue_mu_);
  return tickets_;
}

DiagnosticsService::Settle DiagnosticsService::CallWhenSettled(uint64_t ticket, SettledFn done) {
  std::lock_guard lock(waiters_mu_);
  if (settled_.load(std::memory_order_acquire) >= ticket) return Settle::kSettled;
  if (waiters_closed_) return Settle::kNeverSaved;
  waiters_.emplace(ticket, std::move(done));
  return Settle::kWaiting;
}

size_t DiagnosticsService::RestoreState() {
  if (!engine_ || options_.state_file.empty()) return 0;
  std::string bytes;
  // ReadFileRange says why in errno, which an ifstream does not promise.
  if (!recording::ReadFileRange(options_.state_file, 0, &bytes)) {
    if (errno != ENOENT) {
      spdlog::warn("diagnostics: cannot read {}: {}; open findings start empty",
                   options_.state_file, std::strerror(errno));
    }
    return 0;
  }
  v1::DiagnosticsState state;
  if (!state.ParseFromString(bytes)) {
    spdlog::warn("diagnostics: {} is damaged; open findings start empty", options_.state_file);
    return 0;
  }
  std::lock_guard lock(mu_);
  const std::vector<v1::SavedFinding> saved(state.findings().begin(), state.findings().end());
  const size_t restored = engine_->Restore(saved);
  for (const v1::SavedFinding& s : state.findings()) engine_nodes_.insert(s.finding().node());
  SwapSnapshotLocked(/*findings_changed=*/true);
  spdlog::info("diagnostics: {} open finding(s) restored from {} (saved {})", restored,
               options_.state_file, FormatRfc3339(ToNanos(state.saved())));
  return restored;
}

std::optional<std::string> DiagnosticsService::StateToSaveLocked(Clock::time_point now,
                                                                 bool findings_changed,
                                                                 Clock::time_point* next) {
  if (options_.state_file.empty() || !engine_) return std::nullopt;
  state_dirty_ = state_dirty_ || findings_changed;
  // A change is saved soon: the reports that made it wait for it to be acknowledged. While
  // saving fails it is tried again once a second.
  const auto interval =
      save_failing_ ? std::chrono::milliseconds(1000) : options_.state_save_interval;
  const bool changed = state_dirty_ && now - last_save_ >= interval;
  if (state_dirty_ && !changed) *next = std::min(*next, last_save_ + interval);
  // While findings are open their rules' latches move on (a second XID): saved now and then.
  const bool refresh = now - last_save_ >= std::chrono::seconds(10) && engine_->HasOpenFindings();
  if (!changed && !refresh) return std::nullopt;
  last_save_ = now;
  state_dirty_ = false;
  v1::DiagnosticsState state;
  *state.mutable_saved() = TimestampFromNanos(Nanos(now));
  for (v1::SavedFinding& s : engine_->Save()) *state.add_findings() = std::move(s);
  return state.SerializeAsString();
}

bool DiagnosticsService::WriteState(const std::string& state) {
  const std::string tmp = options_.state_file + ".tmp";
  std::string error;
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out.write(state.data(), static_cast<std::streamsize>(state.size())) || !out.flush()) {
      error = std::strerror(errno);
    }
  }
  if (error.empty()) {
    // Synced before the rename: the file is the old state or the new one, never half of one.
    const int fd = ::open(tmp.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0 || ::fsync(fd) != 0) error = std::strerror(errno);
    if (fd >= 0) ::close(fd);
  }
  if (error.empty() && std::rename(tmp.c_str(), options_.state_file.c_str()) != 0) {
    error = std::strerror(errno);
  }
  if (!error.empty() && !save_failing_) {
    spdlog::warn(
        "diagnostics: cannot save the open findings to {}: {} (tried again every second; the "
        "reports that changed them are not acknowledged until it works)",
        options_.state_file, error);
  } else if (error.empty() && save_failing_) {
    spdlog::info("diagnostics: saving the open findings to {} again", options_.state_file);
  }
  save_failing_ = !error.empty();
  return error.empty();
}

void DiagnosticsService::Run() {
  std::vector<Queued> batch;
  std::vector<Change> changes;
  std::vector<std::shared_ptr<Watcher>> flush;
  std::vector<SettledFn> settled;
  std::vector<SettledFn> unsaved;
  // When a change not yet saved is due to be (sooner than the once-a-second wake-up).
  Clock::time_point next_look = Clock::time_point::max();
  for (;;) {
    bool stop = false;
    {
      std::unique_lock lock(queue_mu_);
      // Without reports, silent nodes must still close their findings (and a failed save be
      // tried again): wake once a second.
      queue_cv_.wait_until(lock, std::min(next_look, Clock::now() + std::chrono::seconds(1)),
                           [&] { return stopping_ || !queue_.empty(); });
      while (!queue_.empty() && batch.size() < kMaxBatch) {
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
      stop = stopping_ && queue_.empty();
    }
    std::optional<std::string> state;
    {
      std::lock_guard lock(mu_);
      ProcessLocked(batch, changes, flush);
      // At the end, whatever is due: a restart begins from the state at shutdown.
      if (stop) last_save_ = {};
      next_look = Clock::time_point::max();
      state = StateToSaveLocked(Clock::now(), !changes.empty() || stop, &next_look);
    }
    bool saved = true;
    if (state && !WriteState(*state)) {
      saved = false;
      std::lock_guard lock(mu_);
      state_dirty_ = true;  // tried again on a later round
    }
    if (!state) {
      std::lock_guard lock(mu_);
      saved = !state_dirty_;  // nothing changed since the last save that worked
    }
    Publish(changes, flush);
    // The reports diagnosed so far may be acknowledged: what they changed is on disk. At the
    // end, the acks still waiting are told that it is not.
    if (!batch.empty()) processed_ticket_ = batch.back().ticket;
    {
      std::lock_guard lock(waiters_mu_);
      if (saved) settled_.store(processed_ticket_, std::memory_order_release);
      const uint64_t upto = settled_.load(std::memory_order_relaxed);
      while (!waiters_.empty() && waiters_.begin()->first <= upto) {
        settled.push_back(std::move(waiters_.begin()->second));
        waiters_.erase(waiters_.begin());
      }
      if (stop) {
        waiters_closed_ = true;
        for (auto& [ticket, done] : waiters_) unsaved.push_back(std::move(done));
        waiters_.clear();
      }
    }
    if (!settled.empty() || !unsaved.empty()) {
      notifier_.Schedule(TimerQueue::SteadyClock::now(),
                         [settled = std::move(settled), unsaved = std::move(unsaved)] {
                           for (const SettledFn& done : settled) done(true);
                           for (const SettledFn& done : unsaved) done(false);
                         });
    }
    processed_ += batch.size();
    // Let the reports, watchers and callbacks go now, not after the next wait.
    settled.clear();
    unsaved.clear();
    batch.clear();
    changes.clear();
    flush.clear();
    if (stop) return;
  }
}

void DiagnosticsService::ProcessLocked(const std::vector<Queued>& batch,
                                       std::vector<Change>& changes,
                                       std::vector<std::shared_ptr<Watcher>>& flush) {
  for (const Queued& q : batch) {
    if (engine_) {
      engine_->Process(*q.report);
      engine_nodes_.insert(q.report->node());
    }
    DispatchLocked(&q, changes, flush);
  }
  const Clock::time_point now = Clock::now();
  if (engine_ && now - last_expiry_ >= std::chrono::seconds(1)) {
    ExpireNodesLocked(now);
    DispatchLocked(nullptr, changes, flush);
  }
  if (engine_) SwapSnapshotLocked(/*findings_changed=*/!changes.empty());
}

void DiagnosticsService::OnChangeLocked(diagnostics::Change change, const v1::Finding& finding) {
  auto shared = std::make_shared<const v1::Finding>(finding);
  if (change == diagnostics::Change::kClosed) {
    closed_.push_back(shared);
    while (closed_.size() > options_.closed_capacity) closed_.pop_front();
  } else {
    ++opened_[{finding.rule(), finding.severity()}];
  }
  pending_.push_back({change, std::move(shared)});
}

void DiagnosticsService::ExpireNodesLocked(Clock::time_point now) {
  last_expiry_ = now;
  // The store decides: a node leaves the diagnostics when it leaves the store (and /metrics).
  const std::vector<NodeEntry> live = store_.Snapshot(now);  // sorted by node
  for (auto it = engine_nodes_.begin(); it != engine_nodes_.end();) {
    const bool alive =
        std::binary_search(live.begin(), live.end(), *it,
                           [](const auto& a, const auto& b) { return NodeName(a) < NodeName(b); });
    if (alive) {
      ++it;
      continue;
    }
    engine_->ForgetNode(*it, Nanos(now));
    it = engine_nodes_.erase(it);
  }
}

void DiagnosticsService::DispatchLocked(const Queued* queued, std::vector<Change>& changes,
                                        std::vector<std::shared_ptr<Watcher>>& flush) {
  if (!queued && pending_.empty()) return;
  for (const std::shared_ptr<Watcher>& w : watchers_) {
    bool pushed = false;
    if (queued && w->reports() && w->Wants(queued->report->node())) {
      const auto initial = w->initial_index_.find(queued->report->node());
      // Sent in the initial state already (it was in the store before the worker got to it).
      const bool sent = initial != w->initial_index_.end() && queued->index <= initial->second;
      if (!sent) {
        w->Push({.report = queued->report, .finding = nullptr, .unrecorded = queued->unrecorded},
                false);
        pushed = true;
      }
    }
    for (const Change& c : pending_) {
      if (!w->Wants(c.finding->node())) continue;
      w->Push({.report = nullptr, .finding = c.finding}, false);
      pushed = true;
    }
    if (pushed && std::find(flush.begin(), flush.end(), w) == flush.end()) flush.push_back(w);
  }
  changes.insert(changes.end(), pending_.begin(), pending_.end());
  pending_.clear();
}

void DiagnosticsService::SwapSnapshotLocked(bool findings_changed) {
  std::shared_ptr<const FindingsSnapshot> previous;  // freed outside the lock
  std::shared_ptr<FindingsSnapshot> fresh;
  if (findings_changed) {
    // Built before taking the snapshot lock: scrapes wait for a pointer swap at most.
    fresh = std::make_shared<FindingsSnapshot>();
    for (const v1::Finding& f : engine_->OpenFindings()) {
      fresh->active.push_back({f.rule(), f.node(), f.device(), f.link(), f.severity(), f.job(),
                               f.consequence_of(), diagnostics::FindingName(f)});
    }
    fresh->opened = opened_;
  }
  std::lock_guard lock(snapshot_mu_);
  if (fresh) previous = std::exchange(snapshot_, std::move(fresh));
  // Under the same lock: a scrape's counters and findings are of the same batch.
  reports_ = engine_->stats().reports;
  out_of_order_ = engine_->stats().out_of_order;
}

void DiagnosticsService::Publish(const std::vector<Change>& changes,
                                 const std::vector<std::shared_ptr<Watcher>>& flush) {
  for (const Change& c : changes) {
    const v1::Finding& f = *c.finding;
    switch (c.change) {
      case diagnostics::Change::kOpened:
        spdlog::warn("diagnosis: opened {} {} {}: {}{}", f.rule(), f.severity(), Where(f),
                     f.summary(), Context(f));
        break;
      case diagnostics::Change::kEscalated:
        spdlog::warn("diagnosis: escalated {} to {} {}: {}", f.rule(), f.severity(), Where(f),
                     f.summary());
        break;
      case diagnostics::Change::kClosed:
        spdlog::info("diagnosis: closed {} {} {} after {:.1f}s: {}", f.rule(), f.severity(),
                     Where(f), static_cast<double>(ToNanos(f.end()) - ToNanos(f.start())) / 1e9,
                     f.summary());
        break;
    }
  }
  for (const std::shared_ptr<Watcher>& w : flush) w->Flush();
}

DiagnosticsMetrics DiagnosticsService::Metrics() const {
  DiagnosticsMetrics m;
  if (!engine_) return m;
  std::shared_ptr<const FindingsSnapshot> snapshot;
  {
    std::lock_guard lock(snapshot_mu_);
    snapshot = snapshot_;
    m.reports = reports_;
    m.out_of_order = out_of_order_;
  }
  m.enabled = true;
  m.active = snapshot->active;  // copied without the lock: the snapshot never changes
  m.opened = snapshot->opened;
  m.dropped = dropped_.load();
  return m;
}

std::vector<v1::Finding> DiagnosticsService::Findings(const std::vector<std::string>& nodes,
                                                      bool include_closed) {
  const std::set<std::string, std::less<>> wanted(nodes.begin(), nodes.end());
  std::vector<v1::Finding> out;
  std::lock_guard lock(mu_);
  if (!engine_) return out;
  for (v1::Finding& f : engine_->OpenFindings()) {
    if (Wanted(wanted, f.node())) out.push_back(std::move(f));
  }
  std::stable_sort(out.begin(), out.end(), [](const v1::Finding& a, const v1::Finding& b) {
    return ToNanos(a.start()) < ToNanos(b.start());
  });
  if (include_closed) {
    for (const auto& f : closed_) {
      if (Wanted(wanted, f->node())) out.push_back(*f);
    }
  }
  return out;
}

void DiagnosticsService::Subscribe(std::shared_ptr<Watcher> watcher, bool initial_state) {
  {
    // Under the same lock as dispatching: the findings and the events after them neither overlap
    // nor leave a gap. The store's reports may be ahead of the worker; those still queued are
    // not sent again (initial_index_).
    std::lock_guard lock(mu_);
    if (initial_state) {
      if (watcher->reports()) {
        for (const NodeEntry& e : store_.Snapshot(Clock::now())) {
          if (!watcher->Wants(e.report->node())) continue;
          watcher->Push({.report = e.report, .finding = nullptr, .unrecorded = e.unrecorded}, true);
          watcher->initial_index_[e.report->node()] = e.index;
        }
      }
      if (engine_) {
        for (const v1::Finding& f : engine_->OpenFindings()) {
          if (!watcher->Wants(f.node())) continue;
          watcher->Push({.report = nullptr, .finding = std::make_shared<const v1::Finding>(f)},
                        true);
        }
      }
    }
    watchers_.push_back(watcher);
  }
  watcher->Flush();
}

void DiagnosticsService::Unsubscribe(const Watcher* watcher) {
  std::lock_guard lock(mu_);
  std::erase_if(watchers_, [&](const std::shared_ptr<Watcher>& w) { return w.get() == watcher; });
}

}  // namespace accelmon
