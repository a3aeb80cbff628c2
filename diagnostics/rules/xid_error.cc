// xid_error: the NVIDIA driver reported an XID error for a device.
#include <algorithm>
#include <map>
#include <string>
#include <string_view>

#include "diagnostics/error_catalog.h"
#include "diagnostics/rules/rule_state.h"
#include "diagnostics/rules/rules.h"

namespace accelmon::diagnostics {
namespace {

bool Contains(const std::vector<uint64_t>& codes, uint64_t code) {
  return std::find(codes.begin(), codes.end(), code) != codes.end();
}

// How an XID is graded: the error catalogue's entry, then the config's override, then the
// `critical` list.
struct Grade {
  std::string_view name;  // empty for an XID the catalogue does not have
  std::string_view severity;
  std::string action;
};

Grade GradeOf(uint64_t code, const XidErrorConfig& config) {
  Grade g;
  g.severity = kUnknownXidSeverity;
  g.action = kUnknownXidAction;
  if (const CatalogEntry* entry = FindXid(code)) {
    g.name = entry->name;
    g.severity = entry->severity;
    g.action = entry->action;
  }
  for (const XidOverride& o : config.overrides) {
    if (o.xid != code) continue;
    if (!o.severity.empty()) g.severity = o.severity == kCritical ? kCritical : kWarning;
    if (!o.action.empty()) g.action = o.action;
  }
  if (Contains(config.critical, code)) g.severity = kCritical;
  return g;
}

class XidErrorRule final : public Rule {
 public:
  explicit XidErrorRule(const XidErrorConfig& config) : config_(config) {}

  void Observe(const v1::NodeReport& report, RuleContext& context) override {
    const int64_t now = context.now_ns();
    for (const v1::Event& e : report.events()) {
      if (e.kind() != v1::EVENT_KIND_XID || !e.has_code() || Contains(config_.ignore, e.code())) {
        continue;
      }
      const Subject subject = SubjectOf(report, e);
      const std::string key = !subject.device_uuid.empty() ? subject.device_uuid
                              : subject.device.empty()     ? std::string()
                                                           : "#" + subject.device;
      Held& held = held_[key];
      held.subject = subject;
      held.last_ns = now;
      const Grade grade = GradeOf(e.code(), config_);
      const bool critical = grade.severity == kCritical;
      // The finding's action: the latest XID's, unless that is a warning after a critical one.
      if (critical || !held.critical) held.action = grade.action;
      held.critical = held.critical || critical;
      context.Raise(subject, Describe(subject, e, grade, std::min(now, EventNs(e, now))));
    }
    // Findings stay open hold_seconds after their device's last XID.
    for (auto it = held_.begin(); it != held_.end();) {
      Held& held = it->second;
      if (held.last_ns == now) {
        ++it;
        continue;
      }
      if (static_cast<double>(now - held.last_ns) >= config_.hold_seconds * 1e9) {
        it = held_.erase(it);
        continue;
      }
      Raised again;
      again.severity = held.critical ? kCritical : kWarning;
      again.summary = "XID error recently";
      again.action = held.action;
      again.plot = "device_up";
      context.Raise(held.subject, std::move(again));
      ++it;
    }
  }

  // The time of the device's last XID and whether any was critical.
  std::string Latch(const Subject& subject) const override {
    const auto it = held_.find(SubjectKey(subject));
    if (it == held_.end()) return {};
    return LatchText({{"last_ns", it->second.last_ns}, {"critical", it->second.critical}});
  }

  // Held again until hold_seconds after the last XID (its start, without a latch).
  bool Restore(const v1::Finding& finding, std::string_view latch) override {
    const Subject subject = diagnostics::SubjectOf(finding);
    Held& held = held_[SubjectKey(subject)];
    held.subject = subject;
    held.last_ns = LatchValue(latch, "last_ns").value_or(ToNanos(finding.start()));
    held.critical = LatchValue(latch, "critical").value_or(finding.severity() == kCritical) != 0;
    held.action = finding.action();
    return true;
  }

 private:
  struct Held {
    Subject subject;
    int64_t last_ns = 0;
    bool critical = false;  // any XID since the finding opened was critical
    std::string action;     // what to do (Finding.action)
  };

  static int64_t EventNs(const v1::Event& e, int64_t now) {
    return e.has_time() ? ToNanos(e.time()) : now;
  }

  // The device the event names: found in the report by UUID, then by index; else what the event
  // says.
  static Subject SubjectOf(const v1::NodeReport& report, const v1::Event& e) {
    for (const v1::DeviceTelemetry& d : report.devices()) {
      if (!e.device_uuid().empty() && d.identity().uuid() == e.device_uuid()) {
        return DeviceSubject(d);
      }
    }
    if (e.has_device_index()) {
      for (const v1::DeviceTelemetry& d : report.devices()) {
        if (d.identity().index() == e.device_index()) return DeviceSubject(d);
      }
    }
    Subject s;
    if (e.has_device_index()) s.device = std::to_string(e.device_index());
    s.device_uuid = e.device_uuid();
    return s;
  }

  static Raised Describe(const Subject& subject, const v1::Event& e, const Grade& grade,
                         int64_t start_ns) {
    Raised r;
    r.severity = grade.severity;
    r.action = grade.action;
    r.plot = "device_up";
    r.start_ns = start_ns;
    const std::string code = std::to_string(e.code());
    r.summary = (subject.device.empty() ? std::string("node") : "device " + subject.device) +
                " XID " + code;
    if (!grade.name.empty()) r.summary += " (" + std::string(grade.name) + ")";
    r.evidence.push_back(NumberEvidence("xid", static_cast<double>(e.code()), "code"));
    if (!grade.name.empty()) r.evidence.push_back(TextEvidence("xid_name", grade.name));
    r.evidence.push_back(TextEvidence("action", grade.action));
    if (!e.message().empty()) r.evidence.push_back(TextEvidence("message", e.message()));
    return r;
  }

  const XidErrorConfig& config_;      // the engine's: a reload changes it
  std::map<std::string, Held> held_;  // by subject key
};

}  // namespace

std::unique_ptr<Rule> MakeXidErrorRule(const Config& config) {
  return std::make_unique<XidErrorRule>(config.xid_error);
}

}  // namespace accelmon::diagnostics
