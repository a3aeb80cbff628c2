// low_sm_activity: a GPU held by a job runs its SMs far below that job's own recent median on it
// (GPM SM activity, NVIDIA Hopper and later), for minutes. nvidia-smi's utilization can stay at
// 100 % through it (some kernel is always running, a collective's wait among them): the profiling
// counter shows the device doing little. A change of job, or no job, starts the median over.
#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "diagnostics/rules/rule_state.h"
#include "diagnostics/rules/rules.h"

namespace accelmon::diagnostics {
namespace {

// The baseline is the median of this many per-bucket means (one minute each for a 30 min
// baseline): a median of a bounded ring, not of every report, so the state per GPU stays small.
constexpr int64_t kBuckets = 30;

class LowSmActivityRule final : public Rule {
 public:
  explicit LowSmActivityRule(const LowSmActivityConfig& config) : config_(config) {}

  // After a restart: a baseline, then `for` below it.
  double SettleSeconds() const override { return config_.baseline_seconds + config_.for_seconds; }

  void Observe(const v1::NodeReport& report, RuleContext& context) override {
    // A reload changed the baseline's length: the buckets span other times now, start over.
    if (BucketNanos() != bucket_ns_) {
      bucket_ns_ = BucketNanos();
      devices_ = {};
    }
    for (int i = 0; i < report.devices_size(); ++i) {
      const v1::DeviceTelemetry& device = report.devices(i);
      ObserveDevice(StateOf(i, device), device, context);
    }
  }

 private:
  struct Bucket {
    int64_t epoch = 0;
    double sum = 0;
    int64_t count = 0;
  };
  struct State {
    std::string job;  // the job the baseline belongs to
    // Oldest first, at most kBuckets + 1 (the open one last). A vector, not a deque: an empty
    // std::deque allocates ~600 bytes, and every device the rule sees has one.
    std::vector<Bucket> buckets;
    std::optional<int64_t> low_since_ns;
    double frozen_median = 0;  // the median when the low stretch began
  };

  State& StateOf(int position, const v1::DeviceTelemetry& device) {
    return devices_.Get(position, DeviceKeyView(device, key_));
  }

  int64_t BucketNanos() const {
    return std::max<int64_t>(1, static_cast<int64_t>(config_.baseline_seconds * 1e9 / kBuckets));
  }

  // The median of the closed buckets' means inside the baseline; nullopt until they cover 90 %
  // of it.
  // In a scratch vector of the rule's: this runs for every GPU of every report.
  std::optional<double> Median(const State& s, int64_t epoch) {
    std::vector<double>& means = means_;
    means.clear();
    for (const Bucket& b : s.buckets) {
      if (b.epoch < epoch && b.epoch >= epoch - kBuckets && b.count > 0) {
        means.push_back(b.sum / static_cast<double>(b.count));
      }
    }
    if (static_cast<double>(means.size()) < 0.9 * kBuckets) return std::nullopt;
    const auto middle = means.begin() + static_cast<std::ptrdiff_t>(means.size() / 2);
    std::nth_element(means.begin(), middle, means.end());
    return *middle;
  }

  void Add(State& s, int64_t epoch, double value) {
    if (s.buckets.empty() || s.buckets.back().epoch != epoch) s.buckets.push_back({epoch, 0, 0});
    s.buckets.back().sum += value;
    s.buckets.back().count += 1;
  }

  void ObserveDevice(State& s, const v1::DeviceTelemetry& device, RuleContext& context) {
    const std::string_view job = DeviceJob(device);
    if (job != s.job) {  // another job, or none: its baseline is not this one's
      s = State{};
      s.job = std::string(job);
    }
    if (job.empty() || !device.activity().has_sm_ratio()) return;

    const int64_t now = context.now_ns();
    const int64_t epoch = now / BucketNanos();
    const auto expired = std::find_if(s.buckets.begin(), s.buckets.end(),
                                      [&](const Bucket& b) { return b.epoch >= epoch - kBuckets; });
    s.buckets.erase(s.buckets.begin(), expired);
    const double sm = device.activity().sm_ratio();
    const std::optional<double> median =
        s.low_since_ns ? std::optional(s.frozen_median) : Median(s, epoch);
    const bool judged = median && *median >= config_.min_median_ratio;
    if (!judged || sm >= config_.share * *median) {
      s.low_since_ns.reset();
      Add(s, epoch, sm);
      return;
    }
    // Low: kept out of the baseline, so that the drop does not pull its own median down.
    if (!s.low_since_ns) {
      s.low_since_ns = now;
      s.frozen_median = *median;
    }
    const double seconds = static_cast<double>(now - *s.low_since_ns) / 1e9;
    if (seconds < config_.for_seconds) return;

    Raised raised;
    raised.plot = "sm_ratio";
    raised.start_ns = s.low_since_ns;
    raised.window_start_ns = *s.low_since_ns - static_cast<int64_t>(config_.baseline_seconds * 1e9);
    raised.summary = "device " + std::to_string(device.identity().index()) + " of job " +
                     std::string(job) + ": SM activity " + std::to_string(std::lround(100 * sm)) +
                     "% vs its " + std::to_string(std::lround(100 * s.frozen_median)) +
                     "% median for " + std::to_string(static_cast<int64_t>(seconds)) + " s";
    if (device.utilization().has_compute_ratio()) {
      raised.summary += " (utilization " +
                        std::to_string(std::lround(100 * device.utilization().compute_ratio())) +
                        "%)";
    }
    raised.evidence.push_back(NumberEvidence("sm_ratio", sm, "ratio"));
    raised.evidence.push_back(NumberEvidence("median_sm_ratio", s.frozen_median, "ratio"));
    raised.evidence.push_back(NumberEvidence("share", config_.share, "ratio"));
    raised.evidence.push_back(NumberEvidence("low_for", seconds, "seconds"));
    if (device.activity().has_tensor_ratio()) {
      raised.evidence.push_back(
          NumberEvidence("tensor_ratio", device.activity().tensor_ratio(), "ratio"));
    }
    if (device.utilization().has_compute_ratio()) {
      raised.evidence.push_back(
          NumberEvidence("compute_ratio", device.utilization().compute_ratio(), "ratio"));
    }
    raised.evidence.push_back(TextEvidence("job", job));
    context.Raise(DeviceSubject(device), std::move(raised));
  }

  const LowSmActivityConfig& config_;  // the engine's: a reload changes it
  int64_t bucket_ns_ = 0;              // what the buckets were cut with
  Slots<State> devices_;               // by DeviceKey
  std::string key_;                    // scratch
  std::vector<double> means_;          // scratch of Median
};

}  // namespace

std::unique_ptr<Rule> MakeLowSmActivityRule(const Config& config) {
  return std::make_unique<LowSmActivityRule>(config.low_sm_activity);
}

}  // namespace accelmon::diagnostics
