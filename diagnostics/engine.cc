#include "diagnostics/engine.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <set>
#include <tuple>

#include "diagnostics/rules/rule_state.h"

namespace accelmon::diagnostics {
namespace {

int SeverityRank(std::string_view severity) { return severity == kCritical ? 2 : 1; }

// How far before the report that opens it a finding may say it started (the longest `for` or
// trend window of the rules is well under this): openings older than this and the first-fault
// window are of no use any more.
constexpr int64_t kLongestBackdateNs = int64_t{3600} * 1'000'000'000;
// At most this many openings are kept per job (a storm of findings must not grow it unbounded).
constexpr size_t kMaxOpeningsPerJob = 256;

void FillFinding(v1::Finding& f, std::string_view rule, std::string_view node,
                 const Subject& subject, Raised& raised, int64_t now_ns) {
  f.set_rule(std::string(rule));
  f.set_severity(std::string(raised.severity));
  f.set_node(std::string(node));
  f.set_device(subject.device);
  f.set_device_uuid(subject.device_uuid);
  f.set_link(subject.link);
  const int64_t start = std::min(raised.start_ns.value_or(now_ns), now_ns);
  *f.mutable_start() = TimestampFromNanos(start);
  *f.mutable_detected_at() = TimestampFromNanos(now_ns);
  if (raised.window_start_ns) {
    *f.mutable_window_start() = TimestampFromNanos(std::min(*raised.window_start_ns, start));
  }
  f.set_action(std::move(raised.action));
  f.set_summary(std::move(raised.summary));
  for (v1::Evidence& e : raised.evidence) *f.add_evidence() = std::move(e);
  f.set_plot(std::string(raised.plot));
}

std::string KeyOf(const Subject& s) { return SubjectKey(s); }

// What explains what on one node (Finding.caused_by): an effect's known causes. A cause counts
// when it is open as the effect opens, began no later than the effect, and is on the effect's
// device (any device of the node for a finding about the whole node); the earliest-started one
// is named. docs/diagnostics.md, "Causes".
struct KnownCause {
  std::string_view effect;
  std::string_view cause;
};
constexpr KnownCause kKnownCauses[] = {
    // A device that throttles, or whose links fail, computes and communicates less.
    {"throughput_drop", "thermal_throttling"},
    {"throughput_drop", "link_down"},
    {"throughput_drop", "link_degraded"},
    {"throughput_drop", "link_flapping"},
    {"throughput_drop", "xid_error"},
    // ... and its rank falls behind the job.
    {"job_straggler", "thermal_throttling"},
    {"job_straggler", "link_down"},
    {"job_straggler", "link_degraded"},
    {"job_straggler", "link_flapping"},
    // A job hangs in its collectives when one of its devices or links fails.
    {"job_stall", "xid_error"},
    {"job_stall", "device_lost"},
    {"job_stall", "link_down"},
    {"job_stall", "host_oom_kill"},
    // XID 79 and its kin come before a device stops answering.
    {"device_lost", "xid_error"},
};

bool IsKnownCause(std::string_view effect, std::string_view cause) {
  return std::any_of(std::begin(kKnownCauses), std::end(kKnownCauses),
                     [&](const KnownCause& k) { return k.effect == effect && k.cause == cause; });
}

// `at_ns`, or the finding's start when that is later: a finding closed at another time than a
// report of its node (a reload, a report of another node of its job, its node forgotten) ends no
// earlier than it began.
int64_t NoEarlierThanStart(const v1::Finding& finding, int64_t at_ns) {
  return std::max(at_ns, ToNanos(finding.start()));
}

}  // namespace

std::string FindingName(const v1::Finding& f) {
  std::string name = f.rule() + " on " + f.node();
  if (!f.device().empty()) name += " device " + f.device();
  return name;
}

Subject SubjectOf(const v1::Finding& finding) {
  return Subject{
      .device = finding.device(), .device_uuid = finding.device_uuid(), .link = finding.link()};
}

std::string SubjectKey(const Subject& s) {
  if (!s.device_uuid.empty()) return s.device_uuid;
  return s.device.empty() ? std::string() : "#" + s.device;
}

// A finding restored after a restart that its rule did not take back (Rule::Restore false): the
// engine holds it open until the rule raises it again or settles without it.
struct Engine::Restored {
  bool pending = false;       // not raised again since the restart
  int64_t settle_ns = 0;      // the rule's SettleSeconds
  int64_t hold_until_ns = 0;  // set at the first report after the restart; 0 before

