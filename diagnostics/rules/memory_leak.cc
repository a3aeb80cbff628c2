// memory_leak: device memory used grows steadily (a good straight-line fit over a trailing window)
// and at that pace fills the device within the horizon. It began where the window's flat stretch
// bends into the trend (HingeChangePoint), not at the window's first sample.
#include <algorithm>
#include <cstdio>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "diagnostics/change_point.h"
#include "diagnostics/rules/rule_state.h"
#include "diagnostics/rules/rules.h"

namespace accelmon::diagnostics {
namespace {

// The fit is redone at most this often (report time): it walks the whole window.
constexpr int64_t kRefitNs = 10'000'000'000;
// Used memory this far (share of total) below the fit or the previous sample: the job freed
// memory, and the old samples no longer describe it.
constexpr double kFreedShare = 0.2;
// At most this many samples a window: one that comes sooner than window/kMaxSamples after the
// last one kept is not kept. A sample per report was 1800 for the default 30 minutes at 1 Hz,
// 29 KB a device and a walk over all of them every refit; one in five fits the same line, with
// the same scatter about it, and places the onset to within 5 s.
constexpr int64_t kMaxSamples = 360;

struct Sample {
  int64_t ns;
  double used;
};

struct Fit {
  bool valid = false;
  double t_mean_s = 0;  // seconds since the window's first sample
  double used_mean = 0;
  double slope = 0;  // bytes per second
  double r_squared = 0;
  int64_t origin_ns = 0;  // the window's first sample

  double At(int64_t ns) const {
    return used_mean + slope * (static_cast<double>(ns - origin_ns) / 1e9 - t_mean_s);
  }
};

// Least squares over the samples, centred on their means before squaring (bytes are ~1e10, their
// squares would lose the variance in rounding otherwise).
Fit FitLine(const std::deque<Sample>& samples) {
  Fit f;
  if (samples.size() < 3) return f;
  f.origin_ns = samples.front().ns;
  const double n = static_cast<double>(samples.size());
  double t_sum = 0;
  double y_sum = 0;
  for (const Sample& s : samples) {
    t_sum += static_cast<double>(s.ns - f.origin_ns) / 1e9;
    y_sum += s.used;
  }
  f.t_mean_s = t_sum / n;
  f.used_mean = y_sum / n;
  double stt = 0;
  double sty = 0;
  double syy = 0;
  for (const Sample& s : samples) {
    const double dt = static_cast<double>(s.ns - f.origin_ns) / 1e9 - f.t_mean_s;
    const double dy = s.used - f.used_mean;
    stt += dt * dt;
    sty += dt * dy;
    syy += dy * dy;
  }
  if (stt <= 0 || syy <= 0) return f;
  f.slope = sty / stt;
  f.r_squared = sty * sty / (stt * syy);
  f.valid = true;
  return f;
}

class MemoryLeakRule final : public Rule {
 public:
  explicit MemoryLeakRule(const MemoryLeakConfig& config) : config_(config) {}

  // After a restart: the trend is fitted over the window.
  double SettleSeconds() const override { return config_.window_seconds; }

