#include "collectors/nvml.h"

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "collectors/nvml_api.h"
#include "collectors/nvml_gpm.h"
#include "collectors/shared_library.h"
#include "collectors/text_parsing.h"

namespace accelmon::collectors {
namespace {

// Every entry point the collector uses. A null pointer is a function this driver's NVML lacks:
// the values it would give stay absent.
struct NvmlApi {
  // Required.
  decltype(&nvmlInit_v2) init = nullptr;
  decltype(&nvmlShutdown) shutdown = nullptr;
  decltype(&nvmlDeviceGetCount_v2) device_count = nullptr;
  decltype(&nvmlDeviceGetHandleByIndex_v2) handle_by_index = nullptr;
  // Optional.
  decltype(&nvmlErrorString) error_string = nullptr;
  decltype(&nvmlSystemGetDriverVersion) driver_version = nullptr;
  decltype(&nvmlDeviceGetName) name = nullptr;
  decltype(&nvmlDeviceGetUUID) uuid = nullptr;
  decltype(&nvmlDeviceGetIndex) index = nullptr;
  decltype(&nvmlDeviceGetPciInfo_v3) pci_info = nullptr;
  decltype(&nvmlDeviceGetVbiosVersion) vbios_version = nullptr;
  decltype(&nvmlDeviceGetMemoryInfo_v2) memory_v2 = nullptr;
  decltype(&nvmlDeviceGetMemoryInfo) memory_v1 = nullptr;
  decltype(&nvmlDeviceGetTemperature) temperature = nullptr;
  decltype(&nvmlDeviceGetTemperatureThreshold) temperature_threshold = nullptr;
  decltype(&nvmlDeviceGetPowerUsage) power_usage = nullptr;
  decltype(&nvmlDeviceGetEnforcedPowerLimit) power_limit = nullptr;
  decltype(&nvmlDeviceGetTotalEnergyConsumption) energy = nullptr;
  decltype(&nvmlDeviceGetUtilizationRates) utilization = nullptr;
  decltype(&nvmlDeviceGetClockInfo) clock_info = nullptr;
  decltype(&nvmlDeviceGetCurrentClocksEventReasons) clock_event_reasons = nullptr;
  decltype(&nvmlDeviceGetCurrentClocksThrottleReasons) throttle_reasons = nullptr;
  decltype(&nvmlDeviceGetTotalEccErrors) ecc_errors = nullptr;
  decltype(&nvmlDeviceGetMemoryErrorCounter) ecc_location_errors = nullptr;
  decltype(&nvmlDeviceGetRemappedRows) remapped_rows = nullptr;
  decltype(&nvmlDeviceGetRetiredPages) retired_pages = nullptr;
  decltype(&nvmlDeviceGetRetiredPagesPendingStatus) retired_pages_pending = nullptr;
  decltype(&nvmlDeviceGetViolationStatus) violation_status = nullptr;
  decltype(&nvmlDeviceGetPerformanceState) performance_state = nullptr;
  decltype(&nvmlDeviceGetFanSpeed) fan_speed = nullptr;
  decltype(&nvmlDeviceGetPersistenceMode) persistence_mode = nullptr;
  decltype(&nvmlDeviceGetCurrPcieLinkGeneration) pcie_generation = nullptr;
  decltype(&nvmlDeviceGetCurrPcieLinkWidth) pcie_width = nullptr;
  decltype(&nvmlDeviceGetPcieReplayCounter) pcie_replay = nullptr;
  decltype(&nvmlDeviceGetNvLinkState) nvlink_state = nullptr;
  decltype(&nvmlDeviceGetNvLinkRemotePciInfo_v2) nvlink_remote_pci = nullptr;
  decltype(&nvmlDeviceGetNvLinkErrorCounter) nvlink_errors = nullptr;
  decltype(&nvmlDeviceGetFieldValues) field_values = nullptr;
  decltype(&nvmlDeviceGetComputeRunningProcesses_v3) compute_processes = nullptr;
  decltype(&nvmlDeviceGetGraphicsRunningProcesses_v3) graphics_processes = nullptr;
  decltype(&nvmlEventSetCreate) event_set_create = nullptr;
  decltype(&nvmlDeviceRegisterEvents) register_events = nullptr;
  decltype(&nvmlEventSetWait_v2) event_set_wait = nullptr;
  decltype(&nvmlEventSetFree) event_set_free = nullptr;
  decltype(&nvmlDeviceGetGpuFabricInfoV) fabric_info = nullptr;
  decltype(&nvmlDeviceGetMigMode) mig_mode = nullptr;
  decltype(&nvmlDeviceGetMaxMigDeviceCount) max_mig_devices = nullptr;
  decltype(&nvmlDeviceGetMigDeviceHandleByIndex) mig_handle = nullptr;
  decltype(&nvmlDeviceGetGpuInstanceId) gpu_instance_id = nullptr;
  decltype(&nvmlDeviceGetComputeInstanceId) compute_instance_id = nullptr;
  GpmApi gpm;
};

// The first of `names` the library has (newest version first); nullptr when it has none.
template <typename Fn>
void Resolve(const SharedLibrary& lib, Fn& out, std::initializer_list<const char*> names) {
  for (const char* n : names) {
    out = lib.Function<Fn>(n);
    if (out != nullptr) return;
  }
}

NvmlApi ResolveAll(const SharedLibrary& lib) {
  NvmlApi a;
  // The unversioned functions have the same signatures; _v2 differ only in behaviour (e.g.
  // nvmlDeviceGetHandleByIndex_v2 also returns devices the caller may not use).
  Resolve(lib, a.init, {"nvmlInit_v2", "nvmlInit"});
  Resolve(lib, a.shutdown, {"nvmlShutdown"});
  Resolve(lib, a.device_count, {"nvmlDeviceGetCount_v2", "nvmlDeviceGetCount"});
  Resolve(lib, a.handle_by_index, {"nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex"});
  Resolve(lib, a.error_string, {"nvmlErrorString"});
  Resolve(lib, a.driver_version, {"nvmlSystemGetDriverVersion"});
  Resolve(lib, a.name, {"nvmlDeviceGetName"});
  Resolve(lib, a.uuid, {"nvmlDeviceGetUUID"});
  Resolve(lib, a.index, {"nvmlDeviceGetIndex"});
  // Only _v3 fills busId in the layout declared here.
  Resolve(lib, a.pci_info, {"nvmlDeviceGetPciInfo_v3"});
  Resolve(lib, a.vbios_version, {"nvmlDeviceGetVbiosVersion"});
  Resolve(lib, a.memory_v2, {"nvmlDeviceGetMemoryInfo_v2"});
  Resolve(lib, a.memory_v1, {"nvmlDeviceGetMemoryInfo"});
  Resolve(lib, a.temperature, {"nvmlDeviceGetTemperature"});
  Resolve(lib, a.temperature_threshold, {"nvmlDeviceGetTemperatureThreshold"});
  Resolve(lib, a.power_usage, {"nvmlDeviceGetPowerUsage"});
  Resolve(lib, a.power_limit, {"nvmlDeviceGetEnforcedPowerLimit"});
  Resolve(lib, a.energy, {"nvmlDeviceGetTotalEnergyConsumption"});
  Resolve(lib, a.utilization, {"nvmlDeviceGetUtilizationRates"});
  Resolve(lib, a.clock_info, {"nvmlDeviceGetClockInfo"});
  Resolve(lib, a.clock_event_reasons, {"nvmlDeviceGetCurrentClocksEventReasons"});
  Resolve(lib, a.throttle_reasons, {"nvmlDeviceGetCurrentClocksThrottleReasons"});
  Resolve(lib, a.ecc_errors, {"nvmlDeviceGetTotalEccErrors"});
  Resolve(lib, a.ecc_location_errors, {"nvmlDeviceGetMemoryErrorCounter"});
  Resolve(lib, a.remapped_rows, {"nvmlDeviceGetRemappedRows"});
  Resolve(lib, a.retired_pages, {"nvmlDeviceGetRetiredPages"});
  Resolve(lib, a.retired_pages_pending, {"nvmlDeviceGetRetiredPagesPendingStatus"});
  Resolve(lib, a.violation_status, {"nvmlDeviceGetViolationStatus"});
  Resolve(lib, a.performance_state, {"nvmlDeviceGetPerformanceState"});
  Resolve(lib, a.fan_speed, {"nvmlDeviceGetFanSpeed"});
  Resolve(lib, a.persistence_mode, {"nvmlDeviceGetPersistenceMode"});
  Resolve(lib, a.pcie_generation, {"nvmlDeviceGetCurrPcieLinkGeneration"});
  Resolve(lib, a.pcie_width, {"nvmlDeviceGetCurrPcieLinkWidth"});
  Resolve(lib, a.pcie_replay, {"nvmlDeviceGetPcieReplayCounter"});
  Resolve(lib, a.nvlink_state, {"nvmlDeviceGetNvLinkState"});
  Resolve(lib, a.nvlink_remote_pci, {"nvmlDeviceGetNvLinkRemotePciInfo_v2"});
  Resolve(lib, a.nvlink_errors, {"nvmlDeviceGetNvLinkErrorCounter"});
  Resolve(lib, a.field_values, {"nvmlDeviceGetFieldValues"});
  // Only _v3 writes the nvmlProcessInfo_t declared here (v1 has no instance ids); a driver
  // without them lists no processes.
  Resolve(lib, a.compute_processes, {"nvmlDeviceGetComputeRunningProcesses_v3"});
  Resolve(lib, a.graphics_processes, {"nvmlDeviceGetGraphicsRunningProcesses_v3"});
  Resolve(lib, a.event_set_create, {"nvmlEventSetCreate"});
  Resolve(lib, a.register_events, {"nvmlDeviceRegisterEvents"});
  // v1 writes a shorter nvmlEventData_t (no instance ids); ours is large enough for both.
  Resolve(lib, a.event_set_wait, {"nvmlEventSetWait_v2", "nvmlEventSetWait"});
  Resolve(lib, a.event_set_free, {"nvmlEventSetFree"});
  Resolve(lib, a.gpm.query_support, {"nvmlGpmQueryDeviceSupport"});
  Resolve(lib, a.gpm.sample_alloc, {"nvmlGpmSampleAlloc"});
  Resolve(lib, a.gpm.sample_free, {"nvmlGpmSampleFree"});
  Resolve(lib, a.gpm.sample_get, {"nvmlGpmSampleGet"});
  Resolve(lib, a.gpm.metrics_get, {"nvmlGpmMetricsGet"});
  Resolve(lib, a.gpm.mig_sample_get, {"nvmlGpmMigSampleGet"});
  Resolve(lib, a.fabric_info, {"nvmlDeviceGetGpuFabricInfoV"});
  Resolve(lib, a.mig_mode, {"nvmlDeviceGetMigMode"});
  Resolve(lib, a.max_mig_devices, {"nvmlDeviceGetMaxMigDeviceCount"});
  Resolve(lib, a.mig_handle, {"nvmlDeviceGetMigDeviceHandleByIndex"});
  Resolve(lib, a.gpu_instance_id, {"nvmlDeviceGetGpuInstanceId"});
  Resolve(lib, a.compute_instance_id, {"nvmlDeviceGetComputeInstanceId"});
  return a;
}

std::string ErrorText(const NvmlApi& api, nvmlReturn_t r) {
  const char* s = api.error_string != nullptr ? api.error_string(r) : nullptr;
  std::string text = s != nullptr ? s : "NVML error";
  return text + " (" + std::to_string(static_cast<int>(r)) + ")";
}

// A NUL-terminated NVML string buffer (never read past its end).
std::string FromBuffer(const char* buf, size_t size) {
  return std::string(buf, strnlen(buf, size));
}

std::optional<double> FieldAsDouble(const nvmlFieldValue_t& f) {
  switch (f.valueType) {
    case NVML_VALUE_TYPE_DOUBLE:
      return f.value.dVal;
    case NVML_VALUE_TYPE_UNSIGNED_INT:
      return static_cast<double>(f.value.uiVal);
    case NVML_VALUE_TYPE_UNSIGNED_LONG:
      return static_cast<double>(f.value.ulVal);
    case NVML_VALUE_TYPE_UNSIGNED_LONG_LONG:
      return static_cast<double>(f.value.ullVal);
    case NVML_VALUE_TYPE_SIGNED_LONG_LONG:
      return static_cast<double>(f.value.sllVal);
    case NVML_VALUE_TYPE_SIGNED_INT:
      return static_cast<double>(f.value.siVal);
    default:
      return std::nullopt;
  }
}

std::optional<uint64_t> FieldAsUint64(const nvmlFieldValue_t& f) {
  switch (f.valueType) {
    case NVML_VALUE_TYPE_UNSIGNED_INT:
      return f.value.uiVal;
    case NVML_VALUE_TYPE_UNSIGNED_LONG:
      return f.value.ulVal;
    case NVML_VALUE_TYPE_UNSIGNED_LONG_LONG:
      return f.value.ullVal;
    case NVML_VALUE_TYPE_SIGNED_LONG_LONG:
      if (f.value.sllVal < 0) return std::nullopt;
      return static_cast<uint64_t>(f.value.sllVal);
    case NVML_VALUE_TYPE_SIGNED_INT:
      if (f.value.siVal < 0) return std::nullopt;
      return static_cast<uint64_t>(f.value.siVal);
    default:
      return std::nullopt;
  }
}

// The MIG profile in a MIG device's name: "NVIDIA H200 MIG 1g.18gb" -> "1g.18gb".
std::string MigProfile(std::string_view name) {
  constexpr std::string_view kMarker = " MIG ";
  const size_t at = name.rfind(kMarker);
  return at == std::string_view::npos ? std::string()
                                      : std::string(name.substr(at + kMarker.size()));
}

// One device's calls in one tick. Once any call says the GPU is lost, the rest are skipped:
// each would fail the same way, and on a GPU off the bus each can take seconds.
class DeviceCalls {
 public:
  template <typename Fn, typename... Args>
  bool Call(Fn fn, Args... args) {
    if (lost_ || fn == nullptr) return false;
    return Check(fn(args...));
  }
  bool Check(nvmlReturn_t r) {
    if (r == NVML_ERROR_GPU_IS_LOST) lost_ = true;
    return r == NVML_SUCCESS;
  }
  bool lost() const { return lost_; }

