#include "diagnostics/change_point.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace accelmon::diagnostics {

size_t HingeChangePoint(std::span<const double> t, std::span<const double> y) {
  const size_t n = std::min(t.size(), y.size());
  if (n < 3) return 0;
  // Centred on the first time and the mean value: bytes are ~1e10 and their squares would lose
  // the variance to rounding otherwise.
  double y_mean = 0;
  for (size_t i = 0; i < n; ++i) y_mean += y[i];
  y_mean /= static_cast<double>(n);
  double syy = 0;
  for (size_t i = 0; i < n; ++i) syy += (y[i] - y_mean) * (y[i] - y_mean);

  // Suffix sums from k on: t, t^2, t*y, y (y centred, so the sum of all y is 0).
  struct Sums {
    double t = 0, tt = 0, ty = 0, y = 0;
  };
  std::vector<Sums> suffix(n + 1);
  for (size_t i = n; i-- > 0;) {
    const double ti = t[i] - t[0];
    const double yi = y[i] - y_mean;
    suffix[i] = {suffix[i + 1].t + ti, suffix[i + 1].tt + ti * ti, suffix[i + 1].ty + ti * yi,
                 suffix[i + 1].y + yi};
  }

  // The model for a bend at t[k]: y = a + b * t + c * h with h_i = t_i - t_k on i >= k and 0
  // before: one slope before the bend (a slow drift, not necessarily flat) and another after.
  // Its residual is syy minus the regression sum of squares of the centred features (t, h);
  // with the sums from k on, each k costs O(1). At least two samples after the bend, so that it
  // is a trend and not one outlier.
  const auto nd = static_cast<double>(n);
  const Sums& all = suffix[0];
  const double s_tt = all.tt - all.t * all.t / nd;
  const double s_ty = all.ty;  // y is centred
  if (s_tt <= 0) return 0;
  size_t best = 0;
  const double line_sse = syy - s_ty * s_ty / s_tt;  // k = 0: one straight line over the window
  double best_sse = line_sse;
  for (size_t k = 1; k + 2 < n; ++k) {
    const Sums& s = suffix[k];
    const double tk = t[k] - t[0];
    const auto m = static_cast<double>(n - k);
    const double h = s.t - m * tk;
    const double s_hh = (s.tt - 2 * tk * s.t + m * tk * tk) - h * h / nd;
    const double s_th = (s.tt - tk * s.t) - all.t * h / nd;
    const double s_hy = s.ty - tk * s.y;
    const double det = s_tt * s_hh - s_th * s_th;
    if (det <= 1e-9 * s_tt * s_hh) continue;  // h is (nearly) t itself
    const double explained =
        (s_hh * s_ty * s_ty - 2 * s_th * s_ty * s_hy + s_tt * s_hy * s_hy) / det;
    const double sse = syy - explained;
    if (sse < best_sse) {
      best_sse = sse;
      best = k;
    }
  }
  // Some bend always fits noise a little better than one line: it counts only when it explains
  // clearly more than the noise would (a penalty of 3 ln n residual variances, BIC-like, for the
  // bend's two extra parameters).
  if (best == 0 || n < 5) return 0;
  const double noise_variance = std::max(best_sse, 0.0) / static_cast<double>(n - 4);
  if (line_sse - best_sse <= 3 * std::log(nd) * noise_variance + 1e-12 * syy) return 0;
  return best;
}

}  // namespace accelmon::diagnostics
