// memory_fragmentation: device memory is free in total but not in one piece, so a large
// allocation fails although the device is not full.
#include <algorithm>
#include <map>
#include <string>

#include "diagnostics/rules/format.h"
#include "diagnostics/rules/rule_state.h"
#include "diagnostics/rules/rules.h"

namespace accelmon::diagnostics {
namespace {

class MemoryFragmentationRule final : public Rule {
 public:
  explicit MemoryFragmentationRule(const MemoryFragmentationConfig& config) : config_(config) {}

  // After a restart: the condition must hold for_seconds.
  double SettleSeconds() const override { return config_.for_seconds; }

  void Observe(const v1::NodeReport& report, RuleContext& context) override {
    const int64_t now = context.now_ns();
    for (const v1::DeviceTelemetry& d : report.devices()) {
      const v1::DeviceMemory& m = d.memory();
      const bool ratio_hit =
          m.has_fragmentation_ratio() && m.fragmentation_ratio() >= config_.ratio;
      const bool request_hit = config_.job_request_bytes > 0 && m.has_largest_free_block_bytes() &&
                               m.largest_free_block_bytes() < config_.job_request_bytes;
      // The allocators' cached-but-unused memory is free for the job too.
      uint64_t cached = 0;
      for (const v1::ProcessMemory& p : d.processes()) {
        if (p.has_reserved_bytes() && p.has_allocated_bytes() &&
            p.reserved_bytes() >= p.allocated_bytes()) {
          cached += p.reserved_bytes() - p.allocated_bytes();
        }
      }
      // Free memory: as reported, else what is not used (never a zero for "not reported").
      const bool known =
          m.has_total_bytes() && m.total_bytes() > 0 && (m.has_free_bytes() || m.has_used_bytes());
      const uint64_t free_bytes = !known ? 0
                                  : m.has_free_bytes()
                                      ? m.free_bytes()
                                      : m.total_bytes() - std::min(m.used_bytes(), m.total_bytes());
      const double free_share =
          known ? static_cast<double>(free_bytes + cached) / static_cast<double>(m.total_bytes())
                : 0;
      const bool holds =
          known && (ratio_hit || request_hit) && free_share >= config_.min_free_share;

      int64_t& since = DeviceStateOf(since_, d, int64_t{-1});
      if (!holds) {
        since = -1;
        continue;
      }
      if (since < 0) since = now;
      if (static_cast<double>(now - since) < config_.for_seconds * 1e9) continue;
      context.Raise(DeviceSubject(d),
                    Describe(d, free_bytes, cached, free_share, ratio_hit, since));
    }
  }

 private:
  Raised Describe(const v1::DeviceTelemetry& d, uint64_t free_bytes, uint64_t cached,
                  double free_share, bool ratio_hit, int64_t since) const {
    const v1::DeviceMemory& m = d.memory();
    const double free_total = static_cast<double>(free_bytes + cached);
    Raised r;
    r.severity = kWarning;
    r.plot = "fragmentation_ratio";
    r.start_ns = since;
    r.window_start_ns = since;  // the stretch its `for` judged
    const std::string where = "device " + std::to_string(d.identity().index());
    const std::string largest = m.has_largest_free_block_bytes()
                                    ? GibText(static_cast<double>(m.largest_free_block_bytes()))
                                    : std::string("unknown");
    if (ratio_hit) {
      r.summary = where + " memory " + PercentText(m.fragmentation_ratio()) +
                  " fragmented (largest free block " + largest + " of " + GibText(free_total) +
                  " free)";
    } else {
      r.summary = where + " largest free memory block " + largest + " is below the job request " +
                  GibText(static_cast<double>(config_.job_request_bytes)) + " (" +
                  GibText(free_total) + " free)";
    }
    if (m.has_fragmentation_ratio()) {
      r.evidence.push_back(NumberEvidence("fragmentation_ratio", m.fragmentation_ratio(), "ratio"));
    }
    if (m.has_largest_free_block_bytes()) {
      r.evidence.push_back(NumberEvidence(
          "largest_free_block_bytes", static_cast<double>(m.largest_free_block_bytes()), "bytes"));
    }
    if (!ratio_hit) {
      r.evidence.push_back(NumberEvidence("job_request_bytes",
                                          static_cast<double>(config_.job_request_bytes), "bytes"));
    }
    r.evidence.push_back(NumberEvidence("free_bytes", static_cast<double>(free_bytes), "bytes"));
    r.evidence.push_back(
        NumberEvidence("allocator_cached_bytes", static_cast<double>(cached), "bytes"));
    r.evidence.push_back(NumberEvidence("free_share", free_share, "ratio"));
    r.evidence.push_back(
        NumberEvidence("total_bytes", static_cast<double>(m.total_bytes()), "bytes"));
    return r;
  }

  const MemoryFragmentationConfig& config_;  // the engine's: a reload changes it
  // By DeviceKey: when the condition began; -1: not holding.
  std::map<std::string, int64_t, std::less<>> since_;
};

}  // namespace

std::unique_ptr<Rule> MakeMemoryFragmentationRule(const Config& config) {
  return std::make_unique<MemoryFragmentationRule>(config.memory_fragmentation);
}

}  // namespace accelmon::diagnostics
