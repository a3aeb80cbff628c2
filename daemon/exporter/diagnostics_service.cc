#include "daemon/exporter/diagnostics_service.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>

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

}  // namespace

DiagnosticsService::DiagnosticsService(DiagnosticsOptions options) : options_(std::move(options)) {
  if (!options_.config) return;
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

DiagnosticsService::~DiagnosticsService() = default;

std::string DiagnosticsService::Describe() const {
  if (!engine_) return "off (--no-diagnostics)";
  const std::vector<std::string> ids = engine_->rule_ids();
  return fmt::format(
      "{} rules ({}) with config {}", ids.size(), fmt::join(ids, ", "),
      options_.config_file.empty() ? std::string("built-in defaults") : options_.config_file);
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

void DiagnosticsService::OnReport(std::shared_ptr<const v1::NodeReport> report,
                                  Clock::time_point now) {
  std::vector<Change> changes;
  std::vector<std::shared_ptr<Watcher>> flush;
  {
    std::lock_guard lock(mu_);
    if (engine_) engine_->Process(*report);
    nodes_[report->node()] = NodeInfo{report, now};
    DispatchLocked(report, changes, flush);
    // Without scrapes, silent nodes must still close their findings: at most once a second.
    if (now - last_expiry_ >= std::chrono::seconds(1)) {
      ExpireNodesLocked(now);
      DispatchLocked(nullptr, changes, flush);
    }
  }
  Publish(changes, flush);
}

void DiagnosticsService::ExpireNodes(Clock::time_point now) {
  std::vector<Change> changes;
  std::vector<std::shared_ptr<Watcher>> flush;
  {
    std::lock_guard lock(mu_);
    ExpireNodesLocked(now);
    DispatchLocked(nullptr, changes, flush);
  }
  Publish(changes, flush);
}

void DiagnosticsService::ExpireNodesLocked(Clock::time_point now) {
  last_expiry_ = now;
  // The same test as NodeStore::Snapshot, on the same receive times: a node leaves both together.
  for (auto it = nodes_.begin(); it != nodes_.end();) {
    if (now - it->second.received_at <= options_.node_expire_after) {
      ++it;
      continue;
    }
    if (engine_) engine_->ForgetNode(it->first, Nanos(now));
    it = nodes_.erase(it);
  }
}

void DiagnosticsService::DispatchLocked(const std::shared_ptr<const v1::NodeReport>& report,
                                        std::vector<Change>& changes,
                                        std::vector<std::shared_ptr<Watcher>>& flush) {
  if (!report && pending_.empty()) return;
  for (const std::shared_ptr<Watcher>& w : watchers_) {
    bool pushed = false;
    if (report && w->reports() && w->Wants(report->node())) {
      w->Push({.report = report, .finding = nullptr}, false);
      pushed = true;
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

void DiagnosticsService::Publish(const std::vector<Change>& changes,
                                 const std::vector<std::shared_ptr<Watcher>>& flush) {
  for (const Change& c : changes) {
    const v1::Finding& f = *c.finding;
    switch (c.change) {
      case diagnostics::Change::kOpened:
        spdlog::warn("diagnosis: opened {} {} {}: {}", f.rule(), f.severity(), Where(f),
                     f.summary());
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

DiagnosticsMetrics DiagnosticsService::Metrics(Clock::time_point now) {
  ExpireNodes(now);
  DiagnosticsMetrics m;
  std::lock_guard lock(mu_);
  if (!engine_) return m;
  m.enabled = true;
  for (const v1::Finding& f : engine_->OpenFindings()) {
    m.active.push_back({f.rule(), f.node(), f.device(), f.link(), f.severity()});
  }
  m.opened = opened_;
  m.reports = engine_->stats().reports;
  m.out_of_order = engine_->stats().out_of_order;
  return m;
}

std::vector<v1::Finding> DiagnosticsService::Findings(const std::vector<std::string>& nodes,
                                                      bool include_closed) {
  ExpireNodes(Clock::now());
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
    // Under the same lock as dispatching: the state and the events after it neither overlap
    // nor leave a gap.
    std::lock_guard lock(mu_);
    if (initial_state) {
      if (watcher->reports()) {
        for (const auto& [node, info] : nodes_) {
          if (watcher->Wants(node))
            watcher->Push({.report = info.report, .finding = nullptr}, true);
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