 private:
  bool lost_ = false;
};

// A string NVML writes into the caller's buffer of N bytes (name, UUID, VBIOS version); nullopt
// when the call fails.
template <size_t N, typename Fn>
std::optional<std::string> ReadString(DeviceCalls& c, Fn fn, nvmlDevice_t h) {
  char buf[N] = {};
  if (!c.Call(fn, h, buf, static_cast<unsigned>(N))) return std::nullopt;
  return FromBuffer(buf, N);
}

class NvmlCollector final : public Collector {
 public:
  NvmlCollector(std::unique_ptr<SharedLibrary> lib, const NvmlApi& api)
      : lib_(std::move(lib)), api_(api) {
    RegisterXidEvents();
  }

  ~NvmlCollector() override {
    if (events_ != nullptr && api_.event_set_free != nullptr) api_.event_set_free(events_);
    gpm_.ReleaseAll();  // before nvmlShutdown
    api_.shutdown();
  }

  std::string_view name() const override { return "nvml"; }

  void Collect(v1::NodeReport& report) override {
    unsigned count = 0;
    const nvmlReturn_t r = api_.device_count(&count);
    if (r != NVML_SUCCESS) throw CollectorError("nvml: nvmlDeviceGetCount: " + ErrorText(api_, r));
    std::string driver;
    if (api_.driver_version != nullptr) {
      char buf[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE] = {};
      if (api_.driver_version(buf, sizeof buf) == NVML_SUCCESS)
        driver = FromBuffer(buf, sizeof buf);
    }
    for (unsigned i = 0; i < count; ++i) CollectDevice(i, driver, report);
    ForgetVanishedMigDevices();
    DrainXidEvents(report);
  }

