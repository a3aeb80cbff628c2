#include "collectors/nvml_gpm.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <utility>

namespace accelmon::collectors {
namespace {

// What we ask GPM for, and where each value goes: NVML gives percent and MiB/s. Plain function
// pointers, not pointers to members: GCC's bounds sanitizer misreads a member-pointer call
// through an indexed array (a false "index out of bounds").
using Activity = v1::DeviceActivity;
struct Metric {
  nvmlGpmMetricId_t id;
  void (*set)(Activity&, double);
  bool ratio;  // percent -> 0..1; otherwise MiB/s -> bytes/s
};
constexpr Metric kMetrics[] = {
    {NVML_GPM_METRIC_GRAPHICS_UTIL, [](Activity& a, double v) { a.set_graphics_engine_ratio(v); },
     true},
    {NVML_GPM_METRIC_SM_UTIL, [](Activity& a, double v) { a.set_sm_ratio(v); }, true},
    {NVML_GPM_METRIC_SM_OCCUPANCY, [](Activity& a, double v) { a.set_sm_occupancy_ratio(v); },
     true},
    {NVML_GPM_METRIC_ANY_TENSOR_UTIL, [](Activity& a, double v) { a.set_tensor_ratio(v); }, true},
    {NVML_GPM_METRIC_DFMA_TENSOR_UTIL, [](Activity& a, double v) { a.set_tensor_dfma_ratio(v); },
     true},
    {NVML_GPM_METRIC_HMMA_TENSOR_UTIL, [](Activity& a, double v) { a.set_tensor_hmma_ratio(v); },
     true},
    {NVML_GPM_METRIC_IMMA_TENSOR_UTIL, [](Activity& a, double v) { a.set_tensor_imma_ratio(v); },
     true},
    {NVML_GPM_METRIC_FP64_UTIL, [](Activity& a, double v) { a.set_fp64_ratio(v); }, true},
    {NVML_GPM_METRIC_FP32_UTIL, [](Activity& a, double v) { a.set_fp32_ratio(v); }, true},
    {NVML_GPM_METRIC_FP16_UTIL, [](Activity& a, double v) { a.set_fp16_ratio(v); }, true},
    {NVML_GPM_METRIC_INTEGER_UTIL, [](Activity& a, double v) { a.set_integer_ratio(v); }, true},
    {NVML_GPM_METRIC_DRAM_BW_UTIL, [](Activity& a, double v) { a.set_dram_bandwidth_ratio(v); },
     true},
    {NVML_GPM_METRIC_PCIE_TX_PER_SEC,
     [](Activity& a, double v) { a.set_pcie_transmit_bytes_per_second(v); }, false},
    {NVML_GPM_METRIC_PCIE_RX_PER_SEC,
     [](Activity& a, double v) { a.set_pcie_receive_bytes_per_second(v); }, false},
    {NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC,
     [](Activity& a, double v) { a.set_nvlink_transmit_bytes_per_second(v); }, false},
    {NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC,
     [](Activity& a, double v) { a.set_nvlink_receive_bytes_per_second(v); }, false},
};
static_assert(std::size(kMetrics) <= ACCELMON_GPM_METRICS);

}  // namespace

GpmSampler::~GpmSampler() { ReleaseAll(); }

void GpmSampler::ReleaseAll() {
  for (auto& [index, s] : samples_) Free(s);
  samples_.clear();
}

void GpmSampler::Free(Samples& s) {
  for (nvmlGpmSample_t* sample : {&s.previous, &s.current}) {
    if (*sample != nullptr) api_.sample_free(*sample);
    *sample = nullptr;
  }
  s.have_previous = false;
}

void GpmSampler::Forget(unsigned index) {
  const auto it = samples_.find(index);
  if (it == samples_.end()) return;
  Free(it->second);
  samples_.erase(it);
}

bool GpmSampler::Probe(unsigned index, nvmlDevice_t handle, Samples& s) {
  s.probed = true;
  nvmlGpmSupport_t support = {};
  support.version = NVML_GPM_SUPPORT_VERSION;
  const nvmlReturn_t r = api_.query_support(handle, &support);
  if (r != NVML_SUCCESS || support.isSupportedDevice == 0) {
    spdlog::info(
        "nvml: GPU {} has no GPM profiling counters ({}): SM, tensor and DRAM activity are absent "
        "for it",
        index,
        r != NVML_SUCCESS ? "nvmlGpmQueryDeviceSupport answered " + std::to_string(r)
                          : std::string("before Hopper, or not enabled"));
    return false;
  }
  if (api_.sample_alloc(&s.previous) != NVML_SUCCESS ||
      api_.sample_alloc(&s.current) != NVML_SUCCESS) {
    spdlog::warn("nvml: cannot allocate GPM samples for GPU {}: its activity is absent", index);
    Free(s);
    return false;
  }
  return true;
}

nvmlReturn_t GpmSampler::Collect(unsigned index, nvmlDevice_t handle, v1::DeviceTelemetry& device) {
  return Sample(index, handle, device,
                [&](nvmlGpmSample_t sample) { return api_.sample_get(handle, sample); });
}

nvmlReturn_t GpmSampler::CollectMig(unsigned index, nvmlDevice_t parent, unsigned gpu_instance,
                                    v1::DeviceTelemetry& device) {
  if (api_.mig_sample_get == nullptr) return NVML_SUCCESS;  // no MIG GPM: activity absent
  return Sample(index, parent, device, [&](nvmlGpmSample_t sample) {
    return api_.mig_sample_get(parent, gpu_instance, sample);
  });
}

template <typename Take>
nvmlReturn_t GpmSampler::Sample(unsigned index, nvmlDevice_t handle, v1::DeviceTelemetry& device,
                                Take take) {
  if (!api_.complete()) {
    if (!logged_no_api_) {
      spdlog::info(
          "nvml: this driver's NVML has no GPM API (before R520): SM, tensor and DRAM activity "
          "are absent");
      logged_no_api_ = true;
    }
    return NVML_SUCCESS;
  }
  Samples& s = samples_[index];
  if (!s.probed) s.supported = Probe(index, handle, s);
  if (!s.supported) return NVML_SUCCESS;

  const nvmlReturn_t r = take(s.current);
  if (r != NVML_SUCCESS) {
    s.have_previous = false;  // the next sample starts a new interval
    return r;
  }
  if (s.have_previous) {
    nvmlGpmMetricsGet_t get = {};
    get.version = NVML_GPM_METRICS_GET_VERSION;
    get.numMetrics = static_cast<unsigned>(std::size(kMetrics));
    get.sample1 = s.previous;
    get.sample2 = s.current;
    for (size_t i = 0; i < std::size(kMetrics); ++i) get.metrics[i].metricId = kMetrics[i].id;
    if (api_.metrics_get(&get) == NVML_SUCCESS) {
      v1::DeviceActivity& activity = *device.mutable_activity();
      for (size_t i = 0; i < std::size(kMetrics); ++i) {
        const Metric& metric = kMetrics[i];
        const nvmlGpmMetric_t& m = get.metrics[i];
        if (m.nvmlReturn != NVML_SUCCESS || !std::isfinite(m.value) || m.value < 0) continue;
        // Percent may round past 100 by a hair: clamped, so the share stays a share.
        metric.set(activity,
                   metric.ratio ? std::min(m.value / 100.0, 1.0) : m.value * 1024.0 * 1024.0);
      }
      if (activity.ByteSizeLong() == 0) device.clear_activity();
    }
  }
  std::swap(s.previous, s.current);
  s.have_previous = true;
  return NVML_SUCCESS;
}

}  // namespace accelmon::collectors
