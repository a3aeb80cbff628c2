// throughput_drop: a device's compute utilization (or its total link traffic) falls under a share
// of its own trailing baseline and stays there while the job keeps its memory: the job runs, but
// slowly (a straggler rank, a slow link, a throttled peer). A job that ends frees its memory and
// starts the baseline over, so its restart ramps up against a fresh one.
#include <algorithm>
#include <array>
#include <cmath>
#include <optional>
#include <string>
#include <utility>

#include "diagnostics/rules/rule_state.h"
#include "diagnostics/rules/rules.h"

namespace accelmon::diagnostics {
namespace {

// The trailing mean over a window, in O(1) per sample: kBuckets buckets of window/kBuckets
// seconds, each with its sum, count and the time its samples cover.
class BucketWindow {
 public:
  static constexpr int64_t kBuckets = 60;

  void Reset() { *this = BucketWindow(); }

  void Add(int64_t epoch, double value, double covered_seconds) {
    Advance(epoch);
    Bucket& b = buckets_[static_cast<size_t>(epoch % kBuckets)];
    const float covered = static_cast<float>(covered_seconds);  // what the bucket keeps
    b.sum += value;
    b.count += 1;
    b.covered += covered;
    sum_ += value;
    count_ += 1;
    covered_ += covered;
  }

  // Drops buckets that fell out of the window ending in `epoch`.
  void Advance(int64_t epoch) {
    if (last_epoch_ < 0) {
      last_epoch_ = epoch;
      return;
    }
    const int64_t steps = std::min(epoch - last_epoch_, kBuckets);
    for (int64_t k = 1; k <= steps; ++k) {
      Bucket& b = buckets_[static_cast<size_t>((last_epoch_ + k) % kBuckets)];
      sum_ -= b.sum;
      count_ -= b.count;
      covered_ -= b.covered;
      b = Bucket{};
    }
    if (count_ == 0) sum_ = covered_ = 0;  // no drift from subtracting
    last_epoch_ = std::max(last_epoch_, epoch);
  }

  bool empty() const { return count_ == 0; }
  double mean() const { return count_ == 0 ? 0 : sum_ / static_cast<double>(count_); }
  double covered_seconds() const { return covered_; }

 private:
  // 16 bytes: three windows of 60 are most of what the exporter keeps per device (a 32-bit
  // count holds 136 years of 1 Hz samples; a second's coverage needs no double).
  struct Bucket {
    double sum = 0;
    uint32_t count = 0;
    float covered = 0;
  };
  static_assert(sizeof(Bucket) == 16);
  std::array<Bucket, kBuckets> buckets_{};
  int64_t last_epoch_ = -1;
  double sum_ = 0;
  int64_t count_ = 0;
  double covered_ = 0;
};

class ThroughputDropRule final : public Rule {
 public:
  explicit ThroughputDropRule(const ThroughputDropConfig& config) : config_(config) { Size(); }

  // After a restart: a baseline, then for_seconds below it.
  double SettleSeconds() const override { return config_.baseline_seconds + config_.for_seconds; }

  void Observe(const v1::NodeReport& report, RuleContext& context) override {
    // A reload changed the baseline's length: the buckets span other times now, start over.
    if (config_.baseline_seconds != baseline_seconds_) {
      Size();
      devices_ = {};
    }
    for (int i = 0; i < report.devices_size(); ++i) ObserveDevice(i, report.devices(i), context);
  }

 private:
  // One metric's baseline and the drop under it.
  struct Track {
    BucketWindow window;
    int64_t last_ns = -1;  // of the last sample added (for the time it covers)
    std::optional<int64_t> low_since_ns;
    double frozen_baseline = 0;  // the baseline when the drop began
    double last_value = 0;

    void Reset() { *this = Track(); }
  };

  struct DeviceState {
    Track compute;
    Track links;
    BucketWindow memory;
    Slots<ByteCounters> counters;  // by link name
  };

  enum class Verdict { kNormal, kLow, kUnknown };

  DeviceState& StateOf(int position, const v1::DeviceTelemetry& device) {
    return devices_.Get(position, DeviceKeyView(device, device_key_));
  }

  bool Filled(const Track& t) const {
    return t.window.covered_seconds() >= 0.9 * config_.baseline_seconds;
  }

  // Judges one sample against the track's baseline; adds it to the baseline unless it is low
  // (the drop must not pull its own baseline down). A drop begins only when the baseline is
  // filled and at least `min_baseline`, and `judged` (the device is busy enough).
  void Sample(Track& t, double value, int64_t now, double min_baseline, bool judged) {
    const int64_t epoch = now / bucket_ns_;
    t.window.Advance(epoch);
    t.last_value = value;
    const double baseline = t.low_since_ns ? t.frozen_baseline : t.window.mean();
    const bool can_judge = t.low_since_ns.has_value() ||
                           (judged && Filled(t) && baseline > 0 && baseline >= min_baseline);
    if (can_judge && value < config_.share * baseline) {
      if (!t.low_since_ns) {
        t.low_since_ns = now;
        t.frozen_baseline = baseline;
      }
      t.last_ns = now;  // the low stretch is neither in the window nor covered
      return;
    }
    t.low_since_ns.reset();
    const double covered =
        t.last_ns < 0 ? 0
                      : std::min(static_cast<double>(now - t.last_ns) / 1e9, max_cover_seconds_);
    t.window.Add(epoch, value, covered);
    t.last_ns = now;
  }

  bool Holds(const Track& t, int64_t now) const {
    return t.low_since_ns &&
           static_cast<double>(now - *t.low_since_ns) / 1e9 >= config_.for_seconds;
  }