 private:
  struct Known {
    v1::DeviceIdentity identity;  // from the last tick the device answered
    bool lost = false;
    // A bit per NVML memory location that answered NOT_SUPPORTED (FillEccByLocation).
    uint8_t ecc_locations_unsupported = 0;
  };

  void RegisterXidEvents() {
    if (api_.event_set_create == nullptr || api_.register_events == nullptr ||
        api_.event_set_wait == nullptr) {
      return;
    }
    if (api_.event_set_create(&events_) != NVML_SUCCESS) {
      events_ = nullptr;
      return;
    }
    unsigned count = 0;
    if (api_.device_count(&count) != NVML_SUCCESS) count = 0;
    for (unsigned i = 0; i < count; ++i) {
      nvmlDevice_t h = nullptr;
      if (api_.handle_by_index(i, &h) != NVML_SUCCESS) continue;
      // NOT_SUPPORTED on GPUs without XID reporting: they simply send none.
      if (api_.register_events(h, nvmlEventTypeXidCriticalError, events_) == NVML_SUCCESS) {
        xid_devices_[h] = i;
      }
    }
  }

  // Takes what is queued, never waiting (timeout 0): a tick must not block on events.
  void DrainXidEvents(v1::NodeReport& report) {
    if (events_ == nullptr || xid_devices_.empty()) return;
    constexpr int kMaxEventsPerTick = 1024;  // bounds a storm; the rest come next tick
    for (int n = 0; n < kMaxEventsPerTick; ++n) {
      nvmlEventData_t data = {};
      if (api_.event_set_wait(events_, &data, 0) != NVML_SUCCESS) break;  // TIMEOUT: drained
      if ((data.eventType & nvmlEventTypeXidCriticalError) == 0) continue;
      v1::Event& e = *report.add_events();
      e.set_kind(v1::EVENT_KIND_XID);
      *e.mutable_time() = report.timestamp();
      e.set_code(data.eventData);
      e.set_message("Xid " + std::to_string(data.eventData));
      const auto it = xid_devices_.find(data.device);
      if (it != xid_devices_.end()) {
        e.set_device_index(it->second);
        const auto k = known_.find(it->second);
        if (k != known_.end()) e.set_device_uuid(k->second.identity.uuid());
      }
    }
  }