  void Observe(const v1::NodeReport& report, RuleContext& context) override {
    const int64_t now = context.now_ns();
    const int64_t window_ns = static_cast<int64_t>(config_.window_seconds * 1e9);
    for (const v1::DeviceTelemetry& d : report.devices()) {
      const v1::DeviceMemory& m = d.memory();
      if (!m.has_used_bytes() || !m.has_total_bytes() || m.total_bytes() == 0) continue;
      State& s = DeviceStateOf(states_, d);
      const double used = static_cast<double>(m.used_bytes());
      const double freed = kFreedShare * static_cast<double>(m.total_bytes());
      if (!s.samples.empty() &&
          (used < s.samples.back().used - freed || (s.fit.valid && used < s.fit.At(now) - freed))) {
        s.samples.clear();
        s.fit = Fit{};
        s.fitted = false;
        s.leaking = false;
      }
      if (s.samples.empty() || now - s.samples.back().ns >= window_ns / kMaxSamples) {
        s.samples.push_back({now, used});
      }
      while (now - s.samples.front().ns > window_ns) s.samples.pop_front();

      const bool spans =
          static_cast<double>(now - s.samples.front().ns) >= 0.9 * config_.window_seconds * 1e9;
      if (!spans) {
        s.leaking = false;
      } else if (!s.fitted || now - s.fitted_ns >= kRefitNs) {
        s.fit = FitLine(s.samples);
        s.fitted = true;
        s.fitted_ns = now;
        s.leaking = Leaking(s.fit, m, used);
      }
      if (!s.leaking) continue;
      const Subject subject = DeviceSubject(d);
      // The onset is estimated once, when the finding opens; an open one keeps its start.
      const int64_t onset = context.IsOpen(subject) ? s.samples.front().ns : Onset(s.samples);
      Raised raised = Describe(d, s.fit, used, onset);
      raised.window_start_ns = s.samples.front().ns;
      context.Raise(subject, std::move(raised));
    }
  }

 private:
  struct State {
    std::deque<Sample> samples;
    Fit fit;
    bool fitted = false;  // since the window was last reset
    int64_t fitted_ns = 0;
    bool leaking = false;
  };

  // When the growth began: the bend of the best flat-then-rising fit over the window.
  static int64_t Onset(const std::deque<Sample>& samples) {
    std::vector<double> t;
    std::vector<double> y;
    t.reserve(samples.size());
    y.reserve(samples.size());
    for (const Sample& x : samples) {
      t.push_back(static_cast<double>(x.ns - samples.front().ns) / 1e9);
      y.push_back(x.used);
    }
    return samples[HingeChangePoint(t, y)].ns;
  }

  static double Headroom(const v1::DeviceMemory& m, double used) {
    double headroom = static_cast<double>(m.total_bytes()) - used;
    if (m.has_reserved_bytes()) headroom -= static_cast<double>(m.reserved_bytes());
    return std::max(headroom, 0.0);
  }

  bool Leaking(const Fit& f, const v1::DeviceMemory& m, double used) const {
    if (!f.valid || f.slope <= 0 || f.slope < config_.min_bytes_per_second ||
        f.r_squared < config_.min_r_squared) {
      return false;
    }
    return Headroom(m, used) / f.slope <= config_.horizon_seconds;
  }

  Raised Describe(const v1::DeviceTelemetry& d, const Fit& f, double used, int64_t start) const {
    const v1::DeviceMemory& m = d.memory();
    const double total = static_cast<double>(m.total_bytes());
    const double exhaustion = Headroom(m, used) / f.slope;
    char buf[160];
    std::snprintf(buf, sizeof buf,
                  " memory used grows %.1f MiB/s (R^2 %.2f): %.1f GiB of %.1f GiB used, full in "
                  "about %.0f min",
                  f.slope / kMiB, f.r_squared, used / kGiB, total / kGiB, exhaustion / 60);
    Raised r;
    r.severity = kWarning;
    r.plot = "memory_used_bytes";
    r.start_ns = start;
    r.summary = "device " + std::to_string(d.identity().index()) + buf;
    r.evidence = {NumberEvidence("slope_bytes_per_second", f.slope, "bytes_per_second"),
                  NumberEvidence("r_squared", f.r_squared, "ratio"),
                  NumberEvidence("exhaustion_seconds", exhaustion, "seconds"),
                  NumberEvidence("used_bytes", used, "bytes"),
                  NumberEvidence("total_bytes", total, "bytes")};
    return r;
  }

  const MemoryLeakConfig& config_;  // the engine's: a reload changes it
  std::map<std::string, State, std::less<>> states_;
};

}  // namespace

std::unique_ptr<Rule> MakeMemoryLeakRule(const Config& config) {
  return std::make_unique<MemoryLeakRule>(config.memory_leak);
}

}  // namespace accelmon::diagnostics
