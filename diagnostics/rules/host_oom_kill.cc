// host_oom_kill: the kernel's OOM killer killed a process on the node (often the training job or
// its data loader), from the vmstat counter or an OOM-kill event.
#include <algorithm>
#include <optional>
#include <string>

#include "diagnostics/rules/format.h"
#include "diagnostics/rules/rule_state.h"
#include "diagnostics/rules/rules.h"

namespace accelmon::diagnostics {
namespace {

class HostOomKillRule final : public Rule {
 public:
  explicit HostOomKillRule(const HostOomKillConfig& config) : config_(config) {}

  void Observe(const v1::NodeReport& report, RuleContext& context) override {
    const int64_t now = context.now_ns();
    const v1::HostTelemetry& host = report.host();

    // Kills since the previous report that had the counter; a lower value is a reset (reboot).
    uint64_t counted = 0;
    if (host.vmstat().has_oom_kill_total()) {
      const uint64_t total = host.vmstat().oom_kill_total();
      if (last_total_ && total > *last_total_) counted = total - *last_total_;
      last_total_ = total;
    }

    // The share of time all tasks stalled on memory since the previous report that had it.
    std::optional<double> full_stall;
    if (host.memory_pressure().has_full_total_us()) {
      const uint64_t full = host.memory_pressure().full_total_us();
      if (last_full_us_ && full >= *last_full_us_ && now > last_full_ns_) {
        full_stall = static_cast<double>(full - *last_full_us_) * 1e3 /
                     static_cast<double>(now - last_full_ns_);
      }
      last_full_us_ = full;
      last_full_ns_ = now;
    }

    int events = 0;
    int64_t first_event_ns = now;
    for (const v1::Event& e : report.events()) {
      if (e.kind() != v1::EVENT_KIND_OOM_KILL) continue;
      ++events;
      if (e.has_time()) first_event_ns = std::min(first_event_ns, ToNanos(e.time()));
    }

    if (counted > 0 || events > 0) {
      last_kill_ns_ = now;
      context.Raise(Subject{}, Describe(report, counted, events, full_stall, first_event_ns));
    } else if (last_kill_ns_ &&
               static_cast<double>(now - *last_kill_ns_) < config_.hold_seconds * 1e9) {
      // Held after the kill: the open finding keeps what it said when it opened.
      Raised held;
      held.severity = kCritical;
      held.summary = "node OOM killer killed processes recently";
      held.plot = "host_oom_kill_total";
      context.Raise(Subject{}, std::move(held));
    }
  }

  // The time of the last kill.
  std::string Latch(const Subject&) const override {
    return last_kill_ns_ ? LatchText({{"last_kill_ns", *last_kill_ns_}}) : std::string();
  }

  // Held again until hold_seconds after the last kill (the finding's start, without a latch).
  bool Restore(const v1::Finding& finding, std::string_view latch) override {
    last_kill_ns_ = LatchValue(latch, "last_kill_ns").value_or(ToNanos(finding.start()));
    return true;
  }

 private:
  Raised Describe(const v1::NodeReport& report, uint64_t counted, int events,
                  std::optional<double> full_stall, int64_t start_ns) const {
    const v1::HostMemory& mem = report.host().memory();
    const uint64_t kills = counted > 0 ? counted : static_cast<uint64_t>(events);
    Raised r;
    r.severity = kCritical;
    r.plot = "host_oom_kill_total";
    r.start_ns = start_ns;
    r.summary = "node OOM killer killed " + std::to_string(kills) +
                (kills == 1 ? " process" : " processes");
    std::string pressure;
    r.evidence.push_back(NumberEvidence("oom_kills", static_cast<double>(kills), "count"));
    std::string messages;
    for (const v1::Event& e : report.events()) {
      if (e.kind() != v1::EVENT_KIND_OOM_KILL || e.message().empty()) continue;
      messages += (messages.empty() ? "" : "; ") + e.message();
    }
    if (!messages.empty()) r.evidence.push_back(TextEvidence("oom_message", messages));
    if (mem.has_available_bytes() && mem.has_total_bytes() && mem.total_bytes() > 0) {
      const double share =
          static_cast<double>(mem.available_bytes()) / static_cast<double>(mem.total_bytes());
      r.evidence.push_back(NumberEvidence("host_memory_available_share", share, "ratio"));
      pressure = "host memory " + PercentText(share) + " available";
    }
    if (full_stall) {
      r.evidence.push_back(NumberEvidence("memory_full_stall_share", *full_stall, "ratio"));
      pressure += (pressure.empty() ? "" : ", ") + std::string("all tasks stalled on memory ") +
                  PercentText(*full_stall) + " of the time";
    }
    if (!pressure.empty()) r.summary += " (" + pressure + ")";
    return r;
  }

  const HostOomKillConfig& config_;  // the engine's: a reload changes it
  std::optional<uint64_t> last_total_;
  std::optional<uint64_t> last_full_us_;
  int64_t last_full_ns_ = 0;
  std::optional<int64_t> last_kill_ns_;
};

}  // namespace

std::unique_ptr<Rule> MakeHostOomKillRule(const Config& config) {
  return std::make_unique<HostOomKillRule>(config.host_oom_kill);
}

}  // namespace accelmon::diagnostics