  void CollectDevice(unsigned i, const std::string& driver, v1::NodeReport& report) {
    DeviceCalls c;
    nvmlDevice_t h = nullptr;
    v1::DeviceTelemetry d;
    if (c.Call(api_.handle_by_index, i, &h)) {
      Fill(c, h, i, driver, d);
    } else if (!c.lost()) {
      return;  // not ours to see (e.g. no permission): not a lost device
    }

    Known& known = known_[i];
    if (c.lost()) {
      gpm_.Forget(i);
      known.ecc_locations_unsupported = 0;  // a replaced board may count elsewhere
    }
    if (!c.lost()) {
      d.set_up(true);
      known.identity = d.identity();
      known.lost = false;
      const bool mig = d.state().mig_enabled();
      // In MIG mode the processes belong to the MIG devices, which list their own.
      if (mig) d.clear_processes();
      report.add_devices()->Swap(&d);
      if (mig) CollectMigDevices(i, h, known.identity, report);
      return;
    }
    // Lost: report who it was (as last seen) and that it is down, nothing measured now.
    v1::DeviceTelemetry& out = *report.add_devices();
    if (!known.identity.uuid().empty()) {
      *out.mutable_identity() = known.identity;
    } else {
      *out.mutable_identity() = d.identity();
      out.mutable_identity()->set_vendor("nvidia");
      out.mutable_identity()->set_index(i);
    }
    out.set_up(false);
    if (!known.lost) {
      v1::Event& e = *report.add_events();
      e.set_kind(v1::EVENT_KIND_DEVICE_LOST);
      *e.mutable_time() = report.timestamp();
      e.set_device_index(out.identity().index());
      e.set_device_uuid(out.identity().uuid());
      e.set_message("GPU is lost (NVML_ERROR_GPU_IS_LOST)");
    }
    known.lost = true;
  }

  // A GPU's MIG devices, each a device of its own: its uuid, name, memory, processes and GPM
  // activity. The index is 100 x (GPU index + 1) + the MIG slot, unique on the node and telling
  // its GPU; the identity names the GPU too. A MIG device that fails its calls is left out this
  // tick (a reconfiguration in progress); the GPU itself reported already.
  void CollectMigDevices(unsigned i, nvmlDevice_t parent, const v1::DeviceIdentity& gpu,
                         v1::NodeReport& report) {
    unsigned slots = 0;
    if (api_.max_mig_devices == nullptr || api_.mig_handle == nullptr ||
        api_.max_mig_devices(parent, &slots) != NVML_SUCCESS) {
      return;
    }
    constexpr unsigned kMaxSlots = 99;  // keeps the index scheme unambiguous
    for (unsigned slot = 0; slot < std::min(slots, kMaxSlots); ++slot) {
      nvmlDevice_t h = nullptr;
      if (api_.mig_handle(parent, slot, &h) != NVML_SUCCESS) continue;  // NOT_FOUND: empty slot
      const unsigned index = 100 * (i + 1) + slot;
      DeviceCalls c;
      v1::DeviceTelemetry d;
      auto& id = *d.mutable_identity();
      id.set_vendor("nvidia");
      id.set_index(index);
      id.set_driver_version(gpu.driver_version());
      id.set_pci_bus_id(gpu.pci_bus_id());
      id.set_firmware_version(gpu.firmware_version());
      auto uuid = ReadString<NVML_DEVICE_UUID_V2_BUFFER_SIZE>(c, api_.uuid, h);
      if (!uuid) continue;
      id.set_uuid(std::move(*uuid));
      auto& mig = *id.mutable_mig();
      mig.set_parent_uuid(gpu.uuid());
      mig.set_parent_index(gpu.index());
      if (auto name = ReadString<NVML_DEVICE_NAME_V2_BUFFER_SIZE>(c, api_.name, h)) {
        id.set_model(std::move(*name));
        mig.set_profile(MigProfile(id.model()));
      }
      unsigned gi = 0, ci = 0;
      if (c.Call(api_.gpu_instance_id, h, &gi)) mig.set_gpu_instance_id(gi);
      if (c.Call(api_.compute_instance_id, h, &ci)) mig.set_compute_instance_id(ci);
      FillMemory(c, h, d);
      FillProcesses(c, h, d);
      if (mig.has_gpu_instance_id() && !c.lost()) {
        c.Check(gpm_.CollectMig(index, parent, gi, d));
      }
      if (c.lost()) continue;
      d.set_up(true);
      mig_seen_.insert(index);
      report.add_devices()->Swap(&d);
    }
  }

  // Forgets the GPM samples of MIG devices not seen this tick (reconfigured away).
  void ForgetVanishedMigDevices() {
    for (auto it = mig_known_.begin(); it != mig_known_.end();) {
      if (mig_seen_.contains(*it)) {
        ++it;
      } else {
        gpm_.Forget(*it);
        it = mig_known_.erase(it);
      }
    }
    mig_known_.insert(mig_seen_.begin(), mig_seen_.end());
    mig_seen_.clear();
  }

  // Memory: v2 adds the driver's reservation; older drivers only know v1.
  void FillMemory(DeviceCalls& c, nvmlDevice_t h, v1::DeviceTelemetry& d) {
    nvmlMemory_v2_t m2 = {};
    m2.version = nvmlMemory_v2;
    nvmlMemory_t m1 = {};
    if (c.Call(api_.memory_v2, h, &m2)) {
      auto& m = *d.mutable_memory();
      m.set_total_bytes(m2.total);
      m.set_used_bytes(m2.used);
      m.set_free_bytes(m2.free);
      m.set_reserved_bytes(m2.reserved);
    } else if (c.Call(api_.memory_v1, h, &m1)) {
      auto& m = *d.mutable_memory();
      m.set_total_bytes(m1.total);
      m.set_used_bytes(m1.used);
      m.set_free_bytes(m1.free);
    }
  }