  // Whether a finding that was not raised in the report at `now_ns` stays open.
  bool Holds(int64_t now_ns) {
    if (!pending) return false;
    if (hold_until_ns == 0) hold_until_ns = now_ns + settle_ns;
    return now_ns < hold_until_ns;
  }
};

// A finding's identity on its node: which rule, which subject.
using FindingKey = std::tuple<size_t, std::string, std::string>;  // rule, device key, link

struct Engine::NodeState {
  struct Open {
    v1::Finding finding;
    std::string device_key;  // to tell whether its device is in a report
    bool raised = false;     // in the report being processed
    Restored restored{};
  };
  std::vector<std::unique_ptr<Rule>> rules;  // parallel to Engine::rules_; null: a job rule only
  std::map<FindingKey, Open> open;
  int64_t last_ns = 0;
  bool seen = false;
  std::vector<std::string> jobs;  // held by a device in the node's last report with devices
  // Per device (DeviceKey): the first holder with a job of its last report that had one, kept
  // while it reports holders, and, once it reports none, while it is down or has a finding open.
  std::map<std::string, v1::DeviceHolder, std::less<>> last_holder;

  bool HasOpenFinding(std::string_view device_key) const {
    for (const auto& [key, o] : open) {
      if (o.device_key == device_key) return true;
    }
    return false;
  }
};

// A job's findings' identity: which rule, on which node, which subject.
using JobFindingKey = std::tuple<size_t, std::string, std::string, std::string>;

struct Engine::JobState {
  struct Open {
    v1::Finding finding;
    bool raised = false;
    Restored restored{};
  };
  std::vector<std::unique_ptr<JobRule>> rules;  // parallel to Engine::job_rules_
  std::map<JobFindingKey, Open> open;
  std::set<std::string, std::less<>> nodes;  // where the job is now
};

// A finding of a job that opened: what a later one may follow from.
struct Engine::Opening {
  int64_t start_ns = 0;
  std::string name;            // NameOf
  std::string consequence_of;  // its own first fault, when it is a consequence itself
};

class Engine::Context final : public RuleContext {
 public:
  Context(Engine& engine, NodeState& state, const v1::NodeReport& report, int64_t now_ns,
          double interval_s)
      : engine_(engine), state_(state), report_(report), now_ns_(now_ns), interval_s_(interval_s) {}

  void set_rule(size_t rule) { rule_ = rule; }

  const Config& config() const override { return engine_.config_; }
  int64_t now_ns() const override { return now_ns_; }
  double interval_seconds() const override { return interval_s_; }

  void Raise(const Subject& subject, Raised raised) override {
    const std::string key = KeyOf(subject);
    auto [it, inserted] =
        state_.open.try_emplace(FindingKey{rule_, key, subject.link}, NodeState::Open{});
    NodeState::Open& open = it->second;
    open.raised = true;
    if (inserted) open.device_key = key;
    engine_.OpenOrEscalate(open.finding, inserted, engine_.rules_[rule_]->id, report_.node(),
                           inserted ? JobOf(key) : std::string_view(), subject, raised, now_ns_);
  }

  bool IsOpen(const Subject& subject) const override {
    return state_.open.count(FindingKey{rule_, KeyOf(subject), subject.link}) != 0;
  }

