// thermal_throttling: a device slows itself down (or is about to) because of heat or a power cap,
// for long enough to cost throughput. Brief spikes do not count.
#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "diagnostics/rules/format.h"
#include "diagnostics/rules/rule_state.h"
#include "diagnostics/rules/rules.h"

namespace accelmon::diagnostics {
namespace {

std::string CelsiusText(double c) { return FormatNumber(c, 0, " °C"); }

// A condition held over `for` must also have been seen in this many reports in a row: with
// reports as far apart as `for` (30 s collection, `for: 30s`), two reports that both caught a
// brief power-cap touch would otherwise read as 30 s of throttling (a healthy 16-node fleet
// sampled every 30 s raised ten such findings a day).
constexpr int kMinReports = 3;

bool ReasonActive(const v1::DeviceThermal& t, const std::string& reason) {
  auto it = t.throttle_reasons().find(reason);
  return it != t.throttle_reasons().end() && it->second;
}

class ThermalThrottlingRule final : public Rule {
 public:
  explicit ThermalThrottlingRule(const ThermalThrottlingConfig& config) : config_(config) {}

  // After a restart: a reason, or the margin, must last its `for`.
  double SettleSeconds() const override {
    return std::max(config_.for_seconds, config_.margin_for_seconds);
  }

  void Observe(const v1::NodeReport& report, RuleContext& context) override {
    const int64_t now = context.now_ns();
    for (const v1::DeviceTelemetry& d : report.devices()) {
      const v1::DeviceThermal& t = d.thermal();
      State& s = DeviceStateOf(states_, d);
      if (s.reason_since.size() != config_.reasons.size()) {  // new, or the reasons reloaded
        s.reason_since.assign(config_.reasons.size(), -1);
        s.reason_reports.assign(config_.reasons.size(), 0);
      }

      // Each configured reason's own continuous run: one flickering reason does not extend
      // another's.
      int64_t start = -1;
      for (size_t i = 0; i < config_.reasons.size(); ++i) {
        if (!ReasonActive(t, config_.reasons[i])) {
          s.reason_since[i] = -1;
          s.reason_reports[i] = 0;
          continue;
        }
        if (s.reason_since[i] < 0) s.reason_since[i] = now;
        ++s.reason_reports[i];
        if (Held(s.reason_since[i], s.reason_reports[i], now, config_.for_seconds)) {
          start = start < 0 ? s.reason_since[i] : std::min(start, s.reason_since[i]);
        }
      }

      // Near the slowdown threshold (needs the threshold; an absent temperature does not
      // count). The threshold is the core's: HBM runs hotter by design and has limits of its
      // own that the sources do not report, so the memory temperature is not compared with it.
      bool near = false;
      bool at_threshold = false;
      if (t.has_slowdown_threshold_celsius() && t.has_core_celsius()) {
        const double threshold = t.slowdown_threshold_celsius();
        near = t.core_celsius() >= threshold - config_.margin_celsius;
        at_threshold = t.core_celsius() >= threshold;
      }
      if (!near) {
        s.near_since = -1;
        s.near_reports = 0;
      } else {
        if (s.near_since < 0) s.near_since = now;
        ++s.near_reports;
        if (Held(s.near_since, s.near_reports, now, config_.margin_for_seconds)) {
          start = start < 0 ? s.near_since : std::min(start, s.near_since);
        }
      }

      // Held back between the previous report and this one, by the driver's own account.
      const std::optional<Violation> violation = s.violations.Update(d.clocks(), now);
      if (!violation || config_.violation_share <= 0 ||
          violation->share() < config_.violation_share) {
        s.violation_since = -1;
        s.violation_reports = 0;
      } else {
        if (s.violation_since < 0) s.violation_since = s.violations.previous_ns();
        ++s.violation_reports;
        if (Held(s.violation_since, s.violation_reports + 1, now, config_.for_seconds)) {
          start = start < 0 ? s.violation_since : std::min(start, s.violation_since);
        }
      }

      if (start < 0) continue;
      const bool hardware = ReasonActive(t, "hw_thermal") || ReasonActive(t, "hw_slowdown");
      context.Raise(DeviceSubject(d), Describe(d, at_threshold || hardware ? kCritical : kWarning,
                                               start, now, violation));
    }
  }

