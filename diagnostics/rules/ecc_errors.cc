// ecc_errors: new uncorrectable ECC errors or a failed row remap (critical), or corrected errors
// at a rate that foretells failing memory (warning).
#include <algorithm>
#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "diagnostics/error_catalog.h"
#include "diagnostics/rules/format.h"
#include "diagnostics/rules/rule_state.h"
#include "diagnostics/rules/rules.h"
#include "proto/enum_labels.h"

namespace accelmon::diagnostics {
namespace {

constexpr int64_t kHourNs = 3600LL * 1'000'000'000;
// Less history than this says too little about a rate.
constexpr int64_t kMinHistoryNs = 300LL * 1'000'000'000;

class EccErrorsRule final : public Rule {
 public:
  explicit EccErrorsRule(const EccErrorsConfig& config) : config_(config) {}

  void Observe(const v1::NodeReport& report, RuleContext& context) override {
    const int64_t now = context.now_ns();
    const int64_t hold_ns = static_cast<int64_t>(config_.hold_seconds * 1e9);
    for (const v1::DeviceTelemetry& d : report.devices()) {
      const v1::DeviceErrors& e = d.errors();
      State& s = DeviceStateOf(states_, d);

      // Uncorrected: any increase over the previous report that had the counter (lower: reset).
      uint64_t new_uncorrected = 0;
      if (e.has_ecc_uncorrected_total()) {
        const uint64_t total = e.ecc_uncorrected_total();
        if (s.last_uncorrected && total > *s.last_uncorrected) {
          new_uncorrected = total - *s.last_uncorrected;
        }
        s.last_uncorrected = total;
      }

      // Corrected: the rate since the last report at or before an hour ago (since the first
      // one if there is less history).
      std::optional<double> per_hour;
      if (e.has_ecc_corrected_total()) {
        const uint64_t total = e.ecc_corrected_total();
        std::vector<Run>& runs = s.corrected;
        if (!runs.empty() && total < runs.back().total) runs.clear();  // a reset
        if (!runs.empty() && runs.back().total == total) {
          runs.back().last_ns = now;
        } else {
          runs.push_back({.first_ns = now, .last_ns = now, .total = total});
        }
        // The run holding the last report at or before the cutoff comes first; older ones go.
        const int64_t cutoff = now - kHourNs;
        size_t old = 0;
        while (old + 1 < runs.size() && runs[old + 1].first_ns <= cutoff) ++old;
        runs.erase(runs.begin(), runs.begin() + static_cast<std::ptrdiff_t>(old));
        const Run& first = runs.front();
        // That report: the run's first when it began after the cutoff, its last when it ended
        // before, else one inside it, taken as the cutoff (its reports are an interval apart).
        const int64_t first_ns =
            first.first_ns > cutoff ? first.first_ns : std::min(first.last_ns, cutoff);
        if (now - first_ns >= kMinHistoryNs) {
          per_hour = static_cast<double>(total - first.total) * 3.6e12 /
                     static_cast<double>(now - first_ns);
        }
      }
      const bool fast_corrected = per_hour && *per_hour > config_.corrected_per_hour;
      const bool remap_failed = e.has_remapped_rows_failure() && e.remapped_rows_failure();

      if (new_uncorrected > 0) s.last_uncorrected_ns = now;
      if (fast_corrected) s.last_corrected_ns = now;
      const bool critical_held = s.last_uncorrected_ns && now - *s.last_uncorrected_ns < hold_ns;
      const bool warning_held = s.last_corrected_ns && now - *s.last_corrected_ns < hold_ns;
      if (!(new_uncorrected > 0 || fast_corrected || remap_failed || critical_held ||
            warning_held)) {
        continue;
      }
      const bool critical = new_uncorrected > 0 || remap_failed || critical_held;
      context.Raise(DeviceSubject(d),
                    Describe(d, critical, new_uncorrected, per_hour, remap_failed));
    }
  }

  // When the device last had new uncorrected errors, and a corrected rate over the threshold.
  std::string Latch(const Subject& subject) const override {
    const auto it = states_.find(SubjectKey(subject));
    if (it == states_.end()) return {};
    return LatchText({{"uncorrected_ns", it->second.last_uncorrected_ns.value_or(0)},
                      {"corrected_ns", it->second.last_corrected_ns.value_or(0)}});
  }

  // Held again until hold_seconds after the last errors; without a latch, after the finding's
  // start at its severity. The counters start afresh (the first report is their baseline).
  bool Restore(const v1::Finding& finding, std::string_view latch) override {
    State& s = states_[SubjectKey(SubjectOf(finding))];
    const int64_t start = ToNanos(finding.start());
    const auto uncorrected = LatchValue(latch, "uncorrected_ns");
    const auto corrected = LatchValue(latch, "corrected_ns");
    if (uncorrected || corrected) {
      if (uncorrected.value_or(0) > 0) s.last_uncorrected_ns = *uncorrected;
      if (corrected.value_or(0) > 0) s.last_corrected_ns = *corrected;
    } else if (finding.severity() == kCritical) {
      s.last_uncorrected_ns = start;
    } else {
      s.last_corrected_ns = start;
    }
    return true;
  }