  void Fill(DeviceCalls& c, nvmlDevice_t h, unsigned i, const std::string& driver,
            v1::DeviceTelemetry& d) {
    auto& id = *d.mutable_identity();
    id.set_vendor("nvidia");
    id.set_index(i);
    id.set_driver_version(driver);
    if (auto name = ReadString<NVML_DEVICE_NAME_V2_BUFFER_SIZE>(c, api_.name, h)) {
      id.set_model(std::move(*name));
    }
    if (auto uuid = ReadString<NVML_DEVICE_UUID_V2_BUFFER_SIZE>(c, api_.uuid, h)) {
      id.set_uuid(std::move(*uuid));
    }
    unsigned index = 0;
    if (c.Call(api_.index, h, &index)) id.set_index(index);
    nvmlPciInfo_t pci = {};
    if (c.Call(api_.pci_info, h, &pci)) {
      id.set_pci_bus_id(NormalizePciBusId(FromBuffer(pci.busId, sizeof pci.busId)));
    }
    if (auto vbios = ReadString<NVML_DEVICE_VBIOS_VERSION_BUFFER_SIZE>(c, api_.vbios_version, h)) {
      id.set_firmware_version(std::move(*vbios));
    }

    FillMemory(c, h, d);

    unsigned u = 0;
    auto& t = *d.mutable_thermal();
    if (c.Call(api_.temperature, h, NVML_TEMPERATURE_GPU, &u)) t.set_core_celsius(u);
    if (c.Call(api_.temperature_threshold, h, NVML_TEMPERATURE_THRESHOLD_SLOWDOWN, &u)) {
      t.set_slowdown_threshold_celsius(u);
    }
    if (c.Call(api_.temperature_threshold, h, NVML_TEMPERATURE_THRESHOLD_SHUTDOWN, &u)) {
      t.set_shutdown_threshold_celsius(u);
    }
    if (c.Call(api_.fan_speed, h, &u)) t.set_fan_speed_ratio(u / 100.0);  // % of maximum
    unsigned long long mask = 0;
    if (c.Call(api_.clock_event_reasons, h, &mask) || c.Call(api_.throttle_reasons, h, &mask)) {
      for (const auto& [reason, active] : NvmlThrottleReasons(mask)) {
        (*t.mutable_throttle_reasons())[reason] = active;
      }
    }

    auto& p = *d.mutable_power();
    if (c.Call(api_.power_usage, h, &u)) p.set_usage_watts(u / 1e3);  // mW
    if (c.Call(api_.power_limit, h, &u)) p.set_limit_watts(u / 1e3);  // mW
    unsigned long long ull = 0;
    if (c.Call(api_.energy, h, &ull)) p.set_energy_joules_total(static_cast<double>(ull) / 1e3);

    nvmlUtilization_t util = {};
    if (c.Call(api_.utilization, h, &util)) {
      d.mutable_utilization()->set_compute_ratio(util.gpu / 100.0);
      d.mutable_utilization()->set_memory_bandwidth_ratio(util.memory / 100.0);
    }
    if (c.Call(api_.clock_info, h, NVML_CLOCK_SM, &u)) d.mutable_clocks()->set_compute_hz(u * 1e6);
    if (c.Call(api_.clock_info, h, NVML_CLOCK_MEM, &u)) d.mutable_clocks()->set_memory_hz(u * 1e6);
    FillViolations(c, h, *d.mutable_clocks());

    nvmlPstates_t pstate = NVML_PSTATE_UNKNOWN;
    if (c.Call(api_.performance_state, h, &pstate) && pstate >= NVML_PSTATE_0 &&
        pstate <= NVML_PSTATE_15) {
      d.mutable_state()->set_performance_state(static_cast<uint32_t>(pstate));
    }
    nvmlEnableState_t enabled = NVML_FEATURE_DISABLED;
    if (c.Call(api_.persistence_mode, h, &enabled)) {
      d.mutable_state()->set_persistence_mode(enabled == NVML_FEATURE_ENABLED);
    }
    unsigned mig_current = 0, mig_pending = 0;
    if (c.Call(api_.mig_mode, h, &mig_current, &mig_pending)) {
      d.mutable_state()->set_mig_enabled(mig_current == NVML_DEVICE_MIG_ENABLE);
    }

    auto& e = *d.mutable_errors();
    if (c.Call(api_.ecc_errors, h, NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_VOLATILE_ECC, &ull)) {
      e.set_ecc_corrected_total(ull);
    }
    if (c.Call(api_.ecc_errors, h, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC, &ull)) {
      e.set_ecc_uncorrected_total(ull);
    }
    if (c.Call(api_.ecc_errors, h, NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_AGGREGATE_ECC, &ull)) {
      e.set_ecc_corrected_lifetime_total(ull);
    }
    if (c.Call(api_.ecc_errors, h, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_AGGREGATE_ECC, &ull)) {
      e.set_ecc_uncorrected_lifetime_total(ull);
    }
    FillEccByLocation(c, h, i, e);
    FillRetiredPages(c, h, e);
    unsigned corr = 0, unc = 0, pending = 0, failure = 0;
    if (c.Call(api_.remapped_rows, h, &corr, &unc, &pending, &failure)) {
      e.set_remapped_rows_correctable(corr);
      e.set_remapped_rows_uncorrectable(unc);
      e.set_remapped_rows_pending(pending != 0);
      e.set_remapped_rows_failure(failure != 0);
    }

    FillPcie(c, h, d);
    FillNvLinks(c, h, d);
    FillFabric(c, h, d);
    FillProcesses(c, h, d);
    if (!c.lost()) c.Check(gpm_.Collect(i, h, d));
  }