 private:
  // The job of the device with DeviceKey `key` (the last such device of the report); for a
  // device gone from the reports, the job it last had; empty for the node itself.
  std::string_view JobOf(const std::string& key) const {
    if (key.empty()) return {};
    std::optional<std::string_view> job;
    for (const v1::DeviceTelemetry& d : report_.devices()) {
      if (DeviceKey(d) == key) job = DeviceJob(d);
    }
    if (job) return *job;
    const auto last = state_.last_holder.find(key);
    return last == state_.last_holder.end() ? std::string_view() : last->second.job();
  }

  Engine& engine_;
  NodeState& state_;
  const v1::NodeReport& report_;
  const int64_t now_ns_;
  const double interval_s_;
  size_t rule_ = 0;
};

class Engine::JobContext final : public JobRuleContext {
 public:
  JobContext(Engine& engine, JobState& state, const JobSlice& slice)
      : engine_(engine), state_(state), slice_(slice) {}

  void set_rule(size_t rule) { rule_ = rule; }

  const Config& config() const override { return engine_.config_; }

  void Raise(std::string_view node, const Subject& subject, Raised raised) override {
    auto [it, inserted] = state_.open.try_emplace(
        JobFindingKey{rule_, std::string(node), KeyOf(subject), subject.link}, JobState::Open{});
    JobState::Open& open = it->second;
    open.raised = true;
    engine_.OpenOrEscalate(open.finding, inserted, engine_.job_rules_[rule_]->id, node, slice_.job,
                           subject, raised, slice_.now_ns);
  }

