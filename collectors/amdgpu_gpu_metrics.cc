#include "collectors/amdgpu_gpu_metrics.h"

#include <algorithm>
#include <cstring>
#include <limits>

namespace accelmon::collectors {
namespace {

// Where the fields read here lie in each dGPU revision (format 1): byte offsets of the kernel's
// naturally aligned structs, checked against their sizeof. Revisions 1.4 onwards (MI300 and
// later) are not append-only: each is decoded by its own offsets. 0 = not in that revision.
struct Layout {
  uint8_t content_revision;
  size_t size;
  size_t gfx_activity;   // uint16_t, %
  size_t umc_activity;   // uint16_t, %
  size_t energy;         // uint64_t, 2^-16 J
  size_t pcie_replays;   // uint64_t
  size_t num_partition;  // uint16_t
  size_t xcp_stats;      // struct amdgpu_xcp_metrics[8], gfx_busy_inst (uint32_t[8], %) first
  size_t xcp_stride;     // sizeof one xcp_stats element
};
constexpr size_t kPartitions = 8;        // NUM_XCP
constexpr size_t kDiesPerPartition = 8;  // MAX_XCC

// 1.1–1.3 (Navi 2x/3x, MI100, MI200) carry energy too, but in units their header leaves
// undocumented: not read.
constexpr Layout kLayouts[] = {
    {1, 96, 16, 18, 0, 0, 0, 0, 0},
    {2, 104, 16, 18, 0, 0, 0, 0, 0},
    {3, 120, 16, 18, 0, 0, 0, 0, 0},
    {4, 288, 12, 14, 24, 88, 0, 0, 0},
    {5, 360, 12, 14, 88, 152, 0, 0, 0},
    {6, 1664, 12, 14, 16, 104, 306, 312, 168},
    {7, 2208, 12, 14, 24, 112, 338, 344, 232},
    {8, 3360, 12, 14, 24, 112, 338, 344, 376},
};

template <typename T>
T Load(std::string_view blob, size_t offset) {
  T value;
  std::memcpy(&value, blob.data() + offset, sizeof value);
  return value;
}

template <typename T>
std::optional<T> Field(std::string_view blob, size_t offset) {
  if (offset == 0) return std::nullopt;
  const T value = Load<T>(blob, offset);
  if (value == std::numeric_limits<T>::max()) return std::nullopt;  // not filled by this ASIC
  return value;
}

template <typename T>
std::optional<double> Percent(std::string_view blob, size_t offset, size_t& skipped) {
  const auto value = Field<T>(blob, offset);
  if (!value) return std::nullopt;
  if (*value > 100) {
    ++skipped;
    return std::nullopt;
  }
  return static_cast<double>(*value) / 100.0;
}

}  // namespace

GpuMetricsResult ParseAmdgpuGpuMetrics(std::string_view blob, AmdgpuGpuMetrics& out,
                                       std::string& why) {
  // struct metrics_table_header: structure_size, format_revision, content_revision.
  if (blob.size() < 4) {
    why = "gpu_metrics: " + std::to_string(blob.size()) + " bytes, shorter than its header";
    return GpuMetricsResult::kMalformed;
  }
  const auto size = Load<uint16_t>(blob, 0);
  const auto format = static_cast<uint8_t>(blob[2]);
  const auto content = static_cast<uint8_t>(blob[3]);
  const std::string revision = std::to_string(format) + "." + std::to_string(content);
  const Layout* layout = nullptr;
  if (format == 1) {
    for (const Layout& l : kLayouts) {
      if (l.content_revision == content) layout = &l;
    }
  }
  if (layout == nullptr) {
    why = "gpu_metrics v" + revision + ": a layout this build does not decode";
    return GpuMetricsResult::kUnknownLayout;
  }
  if (size != layout->size || blob.size() < layout->size) {
    why = "gpu_metrics v" + revision + ": " + std::to_string(blob.size()) + " bytes, header size " +
          std::to_string(size) + ", expected " + std::to_string(layout->size);
    return GpuMetricsResult::kMalformed;
  }

  out.gfx_activity_ratio = Percent<uint16_t>(blob, layout->gfx_activity, out.skipped_values);
  out.umc_activity_ratio = Percent<uint16_t>(blob, layout->umc_activity, out.skipped_values);
  if (const auto energy = Field<uint64_t>(blob, layout->energy)) {
    out.energy_joules = static_cast<double>(*energy) / 65536.0;
  }
  out.pcie_replays = Field<uint64_t>(blob, layout->pcie_replays);
  if (const auto partitions = Field<uint16_t>(blob, layout->num_partition)) {
    // Unused partitions and dies are all ones; a die's index counts only the dies present.
    const size_t count = std::min<size_t>(*partitions, kPartitions);
    for (size_t p = 0; p < count; ++p) {
      const size_t base = layout->xcp_stats + p * layout->xcp_stride;
      for (size_t die = 0; die < kDiesPerPartition; ++die) {
        if (const auto busy = Percent<uint32_t>(blob, base + die * 4, out.skipped_values)) {
          out.compute_die_ratios.push_back(*busy);
        }
      }
    }
  }
  return GpuMetricsResult::kDecoded;
}

}  // namespace accelmon::collectors