  // One of NVML's process lists. The buffer has room for the usual count, so one call is enough;
  // NVML_ERROR_INSUFFICIENT_SIZE says how many there are, and the call is made again with room
  // to spare (processes may start in between). False when the list is not available.
  static bool ListProcesses(DeviceCalls& c, decltype(&nvmlDeviceGetComputeRunningProcesses_v3) fn,
                            nvmlDevice_t h, std::vector<nvmlProcessInfo_t>& out) {
    constexpr unsigned kFirstTry = 64;
    constexpr unsigned kSlack = 8;
    constexpr unsigned kMaxProcesses = 4096;  // bounds a bad count; the agent caps far below
    constexpr int kTries = 3;
    if (c.lost() || fn == nullptr) return false;
    out.resize(kFirstTry);
    unsigned count = kFirstTry;
    nvmlReturn_t r = fn(h, &count, out.data());
    for (int i = 0; i < kTries && r == NVML_ERROR_INSUFFICIENT_SIZE; ++i) {
      out.resize(std::min(count + kSlack, kMaxProcesses));
      count = static_cast<unsigned>(out.size());
      r = fn(h, &count, out.data());
    }
    if (!c.Check(r)) {
      out.clear();
      return false;
    }
    out.resize(std::min<size_t>(count, out.size()));
    return true;
  }

  // Time held below the application clocks, by limiter (NVML: nanoseconds since the driver
  // loaded).
  void FillViolations(DeviceCalls& c, nvmlDevice_t h, v1::DeviceClocks& clocks) {
    using ClockSetter = void (v1::DeviceClocks::*)(double);
    static constexpr std::pair<nvmlPerfPolicyType_t, ClockSetter> kPolicies[] = {
        {NVML_PERF_POLICY_POWER, &v1::DeviceClocks::set_power_violation_seconds_total},
        {NVML_PERF_POLICY_THERMAL, &v1::DeviceClocks::set_thermal_violation_seconds_total},
        {NVML_PERF_POLICY_SYNC_BOOST, &v1::DeviceClocks::set_sync_boost_violation_seconds_total},
        {NVML_PERF_POLICY_BOARD_LIMIT, &v1::DeviceClocks::set_board_limit_violation_seconds_total},
        {NVML_PERF_POLICY_LOW_UTILIZATION,
         &v1::DeviceClocks::set_low_utilization_violation_seconds_total},
        {NVML_PERF_POLICY_RELIABILITY, &v1::DeviceClocks::set_reliability_violation_seconds_total},
    };
    for (const auto& [policy, set] : kPolicies) {
      nvmlViolationTime_t v = {};
      if (c.Call(api_.violation_status, h, policy, &v)) {
        (clocks.*set)(static_cast<double>(v.violationTime) / 1e9);
      }
    }
  }

  // ECC counts by memory location. A GPU counts in a few locations only (SRAM and DRAM from
  // Turing on), and asking all eight would cost 32 calls per GPU per tick: a location that answers
  // NOT_SUPPORTED to its first call is not asked again while the GPU stays.
  void FillEccByLocation(DeviceCalls& c, nvmlDevice_t h, unsigned i, v1::DeviceErrors& e) {
    static constexpr std::pair<nvmlMemoryLocation_t, v1::MemoryLocation> kLocations[] = {
        {NVML_MEMORY_LOCATION_L1_CACHE, v1::MEMORY_LOCATION_L1_CACHE},
        {NVML_MEMORY_LOCATION_L2_CACHE, v1::MEMORY_LOCATION_L2_CACHE},
        {NVML_MEMORY_LOCATION_DRAM, v1::MEMORY_LOCATION_DRAM},
        {NVML_MEMORY_LOCATION_REGISTER_FILE, v1::MEMORY_LOCATION_REGISTER_FILE},
        {NVML_MEMORY_LOCATION_TEXTURE_MEMORY, v1::MEMORY_LOCATION_TEXTURE_MEMORY},
        {NVML_MEMORY_LOCATION_TEXTURE_SHM, v1::MEMORY_LOCATION_TEXTURE_SHARED},
        {NVML_MEMORY_LOCATION_CBU, v1::MEMORY_LOCATION_CBU},
        {NVML_MEMORY_LOCATION_SRAM, v1::MEMORY_LOCATION_SRAM},
    };
    using Set = void (v1::EccLocationCounts::*)(uint64_t);
    static constexpr std::tuple<nvmlMemoryErrorType_t, nvmlEccCounterType_t, Set> kCounters[] = {
        {NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_VOLATILE_ECC,
         &v1::EccLocationCounts::set_corrected_total},
        {NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC,
         &v1::EccLocationCounts::set_uncorrected_total},
        {NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_AGGREGATE_ECC,
         &v1::EccLocationCounts::set_corrected_lifetime_total},
        {NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_AGGREGATE_ECC,
         &v1::EccLocationCounts::set_uncorrected_lifetime_total},
    };
    if (api_.ecc_location_errors == nullptr) return;
    uint8_t& unsupported = known_[i].ecc_locations_unsupported;
    for (std::size_t l = 0; l < std::size(kLocations); ++l) {
      const uint8_t bit = static_cast<uint8_t>(1u << l);
      if ((unsupported & bit) != 0) continue;
      v1::EccLocationCounts counts;
      bool any = false;
      for (const auto& [type, counter, set] : kCounters) {
        if (c.lost()) return;
        unsigned long long count = 0;
        const nvmlReturn_t r =
            api_.ecc_location_errors(h, type, counter, kLocations[l].first, &count);
        if (c.Check(r)) {
          (counts.*set)(count);
          any = true;
        } else if (r == NVML_ERROR_NOT_SUPPORTED && type == NVML_MEMORY_ERROR_TYPE_CORRECTED &&
                   counter == NVML_VOLATILE_ECC) {
          unsupported |= bit;
          break;
        }
      }
      if (!any) continue;
      counts.set_location(kLocations[l].second);
      e.add_ecc_by_location()->Swap(&counts);
    }
  }