 private:
  Engine& engine_;
  JobState& state_;
  const JobSlice& slice_;
  size_t rule_ = 0;
};

std::string_view DeviceJob(const v1::DeviceTelemetry& device) {
  for (const v1::DeviceHolder& h : device.holders()) {
    if (!h.job().empty()) return h.job();
  }
  return {};
}

Subject DeviceSubject(const v1::DeviceTelemetry& device, std::string_view link) {
  return Subject{.device = std::to_string(device.identity().index()),
                 .device_uuid = device.identity().uuid(),
                 .link = std::string(link)};
}

namespace {

// Whether a device of `report` has DeviceKey `key`.
bool HasDevice(const v1::NodeReport& report, std::string_view key, std::string& scratch) {
  for (const v1::DeviceTelemetry& d : report.devices()) {
    if (DeviceKeyView(d, scratch) == key) return true;
  }
  return false;
}

}  // namespace

std::string DeviceKey(const v1::DeviceTelemetry& device) {
  return device.identity().uuid().empty() ? "#" + std::to_string(device.identity().index())
                                          : device.identity().uuid();
}

v1::Evidence NumberEvidence(std::string_view name, double value, std::string_view unit) {
  v1::Evidence e;
  e.set_name(std::string(name));
  e.set_value(value);
  e.set_unit(std::string(unit));
  return e;
}

v1::Evidence TextEvidence(std::string_view name, std::string_view text) {
  v1::Evidence e;
  e.set_name(std::string(name));
  e.set_text(std::string(text));
  return e;
}

Engine::Engine(Config config, std::span<const RuleDefinition> rules)
    : config_(std::move(config)), all_rules_(rules) {
  for (const RuleDefinition& rule : rules) {
    if (!rule.enabled(config_)) continue;
    rules_.push_back(&rule);
    if (rule.make_job != nullptr) job_rules_.push_back(&rule);
  }
}

namespace {

// Where each of `before` is in `after` (nullopt: no longer there).
std::vector<std::optional<size_t>> NewPositions(const std::vector<const RuleDefinition*>& before,
                                                const std::vector<const RuleDefinition*>& after) {
  std::vector<std::optional<size_t>> out;
  for (const RuleDefinition* rule : before) {
    const auto it = std::find(after.begin(), after.end(), rule);
    out.push_back(it == after.end() ? std::nullopt
                                    : std::optional(static_cast<size_t>(it - after.begin())));
  }
  return out;
}

}  // namespace

void Engine::Reconfigure(Config config) {
  config_ = std::move(config);  // in place: the rules' references now see the new values
  std::vector<const RuleDefinition*> rules;
  std::vector<const RuleDefinition*> job_rules;
  for (const RuleDefinition& rule : all_rules_) {
    if (!rule.enabled(config_)) continue;
    rules.push_back(&rule);
    if (rule.make_job != nullptr) job_rules.push_back(&rule);
  }
  const auto node_moves = NewPositions(rules_, rules);
  const auto job_moves = NewPositions(job_rules_, job_rules);
  const auto close = [&](v1::Finding& f, int64_t at_ns) { Close(f, NoEarlierThanStart(f, at_ns)); };

  for (auto& [name, state] : nodes_) {
    std::vector<std::unique_ptr<Rule>> kept(rules.size());
    for (size_t i = 0; i < state->rules.size(); ++i) {
      if (node_moves[i]) kept[*node_moves[i]] = std::move(state->rules[i]);
    }
    for (size_t i = 0; i < rules.size(); ++i) {
      const bool was_enabled = std::find(rules_.begin(), rules_.end(), rules[i]) != rules_.end();
      if (!was_enabled && rules[i]->make != nullptr) kept[i] = rules[i]->make(config_);
    }
    state->rules = std::move(kept);
    std::map<FindingKey, NodeState::Open> open;
    for (auto& [key, finding] : state->open) {
      const auto moved = node_moves[std::get<0>(key)];
      if (!moved) {
        close(finding.finding, state->last_ns);
        continue;
      }
      open.emplace(FindingKey{*moved, std::get<1>(key), std::get<2>(key)}, std::move(finding));
    }
    state->open = std::move(open);
  }
  for (auto& [name, state] : jobs_) {
    std::vector<std::unique_ptr<JobRule>> kept(job_rules.size());
    for (size_t i = 0; i < state->rules.size(); ++i) {
      if (job_moves[i]) kept[*job_moves[i]] = std::move(state->rules[i]);
    }
    for (size_t i = 0; i < job_rules.size(); ++i) {
      if (!kept[i]) kept[i] = job_rules[i]->make_job(config_);
    }
    state->rules = std::move(kept);
    std::map<JobFindingKey, JobState::Open> open;
    for (auto& [key, finding] : state->open) {
      const auto moved = job_moves[std::get<0>(key)];
      if (!moved) {
        const auto node = nodes_.find(std::get<1>(key));
        close(finding.finding,
              node == nodes_.end() ? ToNanos(finding.finding.start()) : node->second->last_ns);
        continue;
      }
      open.emplace(JobFindingKey{*moved, std::get<1>(key), std::get<2>(key), std::get<3>(key)},
                   std::move(finding));
    }
    state->open = std::move(open);
  }
  rules_ = std::move(rules);
  job_rules_ = std::move(job_rules);
}

Engine::~Engine() = default;

std::vector<std::string> Engine::rule_ids() const {
  std::vector<std::string> ids;
  for (const RuleDefinition* rule : rules_) ids.emplace_back(rule->id);
  return ids;
}

Engine::NodeState& Engine::NodeFor(const std::string& node) {
  auto it = nodes_.find(node);
  if (it == nodes_.end()) {
    auto state = std::make_unique<NodeState>();
    for (const RuleDefinition* rule : rules_) {
      state->rules.push_back(rule->make != nullptr ? rule->make(config_) : nullptr);
    }
    it = nodes_.emplace(node, std::move(state)).first;
  }
  return *it->second;
}

void Engine::Process(const v1::NodeReport& report) {
  const int64_t now_ns = ToNanos(report.timestamp());
  NodeState& state = NodeFor(report.node());
  if (state.seen && now_ns <= state.last_ns) {
    ++stats_.out_of_order;
    return;
  }
  ++stats_.reports;
  const double interval_s = state.seen ? static_cast<double>(now_ns - state.last_ns) / 1e9 : 0.0;
  state.seen = true;
  state.last_ns = now_ns;

  for (auto& [key, open] : state.open) open.raised = false;
  const v1::NodeReport& input = WithLastKnownHolders(state, report);
  Context context(*this, state, input, now_ns, interval_s);
  for (size_t i = 0; i < state.rules.size(); ++i) {
    if (!state.rules[i]) continue;
    context.set_rule(i);
    state.rules[i]->Observe(input, context);
  }

  // Close what was not raised again, unless its device is missing from this report.
  for (auto open = state.open.begin(); open != state.open.end();) {
    const bool device_missing = !open->second.device_key.empty() &&
                                !HasDevice(report, open->second.device_key, key_scratch_);
    if (open->second.raised) open->second.restored.pending = false;
    if (open->second.raised || device_missing || open->second.restored.Holds(now_ns)) {
      ++open;
      continue;
    }
    Close(open->second.finding, now_ns);
    open = state.open.erase(open);
  }

  // A report without devices (its device collector failed this tick) says nothing about jobs.
  if (job_rules_.empty() || report.devices().empty()) return;
  ProcessJobsOf(state, report, now_ns);
}

void Engine::ProcessJobsOf(NodeState& state, const v1::NodeReport& report, int64_t now_ns) {
  // One slice per job, in job order, in buffers kept from report to report: a steady report
  // allocates nothing here.
  size_t used = 0;
  const auto slice_of = [&](std::string_view job) -> JobSlice& {
    for (size_t i = 0; i < used; ++i) {
      if (job_slices_[i].job == job) return job_slices_[i];
    }
    if (used == job_slices_.size()) job_slices_.emplace_back();
    JobSlice& slice = job_slices_[used++];
    slice.job = job;
    slice.node = report.node();
    slice.now_ns = now_ns;
    slice.interval_ns = report.has_interval() ? ToNanos(report.interval()) : 0;
    slice.devices.clear();
    slice.communicators.clear();
    return slice;
  };
  // Devices by the holders they report: a lost device's last known job names its findings' job
  // but does not keep the job on the node (a torn-down job is gone, whatever its lost device).
  for (const v1::DeviceTelemetry& d : report.devices()) {
    const std::string_view job = DeviceJob(d);
    if (!job.empty()) slice_of(job).devices.push_back(&d);
  }
  // A communicator goes with the job of the device its first local rank is on.
  for (const v1::Communicator& c : report.communicators()) {
    for (const v1::CommunicatorRank& r : c.ranks()) {
      if (!r.local() || !r.has_device()) continue;
      const auto d = std::find_if(
          report.devices().begin(), report.devices().end(),
          [&](const v1::DeviceTelemetry& x) { return x.identity().index() == r.device(); });
      if (d == report.devices().end()) continue;
      const std::string_view job = DeviceJob(*d);
      if (!job.empty()) slice_of(job).communicators.push_back(&c);
      break;
    }
  }
  for (const std::string& job : state.jobs) slice_of(job);  // left the node: an empty slice
  const auto slices = std::span(job_slices_).first(used);
  std::sort(slices.begin(), slices.end(),
            [](const JobSlice& a, const JobSlice& b) { return a.job < b.job; });
  for (const JobSlice& slice : slices) ProcessJob(slice);
  // The jobs the node holds now (the slices' views of state.jobs are not used past here).
  size_t held = 0;
  for (const JobSlice& slice : slices) {
    if (slice.devices.empty()) continue;
    if (held < state.jobs.size()) {
      if (state.jobs[held] != slice.job) state.jobs[held] = slice.job;
    } else {
      state.jobs.emplace_back(slice.job);
    }
    ++held;
  }
  state.jobs.resize(held);
}

namespace {

bool DeviceDown(const v1::DeviceTelemetry& d) { return d.has_up() && !d.up(); }

const v1::DeviceHolder* FirstHolderWithJob(const v1::DeviceTelemetry& d) {
  for (const v1::DeviceHolder& h : d.holders()) {
    if (!h.job().empty()) return &h;
  }
  return nullptr;
}

}  // namespace

const v1::NodeReport& Engine::WithLastKnownHolders(NodeState& state, const v1::NodeReport& report) {
  bool patch = false;
  size_t present = 0;  // last_holder entries whose device is in the report
  for (const v1::DeviceTelemetry& d : report.devices()) {
    const std::string_view key = DeviceKeyView(d, key_scratch_);
    auto last = state.last_holder.find(key);
    if (const v1::DeviceHolder* h = FirstHolderWithJob(d)) {
      if (last == state.last_holder.end()) {
        state.last_holder.emplace(std::string(key), *h);
      } else if (last->second.job() != h->job() || last->second.rank() != h->rank() ||
                 last->second.pod() != h->pod()) {
        last->second = *h;
      }
      ++present;
      continue;
    }
    if (last == state.last_holder.end()) continue;
    // What a source still says (holders without a job) stands; a device that answers and has
    // nothing open has let its job go.
    if (d.holders_size() == 0 && (DeviceDown(d) || state.HasOpenFinding(key))) {
      patch = true;
      ++present;
    } else {
      state.last_holder.erase(last);
    }
  }
  // Devices missing from the report keep theirs while a finding of theirs is open.
  if (present < state.last_holder.size()) {
    for (auto it = state.last_holder.begin(); it != state.last_holder.end();) {
      if (!HasDevice(report, it->first, key_scratch_) && !state.HasOpenFinding(it->first)) {
        it = state.last_holder.erase(it);
      } else {
        ++it;
      }
    }
  }
  if (!patch) return report;
  with_last_known_ = report;
  for (v1::DeviceTelemetry& d : *with_last_known_.mutable_devices()) {
    if (d.holders_size() > 0) continue;
    const auto last = state.last_holder.find(DeviceKeyView(d, key_scratch_));
    if (last == state.last_holder.end()) continue;
    v1::DeviceHolder* h = d.add_holders();
    *h = last->second;
    h->set_last_known(true);
  }
  return with_last_known_;
}

Engine::JobState& Engine::JobFor(std::string_view job) {
  auto it = jobs_.find(job);
  if (it == jobs_.end()) {
    auto state = std::make_unique<JobState>();
    for (const RuleDefinition* rule : job_rules_) state->rules.push_back(rule->make_job(config_));
    it = jobs_.emplace(std::string(job), std::move(state)).first;
  }
  return *it->second;
}

void Engine::ProcessJob(const JobSlice& slice) {
  if (slice.devices.empty() && jobs_.find(slice.job) == jobs_.end()) return;
  JobState& job = JobFor(slice.job);
  const auto it = jobs_.find(slice.job);  // to erase it when the job is gone
  if (slice.devices.empty()) {
    if (auto node = job.nodes.find(slice.node); node != job.nodes.end()) job.nodes.erase(node);
  } else if (job.nodes.find(slice.node) == job.nodes.end()) {
    job.nodes.emplace(slice.node);
  }
  for (auto& [key, open] : job.open) open.raised = false;
  JobContext context(*this, job, slice);
  for (size_t i = 0; i < job.rules.size(); ++i) {
    context.set_rule(i);
    job.rules[i]->Observe(slice, context);
  }
  const bool gone = job.nodes.empty();  // on no node any more: all it had ends
  for (auto open = job.open.begin(); open != job.open.end();) {
    if (open->second.raised) open->second.restored.pending = false;
    if ((open->second.raised || open->second.restored.Holds(slice.now_ns)) && !gone) {
      ++open;
      continue;
    }
    Close(open->second.finding, NoEarlierThanStart(open->second.finding, slice.now_ns));
    open = job.open.erase(open);
  }
  if (gone) jobs_.erase(it);
}

void Engine::OpenOrEscalate(v1::Finding& finding, bool opened, std::string_view rule,
                            std::string_view node, std::string_view job, const Subject& subject,
                            Raised& raised, int64_t now_ns) {
  if (opened) {
    FillFinding(finding, rule, node, subject, raised, now_ns);
    finding.set_job(std::string(job));
    NoteOpening(finding, now_ns);
    NoteCause(finding);
    ++stats_.opened;
    if (listener_) listener_(Change::kOpened, finding);
  } else if (SeverityRank(raised.severity) > SeverityRank(finding.severity())) {
    finding.set_severity(std::string(raised.severity));
    finding.set_summary(std::move(raised.summary));
    if (!raised.action.empty()) finding.set_action(std::move(raised.action));  // the graver one's
    if (listener_) listener_(Change::kEscalated, finding);
  }
}

void Engine::Close(v1::Finding& finding, int64_t end_ns) {
  *finding.mutable_end() = TimestampFromNanos(end_ns);
  ++stats_.closed;
  if (listener_) listener_(Change::kClosed, finding);
}

void Engine::NoteOpening(v1::Finding& finding, int64_t now_ns) {
  if (finding.job().empty() || !config_.first_fault.enabled) return;
  const auto window_ns = static_cast<int64_t>(config_.first_fault.window_seconds * 1e9);
  const int64_t forget_before = now_ns - window_ns - kLongestBackdateNs;
  for (auto it = openings_.begin(); it != openings_.end();) {
    std::erase_if(it->second, [&](const Opening& o) { return o.start_ns < forget_before; });
    it = it->second.empty() ? openings_.erase(it) : std::next(it);
  }
  std::vector<Opening>& openings = openings_[finding.job()];
  const int64_t start = ToNanos(finding.start());
  const Opening* first = nullptr;
  for (const Opening& o : openings) {
    if (o.start_ns <= start && start - o.start_ns <= window_ns &&
        (first == nullptr || o.start_ns < first->start_ns)) {
      first = &o;
    }
  }
  // A consequence of a consequence follows from the same first fault.
  if (first != nullptr) {
    finding.set_consequence_of(first->consequence_of.empty() ? first->name : first->consequence_of);
  }
  if (openings.size() >= kMaxOpeningsPerJob) openings.erase(openings.begin());
  openings.push_back(Opening{
      .start_ns = start, .name = FindingName(finding), .consequence_of = finding.consequence_of()});
}

void Engine::NoteCause(v1::Finding& finding) const {
  const auto node = nodes_.find(finding.node());
  if (node == nodes_.end()) return;
  const std::string key = KeyOf(SubjectOf(finding));
  const v1::Finding* cause = nullptr;
  for (const auto& [open_key, open] : node->second->open) {
    const v1::Finding& c = open.finding;
    if (!IsKnownCause(finding.rule(), c.rule())) continue;
    if (!key.empty() && open.device_key != key) continue;
    // A cause begins no later than what it explains.
    if (ToNanos(c.start()) > ToNanos(finding.start())) continue;
    if (cause == nullptr || ToNanos(c.start()) < ToNanos(cause->start())) cause = &c;
  }
  if (cause != nullptr) finding.set_caused_by(FindingName(*cause));
}

bool Engine::HasOpenFindings() const {
  const auto open = [](const auto& entry) { return !entry.second->open.empty(); };
  return std::any_of(nodes_.begin(), nodes_.end(), open) ||
         std::any_of(jobs_.begin(), jobs_.end(), open);
}

std::vector<v1::Finding> Engine::OpenFindings() const {
  std::vector<v1::Finding> out;
  for (const auto& [node, state] : nodes_) {
    for (const auto& [key, open] : state->open) out.push_back(open.finding);
  }
  for (const auto& [job, state] : jobs_) {
    for (const auto& [key, open] : state->open) out.push_back(open.finding);
  }
  std::stable_sort(out.begin(), out.end(), [](const v1::Finding& a, const v1::Finding& b) {
    return std::tuple(a.node(), ToNanos(a.start()), a.rule()) <
           std::tuple(b.node(), ToNanos(b.start()), b.rule());
  });
  return out;
}

std::vector<v1::SavedFinding> Engine::Save() const {
  std::vector<v1::SavedFinding> out;
  for (const auto& [node, state] : nodes_) {
    for (const auto& [key, open] : state->open) {
      v1::SavedFinding& saved = out.emplace_back();
      *saved.mutable_finding() = open.finding;
      const auto& rule = state->rules[std::get<0>(key)];
      if (rule) saved.set_latch(rule->Latch(SubjectOf(open.finding)));
    }
  }
  for (const auto& [job, state] : jobs_) {
    for (const auto& [key, open] : state->open)
      *out.emplace_back().mutable_finding() = open.finding;
  }
  return out;
}

size_t Engine::Restore(std::span<const v1::SavedFinding> saved) {
  constexpr size_t kNone = SIZE_MAX;
  const auto position = [](const std::vector<const RuleDefinition*>& rules, std::string_view id) {
    for (size_t i = 0; i < rules.size(); ++i) {
      if (rules[i]->id == id) return i;
    }
    return kNone;
  };
  size_t restored = 0;
  for (const v1::SavedFinding& s : saved) {
    const v1::Finding& f = s.finding();
    if (f.node().empty() || f.has_end()) continue;
    const Subject subject = SubjectOf(f);
    const std::string key = SubjectKey(subject);
    // A job-wide finding belongs to its job's rule instance when the rule has a job part and
    // the finding names a job; else to the node's instance.
    const size_t job_rule = f.job().empty() ? kNone : position(job_rules_, f.rule());
    const size_t node_rule = position(rules_, f.rule());
    NodeState& node = NodeFor(f.node());
    if (job_rule != kNone && (node_rule == kNone || !node.rules[node_rule])) {
      JobState& job = JobFor(f.job());
      JobState::Open& open = job.open[JobFindingKey{job_rule, f.node(), key, subject.link}] =
          JobState::Open{};
      open.finding = f;
      open.restored =
          Restored{.pending = true,
                   .settle_ns = static_cast<int64_t>(job.rules[job_rule]->SettleSeconds() * 1e9)};
      job.nodes.insert(f.node());
      if (std::find(node.jobs.begin(), node.jobs.end(), f.job()) == node.jobs.end()) {
        node.jobs.push_back(f.job());
      }
    } else if (node_rule != kNone && node.rules[node_rule]) {
      Rule& rule = *node.rules[node_rule];
      // A lost device's finding keeps the job it had: its device keeps it as last known.
      if (!key.empty() && !f.job().empty() &&
          node.last_holder.find(key) == node.last_holder.end()) {
        v1::DeviceHolder holder;
        holder.set_job(f.job());
        holder.set_last_known(true);
        node.last_holder.emplace(key, std::move(holder));
      }
      NodeState::Open& open = node.open[FindingKey{node_rule, key, subject.link}] =
          NodeState::Open{};
      open.finding = f;
      open.device_key = key;
      const bool latched = rule.Restore(f, s.latch());
      open.restored = Restored{.pending = !latched,
                               .settle_ns = static_cast<int64_t>(rule.SettleSeconds() * 1e9)};
    } else {
      continue;  // its rule is off now
    }
    // Later findings of the job may follow from it (first fault).
    if (!f.job().empty()) {
      std::vector<Opening>& openings = openings_[f.job()];
      if (openings.size() < kMaxOpeningsPerJob) {
        openings.push_back(Opening{.start_ns = ToNanos(f.start()),
                                   .name = FindingName(f),
                                   .consequence_of = f.consequence_of()});
      }
    }
    ++restored;
  }
  return restored;
}

void Engine::ForgetNode(const std::string& node, int64_t now_ns) {
  auto it = nodes_.find(node);
  if (it == nodes_.end()) return;
  for (auto& [key, open] : it->second->open) {
    Close(open.finding, NoEarlierThanStart(open.finding, now_ns));
  }
  // Its jobs leave it (`node` may name the entry erased here: copied first).
  const std::string name = node;
  const std::vector<std::string> jobs = std::move(it->second->jobs);
  nodes_.erase(it);
  for (const std::string& job : jobs) {
    ProcessJob(JobSlice{.job = job,
                        .node = name,
                        .now_ns = now_ns,
                        .devices = {},
                        .communicators = {},
                        .interval_ns = 0});
  }
}

}  // namespace accelmon::diagnostics
