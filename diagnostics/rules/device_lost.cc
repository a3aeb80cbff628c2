// device_lost: a device stopped answering: it says so (up == false), the agent saw it go (a
// DEVICE_LOST event), or it vanished from the reports.
//
// A device missing from a report counts as lost when either
//  - the report still has other devices and no collector failed in it (the collector that found
//    this device ran and did not find it again), or
//  - it has been missing for at least two of the node's intervals (its reported `interval`, else
//    the shortest gap between its recent reports), so a device collector that failed one tick,
//    or a node whose only device went away, is judged on the next tick but one.
// So a loss is found at the first report without the device, or within two intervals at worst.
// `up` absent is unknown, not lost.
#include <algorithm>
#include <array>
#include <map>
#include <string>

#include "diagnostics/rules/format.h"
#include "diagnostics/rules/rules.h"

namespace accelmon::diagnostics {
namespace {

class DeviceLostRule final : public Rule {
 public:
  void Observe(const v1::NodeReport& report, RuleContext& context) override {
    const int64_t now = context.now_ns();
    ++generation_;
    const double usual_s = UsualInterval(report, context.interval_seconds());

    for (const v1::DeviceTelemetry& d : report.devices()) {
      Known& k = KnownFor(d);
      k.generation = generation_;
      k.last_seen_ns = now;
      k.missing_since_ns = -1;
      const v1::Event* event = LostEvent(report, d);
      if (d.has_up() && !d.up()) {
        context.Raise(k.subject, Describe(k.subject, "reports it is down (up=false)", now, {}));
      } else if (event != nullptr) {
        const int64_t at = event->has_time() ? std::min(now, ToNanos(event->time())) : now;
        context.Raise(k.subject,
                      Describe(k.subject, "lost (DEVICE_LOST event)", at, event->message()));
      }
    }

    bool collector_failed = false;
    for (const v1::CollectorStatus& c : report.collectors()) collector_failed |= !c.success();
    const bool others_present = report.devices_size() > 0 && !collector_failed;

    for (auto& [key, k] : known_) {
      if (k.generation == generation_) continue;
      if (k.missing_since_ns < 0) k.missing_since_ns = now;
      const double missing_s = static_cast<double>(now - k.last_seen_ns) / 1e9;
      const bool long_missing = usual_s > 0 && missing_s >= 2 * usual_s - 1e-3;
      if (!others_present && !long_missing && LostEvent(report, k.subject) == nullptr) continue;
      Raised r =
          Describe(k.subject, "missing from the reports for " + FormatNumber(missing_s, 0, " s"),
                   k.missing_since_ns, {});
      r.evidence.push_back(NumberEvidence("missing_seconds", missing_s, "seconds"));
      context.Raise(k.subject, std::move(r));
    }
  }

  // Still lost while the device is missing or down, from the finding's start; gone once it is
  // back (the missing-since time is the start, so nothing needs latching).
  bool Restore(const v1::Finding& finding, std::string_view) override {
    Known& k = known_[SubjectKey(SubjectOf(finding))];
    k.subject = SubjectOf(finding);
    k.last_seen_ns = ToNanos(finding.start());
    k.missing_since_ns = k.last_seen_ns;
    return true;
  }

 private:
  struct Known {
    Subject subject;
    int64_t last_seen_ns = 0;
    int64_t missing_since_ns = -1;  // the first report without it; -1 while present
    uint64_t generation = 0;        // of the last report that had it
  };

  Known& KnownFor(const v1::DeviceTelemetry& d) {
    const std::string& uuid = d.identity().uuid();
    if (!uuid.empty()) {
      auto it = known_.find(uuid);
      if (it != known_.end()) return it->second;
    }
    auto [it, inserted] = known_.try_emplace(DeviceKey(d));
    if (inserted) it->second.subject = DeviceSubject(d);
    return it->second;
  }

  // The node's usual interval: the one it reports, else the shortest of its last few gaps (a
  // late report must not stretch it).
  double UsualInterval(const v1::NodeReport& report, double gap_s) {
    if (gap_s > 0) {
      gaps_[next_gap_++ % gaps_.size()] = gap_s;
    }
    if (report.has_interval()) {
      const double s = static_cast<double>(report.interval().seconds()) +
                       static_cast<double>(report.interval().nanos()) / 1e9;
      if (s > 0) return s;
    }
    double shortest = 0;
    for (double g : gaps_) {
      if (g > 0 && (shortest == 0 || g < shortest)) shortest = g;
    }
    return shortest;
  }

  static bool Names(const v1::Event& e, const Subject& s) {
    if (!e.device_uuid().empty()) return e.device_uuid() == s.device_uuid;
    return e.has_device_index() && std::to_string(e.device_index()) == s.device;
  }

  static const v1::Event* LostEvent(const v1::NodeReport& report, const Subject& s) {
    for (const v1::Event& e : report.events()) {
      if (e.kind() == v1::EVENT_KIND_DEVICE_LOST && Names(e, s)) return &e;
    }
    return nullptr;
  }

  static const v1::Event* LostEvent(const v1::NodeReport& report, const v1::DeviceTelemetry& d) {
    for (const v1::Event& e : report.events()) {
      if (e.kind() != v1::EVENT_KIND_DEVICE_LOST) continue;
      if (!e.device_uuid().empty()
              ? e.device_uuid() == d.identity().uuid()
              : e.has_device_index() && e.device_index() == d.identity().index()) {
        return &e;
      }
    }
    return nullptr;
  }

  static Raised Describe(const Subject& s, std::string_view how, int64_t start_ns,
                         std::string_view message) {
    Raised r;
    r.severity = kCritical;
    r.plot = "device_up";
    r.start_ns = start_ns;
    r.summary = "device " + s.device;
    if (!s.device_uuid.empty()) r.summary += " (" + s.device_uuid + ")";
    r.summary += " " + std::string(how);
    r.evidence.push_back(TextEvidence("state", how));
    if (!message.empty()) r.evidence.push_back(TextEvidence("message", message));
    return r;
  }

  std::map<std::string, Known, std::less<>> known_;
  uint64_t generation_ = 0;
  std::array<double, 8> gaps_{};
  size_t next_gap_ = 0;
};

}  // namespace

std::unique_ptr<Rule> MakeDeviceLostRule(const Config&) {
  return std::make_unique<DeviceLostRule>();
}

}  // namespace accelmon::diagnostics