  void ObserveDevice(int position, const v1::DeviceTelemetry& device, RuleContext& context) {
    const int64_t now = context.now_ns();
    DeviceState& d = StateOf(position, device);

    // Total link rate; unknown when any link with counters has no rate this interval.
    bool links_known = false;
    bool links_unknown = false;
    double link_rate = 0;
    d.counters.Reserve(static_cast<size_t>(device.links_size()));
    for (int j = 0; j < device.links_size(); ++j) {
      const v1::Link& link = device.links(j);
      const std::optional<double> rate = d.counters.Get(j, link.name()).Update(link, now);
      if (rate) {
        links_known = true;
        link_rate += *rate;
      } else if (link.has_transmit_bytes_total() || link.has_receive_bytes_total()) {
        links_unknown = true;  // first sample or a counter reset: skip the interval
      }
    }

    // Memory freed below its baseline: the job ended. Start over, so that neither the end nor the
    // next job's ramp is judged against the old baseline.
    const bool has_used = device.memory().has_used_bytes();
    const double used = static_cast<double>(device.memory().used_bytes());
    if (has_used && !d.memory.empty() && used < config_.memory_kept_share * d.memory.mean()) {
      d.compute.Reset();
      d.links.Reset();
      d.memory.Reset();
    }
    const double memory_baseline = d.memory.mean();
    const bool memory_known = has_used && !d.memory.empty();

    const int64_t epoch = now / bucket_ns_;
    if (has_used) {
      d.memory.Add(epoch, used, 0);
    } else {
      d.memory.Advance(epoch);
    }
    if (device.utilization().has_compute_ratio()) {
      Sample(d.compute, device.utilization().compute_ratio(), now, config_.min_baseline_ratio,
             true);
    }
    // Link traffic is judged on devices whose compute baseline is busy enough.
    const double compute_baseline =
        d.compute.low_since_ns ? d.compute.frozen_baseline : d.compute.window.mean();
    const bool busy_enough = Filled(d.compute) && compute_baseline >= config_.min_baseline_ratio;
    if (links_known && !links_unknown) Sample(d.links, link_rate, now, 0, busy_enough);

    const bool compute_drop = Holds(d.compute, now);
    const bool link_drop = busy_enough && Holds(d.links, now);
    if (!compute_drop && !link_drop) return;
    // Memory must still be allocated; absent memory cannot tell a running job from an ended one
    // (an open finding stays open through it).
    if (!memory_known && !context.IsOpen(DeviceSubject(device))) return;

    const Track& t = compute_drop ? d.compute : d.links;
    const double seconds = static_cast<double>(now - *t.low_since_ns) / 1e9;
    const std::string device_name = std::to_string(device.identity().index());
    Raised raised;
    raised.plot = "compute_ratio";
    raised.start_ns = t.low_since_ns;
    // The evidence: the baseline the drop is judged against, and the low stretch since.
    raised.window_start_ns = *t.low_since_ns - static_cast<int64_t>(config_.baseline_seconds * 1e9);
    if (compute_drop) {
      raised.summary = "device " + device_name + " compute at " +
                       std::to_string(std::lround(100 * t.last_value)) + "% vs its " +
                       std::to_string(std::lround(100 * t.frozen_baseline)) + "% baseline for " +
                       std::to_string(static_cast<int64_t>(seconds)) + " s, memory still allocated";
      raised.evidence.push_back(NumberEvidence("compute_ratio", t.last_value, "ratio"));
      raised.evidence.push_back(
          NumberEvidence("baseline_compute_ratio", t.frozen_baseline, "ratio"));
    } else {
      raised.summary = "device " + device_name + " link traffic at " +
                       std::to_string(std::lround(100 * t.last_value / t.frozen_baseline)) +
                       "% of its baseline for " + std::to_string(static_cast<int64_t>(seconds)) +
                       " s, memory still allocated";
      raised.evidence.push_back(NumberEvidence("link_rate", t.last_value, "bytes_per_second"));
      raised.evidence.push_back(
          NumberEvidence("baseline_link_rate", t.frozen_baseline, "bytes_per_second"));
    }
    raised.evidence.push_back(NumberEvidence("share", config_.share, "ratio"));
    raised.evidence.push_back(NumberEvidence("low_for", seconds, "seconds"));
    raised.evidence.push_back(NumberEvidence("memory_used", used, "bytes"));
    raised.evidence.push_back(NumberEvidence("baseline_memory_used", memory_baseline, "bytes"));
    context.Raise(DeviceSubject(device), std::move(raised));
  }

  // The baseline's buckets, from config_.baseline_seconds.
  void Size() {
    baseline_seconds_ = config_.baseline_seconds;
    bucket_ns_ = std::max<int64_t>(
        1, static_cast<int64_t>(baseline_seconds_ * 1e9 / BucketWindow::kBuckets));
    max_cover_seconds_ = std::max(60.0, 2 * baseline_seconds_ / BucketWindow::kBuckets);
  }

  const ThroughputDropConfig& config_;  // the engine's: a reload changes it
  double baseline_seconds_ = 0;         // what the buckets were sized for
  int64_t bucket_ns_ = 1;
  double max_cover_seconds_ = 60;
  Slots<DeviceState> devices_;  // by DeviceKey
  std::string device_key_;      // scratch
};

}  // namespace

std::unique_ptr<Rule> MakeThroughputDropRule(const Config& config) {
  return std::make_unique<ThroughputDropRule>(config.throughput_drop);
}

}  // namespace accelmon::diagnostics