  // Retired pages by cause: only the count is wanted, so a one-address buffer is offered and
  // NVML answers how many there are (INSUFFICIENT_SIZE when more than fit).
  void FillRetiredPages(DeviceCalls& c, nvmlDevice_t h, v1::DeviceErrors& e) {
    if (api_.retired_pages != nullptr && !c.lost()) {
      for (const auto cause : {NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS,
                               NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR}) {
        unsigned count = 1;
        unsigned long long address = 0;
        const nvmlReturn_t r = api_.retired_pages(h, cause, &count, &address);
        if (!c.Check(r) && r != NVML_ERROR_INSUFFICIENT_SIZE) continue;
        if (cause == NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR) {
          e.set_retired_pages_double_bit(count);
        } else {
          e.set_retired_pages_single_bit(count);
        }
      }
    }
    nvmlEnableState_t pending = NVML_FEATURE_DISABLED;
    if (c.Call(api_.retired_pages_pending, h, &pending)) {
      e.set_retired_pages_pending(pending == NVML_FEATURE_ENABLED);
    }
  }

  // The running compute and graphics processes, one entry per pid (a process in both lists
  // once), ascending, with the memory the driver accounts to it when it can say.
  void FillProcesses(DeviceCalls& c, nvmlDevice_t h, v1::DeviceTelemetry& d) {
    std::map<unsigned, std::optional<uint64_t>> used_by_pid;
    std::vector<nvmlProcessInfo_t> infos;
    for (const auto fn : {api_.compute_processes, api_.graphics_processes}) {
      if (!ListProcesses(c, fn, h, infos)) continue;
      for (const nvmlProcessInfo_t& p : infos) {
        auto& used = used_by_pid[p.pid];
        // The same process in both lists is the same memory: the larger report, not the sum.
        if (p.usedGpuMemory != NVML_VALUE_NOT_AVAILABLE) {
          used = std::max<uint64_t>(used.value_or(0), p.usedGpuMemory);
        }
      }
    }
    std::vector<std::pair<unsigned, std::optional<uint64_t>>> list(used_by_pid.begin(),
                                                                   used_by_pid.end());
    // Never more than the exporter takes per device (its default limit), even with the
    // processes collector off: the ones using the most memory. The processes collector caps
    // further (--processes.max-per-device).
    constexpr size_t kMaxReported = 256;
    if (list.size() > kMaxReported) {
      std::stable_sort(list.begin(), list.end(), [](const auto& a, const auto& b) {
        return a.second.value_or(0) > b.second.value_or(0);
      });
      list.resize(kMaxReported);
      std::sort(list.begin(), list.end());
    }
    for (const auto& [pid, used] : list) {
      v1::ProcessMemory& p = *d.add_processes();
      p.set_pid(pid);
      if (used) p.set_used_bytes(*used);
    }
  }

  // The GPU's NVLink fabric registration as a link: up once the fabric manager has completed it
  // successfully, down while it is not (so link_down sees a GPU falling out of the fabric), and
  // the fabric's degraded-bandwidth health bit where the driver sets it.
  void FillFabric(DeviceCalls& c, nvmlDevice_t h, v1::DeviceTelemetry& d) {
    nvmlGpuFabricInfoV_t info = {};
    info.version = nvmlGpuFabricInfo_v2;
    if (!c.Call(api_.fabric_info, h, &info)) return;
    if (info.state == NVML_GPU_FABRIC_STATE_NOT_SUPPORTED) return;  // no NVSwitch fabric
    v1::Link& l = *d.add_links();
    l.set_kind(v1::LINK_KIND_NVLINK_FABRIC);
    l.set_name("fabric");
    l.set_index(0);
    l.set_peer("nvswitch");  // the same in every state, so the series keeps its labels
    l.set_up(info.state == NVML_GPU_FABRIC_STATE_COMPLETED && info.status == NVML_SUCCESS);
    const unsigned degraded = (info.healthMask >> NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_DEGRADED_BW) &
                              NVML_GPU_FABRIC_HEALTH_MASK_WIDTH_DEGRADED_BW;
    if (degraded == NVML_GPU_FABRIC_HEALTH_MASK_DEGRADED_BW_TRUE) l.set_degraded(true);
    if (degraded == NVML_GPU_FABRIC_HEALTH_MASK_DEGRADED_BW_FALSE) l.set_degraded(false);
  }

  void FillPcie(DeviceCalls& c, nvmlDevice_t h, v1::DeviceTelemetry& d) {
    v1::Link l;
    l.set_kind(v1::LINK_KIND_PCIE);
    l.set_name("pcie");
    l.set_index(0);
    l.set_peer("host");
    unsigned gen = 0, width = 0, replay = 0;
    bool any = false;
    if (c.Call(api_.pcie_generation, h, &gen)) {
      l.set_pcie_generation(gen);
      any = true;
    }
    if (c.Call(api_.pcie_width, h, &width)) {
      l.set_pcie_width(width);
      any = true;
    }
    if (l.has_pcie_generation() && l.has_pcie_width()) {
      if (const auto max = PcieMaxBytesPerSecond(gen, width)) {
        l.set_max_bandwidth_bytes_per_second(*max);
      }
    }
    if (c.Call(api_.pcie_replay, h, &replay)) {
      (*l.mutable_errors_total())["replay"] = replay;
      any = true;
    }
    // NVML has no PCIe byte counters (nvmlDeviceGetPcieThroughput is a 20 ms rate): none here.
    if (any) d.add_links()->Swap(&l);
  }