 private:
  // The share of the time between two reports that the driver held the clocks back, by heat
  // and by power (violation counters, seconds).
  struct Violation {
    double thermal = 0;
    double power = 0;
    double share() const { return std::max(thermal, power); }
  };
  class ViolationCounters {
   public:
    // The shares since the previous report; nullopt without both counters in both reports, or
    // after a counter went down (a driver reload).
    std::optional<Violation> Update(const v1::DeviceClocks& c, int64_t now_ns) {
      const bool has =
          c.has_thermal_violation_seconds_total() || c.has_power_violation_seconds_total();
      std::optional<Violation> out;
      if (has && seen_ && now_ns > ns_ && c.has_thermal_violation_seconds_total() == has_thermal_ &&
          c.has_power_violation_seconds_total() == has_power_) {
        const double seconds = static_cast<double>(now_ns - ns_) / 1e9;
        const double thermal = c.thermal_violation_seconds_total() - thermal_;
        const double power = c.power_violation_seconds_total() - power_;
        if (thermal >= 0 && power >= 0) out = Violation{thermal / seconds, power / seconds};
      }
      seen_ = has;
      has_thermal_ = c.has_thermal_violation_seconds_total();
      has_power_ = c.has_power_violation_seconds_total();
      thermal_ = c.thermal_violation_seconds_total();
      power_ = c.power_violation_seconds_total();
      previous_ns_ = ns_;
      ns_ = now_ns;
      return out;
    }
    // The report before the latest one: when a share measured at the latest began.
    int64_t previous_ns() const { return previous_ns_; }

   private:
    bool seen_ = false, has_thermal_ = false, has_power_ = false;
    double thermal_ = 0, power_ = 0;
    int64_t ns_ = 0, previous_ns_ = 0;
  };

  struct State {
    std::vector<int64_t> reason_since;  // parallel to config_.reasons; -1: not active
    std::vector<int> reason_reports;    // reports in a row with the reason active
    int64_t near_since = -1;            // -1: not near the threshold
    int near_reports = 0;
    ViolationCounters violations;
    int64_t violation_since = -1;  // -1: not held back by violations
    int violation_reports = 0;     // intervals in a row held back
  };

  // A condition seen since `since` in `reports` reports in a row has lasted its `for`.
  static bool Held(int64_t since, int reports, int64_t now, double for_seconds) {
    return static_cast<double>(now - since) >= for_seconds * 1e9 &&
           (for_seconds <= 0 || reports >= kMinReports);
  }

  Raised Describe(const v1::DeviceTelemetry& d, std::string_view severity, int64_t start,
                  int64_t now, const std::optional<Violation>& violation) const {
    const v1::DeviceThermal& t = d.thermal();
    Raised r;
    r.severity = severity;
    r.plot = "core_celsius";
    r.start_ns = start;
    r.window_start_ns = start;  // the stretch its `for` judged
    // Protobuf maps iterate in no fixed order: sort for deterministic text.
    std::vector<std::string> active;
    for (const auto& [reason, on] : t.throttle_reasons()) {
      if (on) active.push_back(reason);
    }
    std::sort(active.begin(), active.end());
    std::string reasons;
    for (const std::string& a : active) reasons += (reasons.empty() ? "" : ",") + a;

    r.summary = "device " + std::to_string(d.identity().index()) + " thermal throttling for " +
                FormatNumber(static_cast<double>(now - start) / 1e9, 0, " s");
    if (!reasons.empty()) r.summary += " (" + reasons + ")";
    if (t.has_core_celsius()) r.summary += ", core " + CelsiusText(t.core_celsius());
    if (t.has_memory_celsius()) r.summary += ", memory " + CelsiusText(t.memory_celsius());
    if (t.has_slowdown_threshold_celsius()) {
      r.summary += ", slowdown at " + CelsiusText(t.slowdown_threshold_celsius());
    }
    if (violation && violation->share() > 0) {
      // "40 %": a space before the sign here, unlike PercentText, as this summary always had.
      r.summary += ", held below its clocks " + FormatNumber(violation->share() * 100, 0, " %") +
                   " of the time (" + (violation->thermal >= violation->power ? "heat" : "power") +
                   ")";
    }

    if (!reasons.empty()) r.evidence.push_back(TextEvidence("throttle_reasons", reasons));
    if (t.has_core_celsius()) {
      r.evidence.push_back(NumberEvidence("core_celsius", t.core_celsius(), "celsius"));
    }
    if (t.has_memory_celsius()) {
      r.evidence.push_back(NumberEvidence("memory_celsius", t.memory_celsius(), "celsius"));
    }
    if (t.has_slowdown_threshold_celsius()) {
      r.evidence.push_back(
          NumberEvidence("slowdown_threshold_celsius", t.slowdown_threshold_celsius(), "celsius"));
    }
    if (violation) {
      r.evidence.push_back(NumberEvidence("thermal_violation_share", violation->thermal, "ratio"));
      r.evidence.push_back(NumberEvidence("power_violation_share", violation->power, "ratio"));
    }
    r.evidence.push_back(
        NumberEvidence("duration_seconds", static_cast<double>(now - start) / 1e9, "seconds"));
    return r;
  }

  const ThermalThrottlingConfig& config_;  // the engine's: a reload changes it
  std::map<std::string, State, std::less<>> states_;
};

}  // namespace

std::unique_ptr<Rule> MakeThermalThrottlingRule(const Config& config) {
  return std::make_unique<ThermalThrottlingRule>(config.thermal_throttling);
}

}  // namespace accelmon::diagnostics
