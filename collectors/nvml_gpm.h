// GPM profiling activity for the nvml collector: SM, occupancy, tensor, FP pipes, DRAM bandwidth
// and bus traffic (NVML's GPU performance monitoring, Hopper and later), without DCGM. Each GPU
// keeps two NVML samples: every tick takes a new one and compares it with the previous tick's,
// so a value covers exactly one collection interval and nothing sleeps.
#pragma once

#include <unordered_map>

#include "accelmon/v1/telemetry.pb.h"
#include "collectors/nvml_api.h"

namespace accelmon::collectors {

// The GPM entry points; all null on drivers whose NVML has no GPM (before R520).
struct GpmApi {
  decltype(&nvmlGpmQueryDeviceSupport) query_support = nullptr;
  decltype(&nvmlGpmSampleAlloc) sample_alloc = nullptr;
  decltype(&nvmlGpmSampleFree) sample_free = nullptr;
  decltype(&nvmlGpmSampleGet) sample_get = nullptr;
  decltype(&nvmlGpmMetricsGet) metrics_get = nullptr;
  decltype(&nvmlGpmMigSampleGet) mig_sample_get = nullptr;  // R525 and later

  bool complete() const {
    return query_support != nullptr && sample_alloc != nullptr && sample_free != nullptr &&
           sample_get != nullptr && metrics_get != nullptr;
  }
};

class GpmSampler {
 public:
  explicit GpmSampler(const GpmApi& api) : api_(api) {}
  ~GpmSampler();
  GpmSampler(const GpmSampler&) = delete;
  GpmSampler& operator=(const GpmSampler&) = delete;

  // Takes this tick's sample of GPU `index` and, from its second tick on, fills
  // `device.activity` with the interval since the previous sample. Whether the GPU supports GPM
  // is asked once; one that does not is logged once and left without activity. Returns the
  // status of the sample call (NVML_SUCCESS when nothing was sampled), for lost-GPU detection.
  nvmlReturn_t Collect(unsigned index, nvmlDevice_t handle, v1::DeviceTelemetry& device);
  // The same for a MIG device (`index` its device index): its GPU instance's activity, sampled
  // through the parent GPU's handle, whose GPM support decides.
  nvmlReturn_t CollectMig(unsigned index, nvmlDevice_t parent, unsigned gpu_instance,
                          v1::DeviceTelemetry& device);
  // Drops a GPU's samples (it was lost: its next sample starts a new interval).
  void Forget(unsigned index);
  // Frees every sample (before nvmlShutdown).
  void ReleaseAll();

 private:
  struct Samples {
    bool probed = false;
    bool supported = false;
    nvmlGpmSample_t previous = nullptr;
    nvmlGpmSample_t current = nullptr;
    bool have_previous = false;  // `previous` holds the last tick's sample
  };

  bool Probe(unsigned index, nvmlDevice_t handle, Samples& s);
  // Samples into s.current (with `take`) and fills the activity since s.previous.
  template <typename Take>
  nvmlReturn_t Sample(unsigned index, nvmlDevice_t handle, v1::DeviceTelemetry& device, Take take);
  void Free(Samples& s);

  const GpmApi api_;
  std::unordered_map<unsigned, Samples> samples_;
  bool logged_no_api_ = false;
};

}  // namespace accelmon::collectors