  void FillNvLinks(DeviceCalls& c, nvmlDevice_t h, v1::DeviceTelemetry& d) {
    struct Present {
      unsigned link;
      v1::Link* out;
    };
    std::vector<Present> present;
    bool any_up = false;
    for (unsigned link = 0; link < NVML_NVLINK_MAX_LINKS && !c.lost(); ++link) {
      nvmlEnableState_t state = NVML_FEATURE_DISABLED;
      // NOT_SUPPORTED / INVALID_ARGUMENT: this device has no such link.
      if (!c.Call(api_.nvlink_state, h, link, &state)) continue;
      v1::Link& l = *d.add_links();
      l.set_kind(v1::LINK_KIND_NVLINK);
      l.set_name("nvlink" + std::to_string(link));
      l.set_index(link);
      l.set_up(state == NVML_FEATURE_ENABLED);
      any_up = any_up || l.up();
      nvmlPciInfo_t pci = {};
      if (c.Call(api_.nvlink_remote_pci, h, link, &pci)) {
        l.set_peer(NormalizePciBusId(FromBuffer(pci.busId, sizeof pci.busId)));
      }
      static constexpr std::pair<nvmlNvLinkErrorCounter_t, const char*> kCounters[] = {
          {NVML_NVLINK_ERROR_DL_REPLAY, "replay"},
          {NVML_NVLINK_ERROR_DL_RECOVERY, "recovery"},
          {NVML_NVLINK_ERROR_DL_CRC_FLIT, "crc_flit"},
          {NVML_NVLINK_ERROR_DL_CRC_DATA, "crc_data"},
      };
      for (const auto& [counter, type] : kCounters) {
        unsigned long long value = 0;
        if (c.Call(api_.nvlink_errors, h, link, counter, &value)) {
          (*l.mutable_errors_total())[type] = value;
        }
      }
      present.push_back({link, &l});
    }

    // One batched call for the memory temperature and the per-link byte counters
    // (nvmlDeviceGetNvLinkUtilizationCounter is deprecated; the throughput fields replace it).
    std::vector<nvmlFieldValue_t> fields;
    auto add = [&](unsigned field, unsigned scope) {
      nvmlFieldValue_t f = {};
      f.fieldId = field;
      f.scopeId = scope;
      fields.push_back(f);
    };
    add(NVML_FI_DEV_MEMORY_TEMP, 0);
    if (any_up) add(NVML_FI_DEV_NVLINK_SPEED_MBPS_COMMON, 0);
    for (const Present& p : present) {
      add(NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, p.link);
      add(NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX, p.link);
    }
    if (!c.Call(api_.field_values, h, static_cast<int>(fields.size()), fields.data())) return;
    std::optional<double> speed_mbps;
    for (const nvmlFieldValue_t& f : fields) {
      if (!c.Check(f.nvmlReturn)) continue;
      if (f.fieldId == NVML_FI_DEV_MEMORY_TEMP) {
        if (const auto v = FieldAsDouble(f)) d.mutable_thermal()->set_memory_celsius(*v);
      } else if (f.fieldId == NVML_FI_DEV_NVLINK_SPEED_MBPS_COMMON) {
        speed_mbps = FieldAsDouble(f);
      } else {
        for (const Present& p : present) {
          if (p.link != f.scopeId) continue;
          const auto kib = FieldAsUint64(f);
          if (!kib) break;
          if (f.fieldId == NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX) {
            p.out->set_transmit_bytes_total(*kib * 1024);
          } else if (f.fieldId == NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX) {
            p.out->set_receive_bytes_total(*kib * 1024);
          }
          break;
        }
      }
    }
    if (speed_mbps && *speed_mbps > 0) {
      for (const Present& p : present) {
        if (p.out->up()) p.out->set_max_bandwidth_bytes_per_second(*speed_mbps * 1e6);
      }
    }
  }

  std::unique_ptr<SharedLibrary> lib_;  // outlives every call through api_
  const NvmlApi api_;
  nvmlEventSet_t events_ = nullptr;
  std::unordered_map<nvmlDevice_t, unsigned> xid_devices_;  // registered handle -> index
  std::unordered_map<unsigned, Known> known_;               // by NVML index
  GpmSampler gpm_{api_.gpm};
  std::set<unsigned> mig_seen_;   // MIG device indexes reported this tick
  std::set<unsigned> mig_known_;  // ... and in earlier ticks, whose GPM samples may be held
};

}  // namespace

std::map<std::string, bool> NvmlThrottleReasons(uint64_t mask) {
  static constexpr std::pair<uint64_t, const char*> kReasons[] = {
      {nvmlClocksEventReasonGpuIdle, "gpu_idle"},
      {nvmlClocksEventReasonApplicationsClocksSetting, "applications_clocks_setting"},
      {nvmlClocksEventReasonSwPowerCap, "sw_power_cap"},
      {nvmlClocksThrottleReasonHwSlowdown, "hw_slowdown"},
      {nvmlClocksEventReasonSyncBoost, "sync_boost"},
      {nvmlClocksEventReasonSwThermalSlowdown, "sw_thermal"},
      {nvmlClocksThrottleReasonHwThermalSlowdown, "hw_thermal"},
      {nvmlClocksThrottleReasonHwPowerBrakeSlowdown, "hw_power_brake"},
      {nvmlClocksEventReasonDisplayClockSetting, "display_clocks"},
  };
  std::map<std::string, bool> out;
  for (const auto& [bit, name] : kReasons) out[name] = (mask & bit) != 0;
  return out;
}

std::string NormalizePciBusId(std::string_view bus_id) {
  std::string s(Trim(bus_id));
  // NVML's 32-bit domain ("00000000:18:00.0"): the kernel prints 16 bits ("0000:18:00.0").
  if (s.find(':') == 8 && s.compare(0, 4, "0000") == 0) s.erase(0, 4);
  for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

std::unique_ptr<Collector> CreateNvmlCollector(const std::string& library_path,
                                               std::string* why_not) {
  auto fail = [&](std::string message) -> std::unique_ptr<Collector> {
    if (why_not != nullptr) *why_not = std::move(message);
    return nullptr;
  };
  auto lib = std::make_unique<SharedLibrary>(library_path);
  if (!lib->loaded()) return fail(lib->error());
  const NvmlApi api = ResolveAll(*lib);
  if (api.init == nullptr || api.shutdown == nullptr || api.device_count == nullptr ||
      api.handle_by_index == nullptr) {
    return fail(library_path +
                ": not an NVML library (no nvmlInit, nvmlShutdown, nvmlDeviceGetCount or "
                "nvmlDeviceGetHandleByIndex)");
  }
  const nvmlReturn_t r = api.init();
  if (r != NVML_SUCCESS) return fail(library_path + ": nvmlInit failed: " + ErrorText(api, r));
  return std::make_unique<NvmlCollector>(std::move(lib), api);
}

}  // namespace accelmon::collectors
