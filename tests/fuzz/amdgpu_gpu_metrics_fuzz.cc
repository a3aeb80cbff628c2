// Fuzz target (fuzz_target.h): any bytes as an amdgpu gpu_metrics table (a binary sysfs file read
// whole).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "collectors/amdgpu_gpu_metrics.h"
#include "fuzz_target.h"

ACCELMON_FUZZ_TARGET(amdgpu_gpu_metrics) {
  using namespace accelmon::collectors;
  // A copy sized exactly to the input, so reading past its end is an error the sanitizer sees.
  const std::string blob(reinterpret_cast<const char*>(data), size);
  AmdgpuGpuMetrics metrics;
  std::string why;
  if (ParseAmdgpuGpuMetrics(blob, metrics, why) == GpuMetricsResult::kDecoded) {
    for (const double ratio : metrics.compute_die_ratios) {
      if (!(ratio >= 0 && ratio <= 1)) __builtin_trap();  // a share, always
    }
  }
  return 0;
}