 private:
  // Consecutive reports with the same corrected total. A device without new errors keeps one
  // run, where a sample per report kept an hour of them: 3600 at 1 Hz, 57 KB a device, 460 MB
  // for 1000 nodes of 8 (bench/README.md).
  struct Run {
    int64_t first_ns;
    int64_t last_ns;
    uint64_t total;
  };
  struct State {
    std::optional<uint64_t> last_uncorrected;
    std::vector<Run> corrected;  // trailing hour, since the last counter reset
    std::optional<int64_t> last_uncorrected_ns;
    std::optional<int64_t> last_corrected_ns;
  };

  // " (in sram, dram)": the locations holding uncorrected errors since the driver loaded, or ""
  // where the device does not split its counts.
  static std::string UncorrectedLocations(const v1::DeviceErrors& e) {
    std::string out;
    for (const v1::EccLocationCounts& l : e.ecc_by_location()) {
      if (l.uncorrected_total() == 0) continue;
      out += out.empty() ? " (in " : ", ";
      out += MemoryLocationLabel(l.location());
    }
    return out.empty() ? out : out + ")";
  }

  Raised Describe(const v1::DeviceTelemetry& d, bool critical, uint64_t new_uncorrected,
                  std::optional<double> per_hour, bool remap_failed) const {
    const v1::DeviceErrors& e = d.errors();
    Raised r;
    r.severity = critical ? kCritical : kWarning;
    r.plot = critical ? "ecc_uncorrected_total" : "ecc_corrected_total";
    r.summary = "device " + std::to_string(d.identity().index());
    std::string sep = " ";
    if (new_uncorrected > 0) {
      r.summary += sep + std::to_string(new_uncorrected) + " new uncorrectable ECC error" +
                   (new_uncorrected == 1 ? "" : "s") + UncorrectedLocations(e);
      sep = ", ";
    }
    if (remap_failed) {
      r.summary += sep + "row remapping failed";
      sep = ", ";
    }
    if (per_hour && *per_hour > config_.corrected_per_hour) {
      r.summary += sep + FormatNumber(*per_hour, 0, " corrected ECC errors/h");
      sep = ", ";
    }
    if (sep == " ") r.summary += " ECC errors recently";

    if (new_uncorrected > 0) {
      r.evidence.push_back(
          NumberEvidence("ecc_uncorrected_new", static_cast<double>(new_uncorrected), "count"));
    }
    if (e.has_ecc_uncorrected_total()) {
      r.evidence.push_back(NumberEvidence("ecc_uncorrected_total",
                                          static_cast<double>(e.ecc_uncorrected_total()), "count"));
    }
    // Where they were counted, where the device says: in DRAM row remapping repairs them, in
    // on-chip SRAM it cannot.
    for (const v1::EccLocationCounts& l : e.ecc_by_location()) {
      if (l.uncorrected_total() == 0) continue;
      r.evidence.push_back(
          NumberEvidence("ecc_uncorrected_total_" + std::string(MemoryLocationLabel(l.location())),
                         static_cast<double>(l.uncorrected_total()), "count"));
    }
    if (per_hour) {
      r.evidence.push_back(NumberEvidence("ecc_corrected_per_hour", *per_hour, "count_per_hour"));
    }
    if (e.has_ecc_corrected_total()) {
      r.evidence.push_back(NumberEvidence("ecc_corrected_total",
                                          static_cast<double>(e.ecc_corrected_total()), "count"));
    }
    if (remap_failed) r.evidence.push_back(TextEvidence("remapped_rows_failure", "true"));
    // What to do, from the vendor's catalogue: the most disruptive class present.
    const std::string_view error_class = remap_failed ? kClassRowRemapFailure
                                         : critical   ? kClassEccUncorrected
                                                      : kClassEccCorrected;
    if (const CatalogEntry* entry = FindErrorClass(d.identity().vendor(), error_class)) {
      r.action = entry->action;
      r.evidence.push_back(TextEvidence("action", entry->action));
    }
    return r;
  }

  const EccErrorsConfig& config_;  // the engine's: a reload changes it
  std::map<std::string, State, std::less<>> states_;
};

}  // namespace

std::unique_ptr<Rule> MakeEccErrorsRule(const Config& config) {
  return std::make_unique<EccErrorsRule>(config.ecc_errors);
}

}  // namespace accelmon::diagnostics
