#include "diagnostics/engine.h"

#include <algorithm>
#include <set>
#include <tuple>

namespace accelmon::diagnostics {
namespace {

int SeverityRank(std::string_view severity) { return severity == kCritical ? 2 : 1; }

}  // namespace

// A finding's identity on its node: which rule, which subject.
using FindingKey = std::tuple<size_t, std::string, std::string>;  // rule, device key, link

struct Engine::NodeState {
  struct Open {
    v1::Finding finding;
    std::string device_key;  // to tell whether its device is in a report
    bool raised = false;     // in the report being processed
  };
  std::vector<std::unique_ptr<Rule>> rules;  // parallel to Engine::rules_
  std::map<FindingKey, Open> open;
  int64_t last_ns = 0;
  bool seen = false;
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
    v1::Finding& f = open.finding;
    if (inserted) {
      open.device_key = key;
      f.set_rule(std::string(engine_.rules_[rule_]->id));
      f.set_severity(std::string(raised.severity));
      f.set_node(report_.node());
      f.set_device(subject.device);
      f.set_device_uuid(subject.device_uuid);
      f.set_link(subject.link);
      *f.mutable_start() = TimestampFromNanos(std::min(raised.start_ns.value_or(now_ns_), now_ns_));
      f.set_summary(std::move(raised.summary));
      for (v1::Evidence& e : raised.evidence) *f.add_evidence() = std::move(e);
      f.set_plot(std::string(raised.plot));
      ++engine_.stats_.opened;
      if (engine_.listener_) engine_.listener_(Change::kOpened, f);
    } else if (SeverityRank(raised.severity) > SeverityRank(f.severity())) {
      f.set_severity(std::string(raised.severity));
      f.set_summary(std::move(raised.summary));
      if (engine_.listener_) engine_.listener_(Change::kEscalated, f);
    }
  }

  bool IsOpen(const Subject& subject) const override {
    return state_.open.count(FindingKey{rule_, KeyOf(subject), subject.link}) != 0;
  }

 private:
  static std::string KeyOf(const Subject& s) {
    if (!s.device_uuid.empty()) return s.device_uuid;
    return s.device.empty() ? std::string() : "#" + s.device;
  }

  Engine& engine_;
  NodeState& state_;
  const v1::NodeReport& report_;
  const int64_t now_ns_;
  const double interval_s_;
  size_t rule_ = 0;
};

Subject DeviceSubject(const v1::DeviceTelemetry& device, std::string_view link) {
  return Subject{.device = std::to_string(device.identity().index()),
                 .device_uuid = device.identity().uuid(),
                 .link = std::string(link)};
}

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

Engine::Engine(Config config, std::span<const RuleDefinition> rules) : config_(std::move(config)) {
  for (const RuleDefinition& rule : rules) {
    if (rule.enabled(config_)) rules_.push_back(&rule);
  }
}

Engine::~Engine() = default;

std::vector<std::string> Engine::rule_ids() const {
  std::vector<std::string> ids;
  for (const RuleDefinition* rule : rules_) ids.emplace_back(rule->id);
  return ids;
}

void Engine::Process(const v1::NodeReport& report) {
  const int64_t now_ns = ToNanos(report.timestamp());
  auto it = nodes_.find(report.node());
  if (it == nodes_.end()) {
    auto state = std::make_unique<NodeState>();
    for (const RuleDefinition* rule : rules_) state->rules.push_back(rule->make(config_));
    it = nodes_.emplace(report.node(), std::move(state)).first;
  }
  NodeState& state = *it->second;
  if (state.seen && now_ns <= state.last_ns) {
    ++stats_.out_of_order;
    return;
  }
  ++stats_.reports;
  const double interval_s = state.seen ? static_cast<double>(now_ns - state.last_ns) / 1e9 : 0.0;
  state.seen = true;
  state.last_ns = now_ns;

  for (auto& [key, open] : state.open) open.raised = false;
  Context context(*this, state, report, now_ns, interval_s);
  for (size_t i = 0; i < state.rules.size(); ++i) {
    context.set_rule(i);
    state.rules[i]->Observe(report, context);
  }

  // Close what was not raised again, unless its device is missing from this report.
  std::set<std::string, std::less<>> present;
  for (const v1::DeviceTelemetry& d : report.devices()) present.insert(DeviceKey(d));
  for (auto open = state.open.begin(); open != state.open.end();) {
    const bool device_missing =
        !open->second.device_key.empty() && present.count(open->second.device_key) == 0;
    if (open->second.raised || device_missing) {
      ++open;
      continue;
    }
    *open->second.finding.mutable_end() = TimestampFromNanos(now_ns);
    ++stats_.closed;
    if (listener_) listener_(Change::kClosed, open->second.finding);
    open = state.open.erase(open);
  }
}

std::vector<v1::Finding> Engine::OpenFindings() const {
  std::vector<v1::Finding> out;
  for (const auto& [node, state] : nodes_) {
    for (const auto& [key, open] : state->open) out.push_back(open.finding);
  }
  std::stable_sort(out.begin(), out.end(), [](const v1::Finding& a, const v1::Finding& b) {
    return std::tuple(a.node(), ToNanos(a.start()), a.rule()) <
           std::tuple(b.node(), ToNanos(b.start()), b.rule());
  });
  return out;
}

void Engine::ForgetNode(const std::string& node, int64_t now_ns) {
  auto it = nodes_.find(node);
  if (it == nodes_.end()) return;
  for (auto& [key, open] : it->second->open) {
    *open.finding.mutable_end() =
        TimestampFromNanos(std::max(now_ns, ToNanos(open.finding.start())));
    ++stats_.closed;
    if (listener_) listener_(Change::kClosed, open.finding);
  }
  nodes_.erase(it);
}

}  // namespace accelmon::diagnostics
