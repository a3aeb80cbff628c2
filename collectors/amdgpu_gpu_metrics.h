// The amdgpu driver's binary gpu_metrics table (card<N>/device/gpu_metrics): what the power
// management firmware measures and the text files do not carry, above all per compute die (XCD)
// activity on MI300. Layouts are the kernel's struct gpu_metrics_v1_<content> of
// drivers/gpu/drm/amd/include/kgd_pp_interface.h, host byte order; a field the ASIC does not
// fill is all ones there (smu_cmn_init_soft_gpu_metrics), and stays absent here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace accelmon::collectors {

struct AmdgpuGpuMetrics {
  std::optional<double> gfx_activity_ratio;  // average_gfx_activity
  std::optional<double> umc_activity_ratio;  // average_umc_activity: the memory controllers
  std::vector<double> compute_die_ratios;    // xcp_stats[].gfx_busy_inst[], v1.6 and later
  std::optional<double> energy_joules;       // energy_accumulator, 2^-16 J units, v1.4 and later
  std::optional<uint64_t> pcie_replays;      // pcie_replay_count_acc, v1.4 and later
  size_t skipped_values = 0;                 // percentages over 100: left out, not clamped
};

enum class GpuMetricsResult {
  kDecoded,
  // A dGPU table revision this build does not know (v1.0, v1.9 and later) or an APU's (v2.x):
  // nothing decoded, and not the driver's fault.
  kUnknownLayout,
  // Shorter than its header, or a size that is not its revision's.
  kMalformed,
};

// Decodes `blob` into `out`; `why` says what was not decoded, for kUnknownLayout and kMalformed.
GpuMetricsResult ParseAmdgpuGpuMetrics(std::string_view blob, AmdgpuGpuMetrics& out,
                                       std::string& why);

}  // namespace accelmon::collectors
