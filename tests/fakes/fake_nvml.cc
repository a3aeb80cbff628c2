// A fake libnvidia-ml for tests: every NVML function the nvml collector resolves, over a
// scriptable in-memory state, plus fake_nvml_* control functions that tests reach with dlsym on
// the same library. Built twice: fake_nvml (a current driver) and, with FAKE_NVML_LEGACY,
// fake_nvml_legacy (an old driver without the _v2 entry points, clock event reasons, field
// values and row remapping).
//
// Values are numbers by key per device (fake_nvml_set_value; device -1 = all devices):
//   memory.total memory.used memory.free memory.reserved (bytes), temp.gpu temp.memory
//   temp.slowdown temp.shutdown (C), power.usage_mw power.limit_mw energy_mj, util.gpu
//   util.memory (%), clock.sm clock.mem (MHz), throttle (bitmask), ecc.corrected
//   ecc.uncorrected, ecc.corrected.lifetime ecc.uncorrected.lifetime (aggregate),
//   ecc.<location>.<corrected|uncorrected>[.lifetime] (location l1 l2 dram register_file texture
//   texture_shm cbu sram; dram and sram by default), retired.sbe
//   retired.dbe (pages) retired.pending, violation.{power,thermal,sync_boost,board_limit,
//   low_utilization,reliability}_ns, pstate, persistence, fan (%, absent by default),
//   gpm.supported (0/1), gpm.<metric id> (GPM values in NVML's units: percent, MiB/s; a sample
//   keeps them as they were when taken, nvmlGpmMetricsGet answers the newer sample's),
//   remap.corr remap.unc remap.pending remap.failure, pcie.gen pcie.width
//   pcie.replay, nvlink.count nvlink.speed_mbps, nvlink.<l>.state nvlink.<l>.peer (device index)
//   nvlink.<l>.tx_kib nvlink.<l>.rx_kib nvlink.<l>.replay .recovery .crc_flit .crc_data.
// Strings (fake_nvml_set_string): name uuid vbios bus (device), driver (device -1).
// A missing key answers NVML_ERROR_NOT_SUPPORTED.
// Processes (fake_nvml_add_process(device, "compute"|"graphics", pid, used_bytes), ~0 = not
// available; none by default) are listed by the _v3 process functions (not in the legacy build).
// FAKE_NVML_PROCESSES in the environment adds processes at load and reset (see below).
// The value processes.appear_between_calls (N) starts N more compute processes (pids 90000+)
// after each answer that only gave the count, as a process starting between NVML's two calls.
// fake_nvml_set_return(function, device, code): that function answers `code` for that device
// (-1: every device); function "*" = every per-device function; "field:<id>" = one field of
// nvmlDeviceGetFieldValues.
// NVLink fabric (nvmlDeviceGetGpuFabricInfoV; absent by default, as on a board without
// NVSwitch): fabric.state (NVML_GPU_FABRIC_STATE_*), fabric.status (an nvmlReturn_t),
// fabric.clique, fabric.degraded (0/1; absent: the health bit is not supported).
// MIG: every GPU is MIG-capable with MIG off (mig.mode 0; erase it for a GPU without MIG).
// fake_nvml_add_mig(gpu, slot, profile, gi, ci) turns MIG on for that GPU and creates a MIG
// device in one of its 7 slots, with its own name ("<gpu name> MIG <profile>"), uuid, memory
// (the profile's size), gpm.* values and processes; fake_nvml_mig_device(gpu, slot) gives the
// device number the other control functions take for it. A MIG device answers NOT_SUPPORTED to
// what it has no key for (temperatures, power, clocks, ...), as the driver does. For the real
// binary: FAKE_NVML_MIG="GPU:SLOT:PROFILE:GI:CI,...".
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "collectors/nvml_api.h"

struct nvmlDevice_st {
  int index;
};
struct nvmlEventSet_st {
  int unused;
};
// A GPM sample: the device's gpm.* values when it was taken, in the order samples were taken.
struct nvmlGpmSample_st {
  int device = -1;
  long sequence = 0;
  std::map<int, double> values;  // by metric id
};

namespace {

constexpr int kMaxDevices = 16;
// MIG devices live after the GPUs: GPU g's slot m is device kMigBase + g * kMigSlots + m.
constexpr int kMigSlots = 7;
constexpr int kMigBase = kMaxDevices;
constexpr int kStorage = kMaxDevices + kMaxDevices * kMigSlots;
int MigDevice(int gpu, int slot) { return kMigBase + gpu * kMigSlots + slot; }

struct Device {
  std::map<std::string, double> values;
  std::map<std::string, std::string> strings;
  std::deque<unsigned long long> xids;
  bool xid_registered = false;
  std::vector<nvmlProcessInfo_t> compute_processes;
  std::vector<nvmlProcessInfo_t> graphics_processes;
  bool mig_present = false;  // a MIG device slot that holds an instance
};

struct State {
  std::mutex mu;
  int count = 2;
  int init_count = 0;
  Device devices[kStorage];
  std::string driver = "550.54.15";
  std::map<std::pair<std::string, int>, nvmlReturn_t> returns;
  std::map<std::string, int> hang_ms;  // one-shot: the next call to that function sleeps
  int in_flight = 0;
  std::map<std::string, int> calls;  // per function, since the last reset
  long gpm_sequence = 0;
  std::set<nvmlGpmSample_st*> gpm_samples;  // allocated and not yet freed
  unsigned last_wait_timeout = 0;
  int wait_calls = 0;
};

State& S() {
  static State* s = new State;  // never destroyed: a detached, hung caller may outlive main
  return *s;
}

nvmlDevice_st g_handles[kStorage];  // g_handles[i].index == i, set at load
nvmlEventSet_st g_event_set = {0};

std::string BusId(int d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "00000000:%02X:00.0", (0x18 + 0x10 * d) & 0xff);
  return buf;
}

void Defaults(int d, Device& dev) {
  dev = Device{};
  char uuid[64];
  std::snprintf(uuid, sizeof uuid, "GPU-fa4e%04d-0000-4000-8000-%012d", d, d);
  dev.strings = {{"name", "NVIDIA H200"},
                 {"uuid", uuid},
                 {"vbios", "96.00.99.00.0" + std::to_string(d)},
                 {"bus", BusId(d)}};
  const double total = 150754820096.0;  // 143771 MiB
  const double reserved = 512.0 * (1 << 20);
  const double used = (10.0 + d) * (1 << 30);
  dev.values = {
      {"memory.total", total},
      {"memory.reserved", reserved},
      {"memory.used", used},
      {"memory.free", total - reserved - used},
      {"temp.gpu", 41 + d},
      {"temp.memory", 47 + d},
      {"temp.slowdown", 87},
      {"temp.shutdown", 92},
      {"power.usage_mw", 352500 + 1000 * d},
      {"power.limit_mw", 700000},
      {"energy_mj", 123456789 + 1000 * d},
      {"util.gpu", 87 - d},
      {"util.memory", 43},
      {"clock.sm", 1980},
      {"clock.mem", 2619},
      {"throttle", d == 0 ? 0x4 : 0x0},  // sw_power_cap on the first GPU
      {"ecc.corrected", 3 * d},
      {"ecc.uncorrected", 0},
      {"remap.corr", d},
      {"remap.unc", 0},
      {"remap.pending", 0},
      {"remap.failure", 0},
      {"ecc.corrected.lifetime", 10 + 3 * d},
      {"ecc.uncorrected.lifetime", d},
      // By location, as Hopper counts: SRAM and DRAM only, adding up to the totals above.
      {"ecc.dram.corrected", 2 * d},
      {"ecc.dram.uncorrected", 0},
      {"ecc.dram.corrected.lifetime", 10 + 2 * d},
      {"ecc.dram.uncorrected.lifetime", 0},
      {"ecc.sram.corrected", d},
      {"ecc.sram.uncorrected", 0},
      {"ecc.sram.corrected.lifetime", d},
      {"ecc.sram.uncorrected.lifetime", d},
      {"retired.sbe", 2 * d},
      {"retired.dbe", 0},
      {"retired.pending", 0},
      {"violation.power_ns", 1.5e9 * (d + 1)},
      {"violation.thermal_ns", d == 0 ? 0 : 250e6},
      {"violation.sync_boost_ns", 0},
      {"violation.board_limit_ns", 0},
      {"violation.low_utilization_ns", 42e9},
      {"violation.reliability_ns", 0},
      {"pstate", d == 0 ? 0 : 2},
      {"persistence", 1},
      {"mig.mode", 0},  // MIG-capable, not partitioned
      // No "fan": an SXM board is passively cooled and NVML answers NOT_SUPPORTED.
      // GPM, as NVML reports it: percent, and MiB/s for the buses.
      {"gpm.supported", 1},
      {"gpm.1", 87},        // graphics engine
      {"gpm.2", 62.5 + d},  // SM
      {"gpm.3", 31},        // SM occupancy
      {"gpm.4", 9},         // integer
      {"gpm.5", 45},        // any tensor
      {"gpm.6", 0},         // DFMA tensor
      {"gpm.7", 44},        // HMMA tensor
      {"gpm.9", 1},         // IMMA tensor
      {"gpm.10", 55},       // DRAM bandwidth
      {"gpm.11", 0.5},      // FP64
      {"gpm.12", 12},       // FP32
      {"gpm.13", 3},        // FP16
      {"gpm.20", 1024},     // PCIe TX
      {"gpm.21", 2048},     // PCIe RX
      {"gpm.60", 40960},    // NVLink RX
      {"gpm.61", 20480},    // NVLink TX
      {"pcie.gen", 5},
      {"pcie.width", 16},
      {"pcie.replay", 0},
      {"nvlink.count", 2},
      {"nvlink.speed_mbps", 26562},
  };
  for (int l = 0; l < 2; ++l) {
    const std::string p = "nvlink." + std::to_string(l) + ".";
    dev.values[p + "state"] = 1;
    dev.values[p + "tx_kib"] = 1000000.0 * (l + 1) + d;
    dev.values[p + "rx_kib"] = 2000000.0 * (l + 1) + d;
    dev.values[p + "replay"] = l;
    dev.values[p + "recovery"] = 0;
    dev.values[p + "crc_flit"] = 2 * l;
    dev.values[p + "crc_data"] = 0;
  }
}

// For end-to-end runs of the real binary, which cannot call the control functions:
// FAKE_NVML_PROCESSES="DEVICE:compute|graphics:PID:BYTES,..." (BYTES "-": not available).
// Calls `fn` with each comma-separated entry of the environment variable `name`, if set.
template <typename Fn>
void ForEachEnvironmentEntry(const char* name, Fn fn) {
  const char* env = std::getenv(name);
  if (env == nullptr) return;
  const std::string spec = env;
  for (size_t start = 0; start < spec.size();) {
    size_t end = spec.find(',', start);
    if (end == std::string::npos) end = spec.size();
    fn(spec.substr(start, end - start));
    start = end + 1;
  }
}

void ProcessesFromEnvironment(State& s) {
  ForEachEnvironmentEntry("FAKE_NVML_PROCESSES", [&s](const std::string& entry) {
    int device = -1;
    char list[16] = {};
    unsigned pid = 0;
    char bytes[32] = {};
    if (std::sscanf(entry.c_str(), "%d:%15[a-z]:%u:%31s", &device, list, &pid, bytes) == 4 &&
        device >= 0 && device < kMaxDevices) {
      const unsigned long long used = std::strcmp(bytes, "-") == 0
                                          ? NVML_VALUE_NOT_AVAILABLE
                                          : std::strtoull(bytes, nullptr, 10);
      auto& processes = std::strcmp(list, "graphics") == 0 ? s.devices[device].graphics_processes
                                                           : s.devices[device].compute_processes;
      processes.push_back({pid, used, ~0U, ~0U});
    }
  });
}

// A MIG device of `gpu` in `slot`: its name and memory from the profile ("1g.18gb": 18 GiB), a
// share of the GPU's SM activity, and the instance ids.
void AddMigLocked(State& s, int gpu, int slot, const std::string& profile, unsigned gi,
                  unsigned ci) {
  if (gpu < 0 || gpu >= kMaxDevices || slot < 0 || slot >= kMigSlots) return;
  Device& parent = s.devices[gpu];
  parent.values["mig.mode"] = 1;
  Device& mig = s.devices[MigDevice(gpu, slot)];
  mig = Device{};
  mig.mig_present = true;
  char uuid[64];
  std::snprintf(uuid, sizeof uuid, "MIG-5c1d%04d-%04d-4000-8000-%012d", gpu, slot, gi);
  mig.strings = {{"name", parent.strings["name"] + " MIG " + profile}, {"uuid", uuid}};
  double gib = 0;
  if (const size_t dot = profile.find('.'); dot != std::string::npos) {
    gib = std::atof(profile.c_str() + dot + 1);
  }
  const double total = gib * (1 << 30);
  const double used = (1.0 + slot) * (1 << 30);
  mig.values = {{"memory.total", total}, {"memory.reserved", 0},
                {"memory.used", used},   {"memory.free", total - used},
                {"mig.gi", gi},          {"mig.ci", ci},
                {"gpm.supported", 1},    {"gpm.2", 40.0 + 10 * slot},  // SM
                {"gpm.5", 20},                                         // any tensor
                {"gpm.10", 30}};                                       // DRAM bandwidth
}

// FAKE_NVML_MIG="GPU:SLOT:PROFILE:GI:CI,...", as FAKE_NVML_PROCESSES.
void MigFromEnvironment(State& s) {
  ForEachEnvironmentEntry("FAKE_NVML_MIG", [&s](const std::string& entry) {
    int gpu = -1, slot = -1;
    unsigned gi = 0, ci = 0;
    char profile[32] = {};
    if (std::sscanf(entry.c_str(), "%d:%d:%31[^:]:%u:%u", &gpu, &slot, profile, &gi, &ci) == 5) {
      AddMigLocked(s, gpu, slot, profile, gi, ci);
    }
  });
}

void ResetLocked(State& s) {
  s.count = 2;
  s.driver = "550.54.15";
  for (int d = 0; d < kMaxDevices; ++d) Defaults(d, s.devices[d]);
  for (int d = kMigBase; d < kStorage; ++d) s.devices[d] = Device{};
  ProcessesFromEnvironment(s);
  MigFromEnvironment(s);
  s.returns.clear();
  s.hang_ms.clear();
  s.last_wait_timeout = 0;
  s.wait_calls = 0;
  s.calls.clear();
}

struct Init {
  Init() {
    for (int i = 0; i < kStorage; ++i) g_handles[i].index = i;
    std::lock_guard lock(S().mu);
    ResetLocked(S());
  }
} g_init;

// One call into the fake: checks initialisation, the device, scripted answers and hangs.
class Call {
 public:
  Call(const char* fn, nvmlDevice_t h, bool needs_init = true) : Call(fn, DeviceOf(h), needs_init) {
    if (h == nullptr || device_ < 0)
      ret_ = ret_ == NVML_SUCCESS ? NVML_ERROR_INVALID_ARGUMENT : ret_;
  }
  Call(const char* fn, int device, bool needs_init = true) : device_(device) {
    State& s = S();
    int hang = 0;
    {
      std::lock_guard lock(s.mu);
      ++s.in_flight;
      ++s.calls[fn];
      if (needs_init && s.init_count == 0) {
        ret_ = NVML_ERROR_UNINITIALIZED;
        return;
      }
      if (const auto it = s.hang_ms.find(fn); it != s.hang_ms.end()) {
        hang = it->second;
        s.hang_ms.erase(it);
      }
      ret_ = Scripted(s, fn, device);
    }
    // A hung driver call, as the test scripted with hang(): the sleep is the behaviour.
    if (hang > 0) std::this_thread::sleep_for(std::chrono::milliseconds(hang));
  }
  ~Call() {
    std::lock_guard lock(S().mu);
    --S().in_flight;
  }
  nvmlReturn_t ret() const { return ret_; }
  int device() const { return device_; }

  static nvmlReturn_t Scripted(const State& s, const std::string& fn, int device) {
    for (const auto& key : {std::pair{fn, device}, std::pair{fn, -1}}) {
      if (const auto it = s.returns.find(key); it != s.returns.end()) return it->second;
    }
    if (device >= 0 && fn.rfind("field:", 0) != 0 && fn.rfind("nvmlEventSet", 0) != 0) {
      for (const auto& key : {std::pair<std::string, int>{"*", device}, {"*", -1}}) {
        if (const auto it = s.returns.find(key); it != s.returns.end()) return it->second;
      }
    }
    return NVML_SUCCESS;
  }

 private:
  static int DeviceOf(nvmlDevice_t h) {
    if (h == nullptr) return -1;
    const int d = h->index;
    std::lock_guard lock(S().mu);
    const State& s = S();
    if (d >= 0 && d < kMigBase) return d < s.count ? d : -1;
    // A MIG handle is valid while its GPU is present, in MIG mode, and the slot holds it.
    if (d < kMigBase || d >= kStorage) return -1;
    const int gpu = (d - kMigBase) / kMigSlots;
    const auto mode = s.devices[gpu].values.find("mig.mode");
    const bool mig_on = mode != s.devices[gpu].values.end() && mode->second != 0;
    return gpu < s.count && mig_on && s.devices[d].mig_present ? d : -1;
  }

  int device_;
  nvmlReturn_t ret_ = NVML_SUCCESS;
};

std::optional<double> Value(int d, const std::string& key) {
  std::lock_guard lock(S().mu);
  const auto& v = S().devices[d].values;
  const auto it = v.find(key);
  if (it == v.end()) return std::nullopt;
  return it->second;
}

std::optional<std::string> String(int d, const std::string& key) {
  std::lock_guard lock(S().mu);
  const auto& v = S().devices[d].strings;
  const auto it = v.find(key);
  if (it == v.end()) return std::nullopt;
  return it->second;
}

template <typename T>
nvmlReturn_t Out(int d, const char* key, T* out) {
  if (out == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const auto v = Value(d, key);
  if (!v) return NVML_ERROR_NOT_SUPPORTED;
  *out = static_cast<T>(*v);
  return NVML_SUCCESS;
}

nvmlReturn_t CopyString(const std::optional<std::string>& s, char* buf, unsigned length) {
  if (!s) return NVML_ERROR_NOT_SUPPORTED;
  if (buf == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (s->size() + 1 > length) return NVML_ERROR_INSUFFICIENT_SIZE;
  std::memcpy(buf, s->c_str(), s->size() + 1);
  return NVML_SUCCESS;
}

std::string LinkKey(unsigned link, const char* what) {
  return "nvlink." + std::to_string(link) + "." + what;
}

nvmlReturn_t LinkExists(int d, unsigned link) {
  const auto n = Value(d, "nvlink.count");
  if (!n) return NVML_ERROR_NOT_SUPPORTED;
  return link < static_cast<unsigned>(*n) ? NVML_SUCCESS : NVML_ERROR_INVALID_ARGUMENT;
}

#define FAKE_ENTER(fn, handle)      \
  Call call(fn, handle);            \
  if (call.ret() != NVML_SUCCESS) { \
    return call.ret();              \
  }                                 \
  const int d = call.device();      \
  static_cast<void>(d)

nvmlReturn_t DoInit(const char* fn) {
  Call call(fn, -1, /*needs_init=*/false);
  if (call.ret() != NVML_SUCCESS) return call.ret();
  std::lock_guard lock(S().mu);
  ++S().init_count;
  return NVML_SUCCESS;
}

nvmlReturn_t DoCount(const char* fn, unsigned* count) {
  Call call(fn, -1);
  if (call.ret() != NVML_SUCCESS) return call.ret();
  if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  std::lock_guard lock(S().mu);
  *count = static_cast<unsigned>(S().count);
  return NVML_SUCCESS;
}

nvmlReturn_t DoHandle(const char* fn, unsigned index, nvmlDevice_t* device) {
  int count = 0;
  {
    std::lock_guard lock(S().mu);
    count = S().count;
  }
  if (device == nullptr || index >= static_cast<unsigned>(count)) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  Call call(fn, static_cast<int>(index));
  if (call.ret() != NVML_SUCCESS) return call.ret();
  *device = &g_handles[index];
  return NVML_SUCCESS;
}

nvmlReturn_t DoMemoryV1(const char* fn, nvmlDevice_t device, nvmlMemory_t* memory) {
  FAKE_ENTER(fn, device);
  if (memory == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const auto total = Value(d, "memory.total");
  const auto free = Value(d, "memory.free");
  if (!total || !free) return NVML_ERROR_NOT_SUPPORTED;
  memory->total = static_cast<unsigned long long>(*total);
  memory->free = static_cast<unsigned long long>(*free);
  memory->used = memory->total - memory->free;  // v1: used includes the reservation
  return NVML_SUCCESS;
}

nvmlReturn_t DoReasons(const char* fn, nvmlDevice_t device, unsigned long long* reasons) {
  FAKE_ENTER(fn, device);
  return Out(d, "throttle", reasons);
}

nvmlReturn_t DoWait(const char* fn, nvmlEventSet_t set, nvmlEventData_t* data, unsigned timeoutms) {
  Call call(fn, -1);
  if (call.ret() != NVML_SUCCESS) return call.ret();
  if (set != &g_event_set || data == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  {
    std::lock_guard lock(S().mu);
    State& s = S();
    s.last_wait_timeout = timeoutms;
    ++s.wait_calls;
    for (int dev = 0; dev < s.count; ++dev) {
      Device& device = s.devices[dev];
      if (device.xids.empty()) continue;
      *data = nvmlEventData_t{};
      data->device = &g_handles[dev];
      data->eventType = nvmlEventTypeXidCriticalError;
      data->eventData = device.xids.front();
      data->gpuInstanceId = 0xFFFFFFFF;
      data->computeInstanceId = 0xFFFFFFFF;
      device.xids.pop_front();
      return NVML_SUCCESS;
    }
  }
  // Like the driver, an empty set blocks for the timeout (capped so a bad test cannot hang).
  std::this_thread::sleep_for(std::chrono::milliseconds(std::min(timeoutms, 5000U)));
  return NVML_ERROR_TIMEOUT;
}

}  // namespace

extern "C" {

// ---- NVML ------------------------------------------------------------------------------------

#ifndef FAKE_NVML_LEGACY
nvmlReturn_t nvmlInit_v2(void) { return DoInit("nvmlInit_v2"); }
#endif
nvmlReturn_t nvmlInit(void) { return DoInit("nvmlInit"); }

nvmlReturn_t nvmlShutdown(void) {
  std::lock_guard lock(S().mu);
  if (S().init_count == 0) return NVML_ERROR_UNINITIALIZED;
  --S().init_count;
  return NVML_SUCCESS;
}

const char* nvmlErrorString(nvmlReturn_t result) {
  switch (result) {
    case NVML_SUCCESS:
      return "Success";
    case NVML_ERROR_UNINITIALIZED:
      return "Uninitialized";
    case NVML_ERROR_NOT_SUPPORTED:
      return "Not Supported";
    case NVML_ERROR_NO_PERMISSION:
      return "Insufficient Permissions";
    case NVML_ERROR_DRIVER_NOT_LOADED:
      return "Driver Not Loaded";
    case NVML_ERROR_TIMEOUT:
      return "Timeout";
    case NVML_ERROR_GPU_IS_LOST:
      return "GPU is lost";
    default:
      return "Unknown Error";
  }
}

nvmlReturn_t nvmlSystemGetDriverVersion(char* version, unsigned int length) {
  Call call("nvmlSystemGetDriverVersion", -1);
  if (call.ret() != NVML_SUCCESS) return call.ret();
  std::string driver;
  {
    std::lock_guard lock(S().mu);
    driver = S().driver;
  }
  return CopyString(driver, version, length);
}

#ifndef FAKE_NVML_LEGACY
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* deviceCount) {
  return DoCount("nvmlDeviceGetCount_v2", deviceCount);
}
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  return DoHandle("nvmlDeviceGetHandleByIndex_v2", index, device);
}
#endif
nvmlReturn_t nvmlDeviceGetCount(unsigned int* deviceCount) {
  return DoCount("nvmlDeviceGetCount", deviceCount);
}
nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t* device) {
  return DoHandle("nvmlDeviceGetHandleByIndex", index, device);
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name, unsigned int length) {
  FAKE_ENTER("nvmlDeviceGetName", device);
  return CopyString(String(d, "name"), name, length);
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid, unsigned int length) {
  FAKE_ENTER("nvmlDeviceGetUUID", device);
  return CopyString(String(d, "uuid"), uuid, length);
}

nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int* index) {
  FAKE_ENTER("nvmlDeviceGetIndex", device);
  if (index == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *index = static_cast<unsigned>(d);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  FAKE_ENTER("nvmlDeviceGetPciInfo_v3", device);
  if (pci == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *pci = nvmlPciInfo_t{};
  return CopyString(String(d, "bus"), pci->busId, sizeof pci->busId);
}

nvmlReturn_t nvmlDeviceGetVbiosVersion(nvmlDevice_t device, char* version, unsigned int length) {
  FAKE_ENTER("nvmlDeviceGetVbiosVersion", device);
  return CopyString(String(d, "vbios"), version, length);
}

#ifndef FAKE_NVML_LEGACY
nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t* memory) {
  FAKE_ENTER("nvmlDeviceGetMemoryInfo_v2", device);
  if (memory == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (memory->version != nvmlMemory_v2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  const auto total = Value(d, "memory.total");
  const auto reserved = Value(d, "memory.reserved");
  const auto used = Value(d, "memory.used");
  const auto free = Value(d, "memory.free");
  if (!total || !reserved || !used || !free) return NVML_ERROR_NOT_SUPPORTED;
  memory->total = static_cast<unsigned long long>(*total);
  memory->reserved = static_cast<unsigned long long>(*reserved);
  memory->used = static_cast<unsigned long long>(*used);
  memory->free = static_cast<unsigned long long>(*free);
  return NVML_SUCCESS;
}
#endif

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory) {
  return DoMemoryV1("nvmlDeviceGetMemoryInfo", device, memory);
}

nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, nvmlTemperatureSensors_t sensorType,
                                      unsigned int* temp) {
  FAKE_ENTER("nvmlDeviceGetTemperature", device);
  if (sensorType != NVML_TEMPERATURE_GPU) return NVML_ERROR_INVALID_ARGUMENT;
  return Out(d, "temp.gpu", temp);
}

nvmlReturn_t nvmlDeviceGetTemperatureThreshold(nvmlDevice_t device,
                                               nvmlTemperatureThresholds_t thresholdType,
                                               unsigned int* temp) {
  FAKE_ENTER("nvmlDeviceGetTemperatureThreshold", device);
  switch (thresholdType) {
    case NVML_TEMPERATURE_THRESHOLD_SLOWDOWN:
      return Out(d, "temp.slowdown", temp);
    case NVML_TEMPERATURE_THRESHOLD_SHUTDOWN:
      return Out(d, "temp.shutdown", temp);
    default:
      return NVML_ERROR_NOT_SUPPORTED;
  }
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int* power) {
  FAKE_ENTER("nvmlDeviceGetPowerUsage", device);
  return Out(d, "power.usage_mw", power);
}

nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t device, unsigned int* limit) {
  FAKE_ENTER("nvmlDeviceGetEnforcedPowerLimit", device);
  return Out(d, "power.limit_mw", limit);
}

nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t device, unsigned long long* energy) {
  FAKE_ENTER("nvmlDeviceGetTotalEnergyConsumption", device);
  return Out(d, "energy_mj", energy);
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t* utilization) {
  FAKE_ENTER("nvmlDeviceGetUtilizationRates", device);
  if (utilization == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (const nvmlReturn_t r = Out(d, "util.gpu", &utilization->gpu); r != NVML_SUCCESS) return r;
  return Out(d, "util.memory", &utilization->memory);
}

nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, nvmlClockType_t type,
                                    unsigned int* clock) {
  FAKE_ENTER("nvmlDeviceGetClockInfo", device);
  switch (type) {
    case NVML_CLOCK_SM:
      return Out(d, "clock.sm", clock);
    case NVML_CLOCK_MEM:
      return Out(d, "clock.mem", clock);
    default:
      return NVML_ERROR_NOT_SUPPORTED;
  }
}

#ifndef FAKE_NVML_LEGACY
nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t device,
                                                    unsigned long long* clocksEventReasons) {
  return DoReasons("nvmlDeviceGetCurrentClocksEventReasons", device, clocksEventReasons);
}
#endif

nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t device,
                                                       unsigned long long* clocksThrottleReasons) {
  return DoReasons("nvmlDeviceGetCurrentClocksThrottleReasons", device, clocksThrottleReasons);
}

nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device, nvmlMemoryErrorType_t errorType,
                                         nvmlEccCounterType_t counterType,
                                         unsigned long long* eccCounts) {
  FAKE_ENTER("nvmlDeviceGetTotalEccErrors", device);
  const bool corrected = errorType == NVML_MEMORY_ERROR_TYPE_CORRECTED;
  switch (counterType) {
    case NVML_VOLATILE_ECC:
      return Out(d, corrected ? "ecc.corrected" : "ecc.uncorrected", eccCounts);
    case NVML_AGGREGATE_ECC:
      return Out(d, corrected ? "ecc.corrected.lifetime" : "ecc.uncorrected.lifetime", eccCounts);
    default:
      return NVML_ERROR_INVALID_ARGUMENT;
  }
}

// Keys ecc.<location>.<corrected|uncorrected>[.lifetime]; a location without keys answers
// NOT_SUPPORTED, as the driver does for locations the GPU does not count in.
nvmlReturn_t nvmlDeviceGetMemoryErrorCounter(nvmlDevice_t device, nvmlMemoryErrorType_t errorType,
                                             nvmlEccCounterType_t counterType,
                                             nvmlMemoryLocation_t locationType,
                                             unsigned long long* count) {
  FAKE_ENTER("nvmlDeviceGetMemoryErrorCounter", device);
  static constexpr const char* kLocations[] = {"l1",      "l2",          "dram", "register_file",
                                               "texture", "texture_shm", "cbu",  "sram"};
  if (locationType < 0 || locationType >= NVML_MEMORY_LOCATION_COUNT) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  if (counterType != NVML_VOLATILE_ECC && counterType != NVML_AGGREGATE_ECC) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  std::string key = std::string("ecc.") + kLocations[locationType] +
                    (errorType == NVML_MEMORY_ERROR_TYPE_CORRECTED ? ".corrected" : ".uncorrected");
  if (counterType == NVML_AGGREGATE_ECC) key += ".lifetime";
  return Out(d, key.c_str(), count);
}

// As the driver: the count of pages for `cause`, their addresses when the buffer holds them,
// INSUFFICIENT_SIZE (with the count) when it does not.
nvmlReturn_t nvmlDeviceGetRetiredPages(nvmlDevice_t device, nvmlPageRetirementCause_t cause,
                                       unsigned int* pageCount, unsigned long long* addresses) {
  FAKE_ENTER("nvmlDeviceGetRetiredPages", device);
  if (pageCount == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const char* key = nullptr;
  switch (cause) {
    case NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS:
      key = "retired.sbe";
      break;
    case NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR:
      key = "retired.dbe";
      break;
    default:
      return NVML_ERROR_INVALID_ARGUMENT;
  }
  unsigned count = 0;
  if (const nvmlReturn_t r = Out(d, key, &count); r != NVML_SUCCESS) return r;
  const unsigned room = *pageCount;
  *pageCount = count;
  if (count > room) return NVML_ERROR_INSUFFICIENT_SIZE;
  if (count > 0 && addresses == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  for (unsigned i = 0; i < count; ++i) addresses[i] = 0x1000000ULL * (i + 1);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetRetiredPagesPendingStatus(nvmlDevice_t device,
                                                    nvmlEnableState_t* isPending) {
  FAKE_ENTER("nvmlDeviceGetRetiredPagesPendingStatus", device);
  return Out(d, "retired.pending", isPending);
}

nvmlReturn_t nvmlDeviceGetViolationStatus(nvmlDevice_t device, nvmlPerfPolicyType_t perfPolicyType,
                                          nvmlViolationTime_t* violTime) {
  FAKE_ENTER("nvmlDeviceGetViolationStatus", device);
  if (violTime == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const char* key = nullptr;
  switch (perfPolicyType) {
    case NVML_PERF_POLICY_POWER:
      key = "violation.power_ns";
      break;
    case NVML_PERF_POLICY_THERMAL:
      key = "violation.thermal_ns";
      break;
    case NVML_PERF_POLICY_SYNC_BOOST:
      key = "violation.sync_boost_ns";
      break;
    case NVML_PERF_POLICY_BOARD_LIMIT:
      key = "violation.board_limit_ns";
      break;
    case NVML_PERF_POLICY_LOW_UTILIZATION:
      key = "violation.low_utilization_ns";
      break;
    case NVML_PERF_POLICY_RELIABILITY:
      key = "violation.reliability_ns";
      break;
    default:
      return NVML_ERROR_NOT_SUPPORTED;
  }
  const nvmlReturn_t r = Out(d, key, &violTime->violationTime);
  if (r == NVML_SUCCESS) {
    violTime->referenceTime =
        static_cast<unsigned long long>(std::chrono::duration_cast<std::chrono::microseconds>(
                                            std::chrono::system_clock::now().time_since_epoch())
                                            .count());
  }
  return r;
}

nvmlReturn_t nvmlDeviceGetPerformanceState(nvmlDevice_t device, nvmlPstates_t* pState) {
  FAKE_ENTER("nvmlDeviceGetPerformanceState", device);
  return Out(d, "pstate", pState);
}

nvmlReturn_t nvmlDeviceGetFanSpeed(nvmlDevice_t device, unsigned int* speed) {
  FAKE_ENTER("nvmlDeviceGetFanSpeed", device);
  return Out(d, "fan", speed);
}

nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t device, nvmlEnableState_t* mode) {
  FAKE_ENTER("nvmlDeviceGetPersistenceMode", device);
  return Out(d, "persistence", mode);
}

#ifndef FAKE_NVML_LEGACY
nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t device, unsigned int* corrRows,
                                       unsigned int* uncRows, unsigned int* isPending,
                                       unsigned int* failureOccurred) {
  FAKE_ENTER("nvmlDeviceGetRemappedRows", device);
  for (const auto& [key, out] : {std::pair{"remap.corr", corrRows},
                                 {"remap.unc", uncRows},
                                 {"remap.pending", isPending},
                                 {"remap.failure", failureOccurred}}) {
    if (const nvmlReturn_t r = Out(d, key, out); r != NVML_SUCCESS) return r;
  }
  return NVML_SUCCESS;
}
#endif

#ifndef FAKE_NVML_LEGACY
// ---- GPM: absent from the legacy build (drivers before 520) ---------------------------------

nvmlReturn_t nvmlGpmQueryDeviceSupport(nvmlDevice_t device, nvmlGpmSupport_t* gpmSupport) {
  FAKE_ENTER("nvmlGpmQueryDeviceSupport", device);
  if (gpmSupport == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (gpmSupport->version != NVML_GPM_SUPPORT_VERSION) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  gpmSupport->isSupportedDevice = Value(d, "gpm.supported").value_or(0) != 0 ? 1 : 0;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpmSampleAlloc(nvmlGpmSample_t* gpmSample) {
  Call call("nvmlGpmSampleAlloc", -1);
  if (call.ret() != NVML_SUCCESS) return call.ret();
  if (gpmSample == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *gpmSample = new nvmlGpmSample_st;
  std::lock_guard lock(S().mu);
  S().gpm_samples.insert(*gpmSample);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpmSampleFree(nvmlGpmSample_t gpmSample) {
  std::lock_guard lock(S().mu);
  if (S().gpm_samples.erase(gpmSample) == 0) return NVML_ERROR_INVALID_ARGUMENT;
  delete gpmSample;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpmSampleGet(nvmlDevice_t device, nvmlGpmSample_t gpmSample) {
  FAKE_ENTER("nvmlGpmSampleGet", device);
  std::lock_guard lock(S().mu);
  State& s = S();
  if (s.gpm_samples.count(gpmSample) == 0) return NVML_ERROR_INVALID_ARGUMENT;
  const auto& values = s.devices[d].values;
  if (const auto it = values.find("gpm.supported"); it == values.end() || it->second == 0) {
    return NVML_ERROR_NOT_SUPPORTED;
  }
  gpmSample->device = d;
  gpmSample->sequence = ++s.gpm_sequence;
  gpmSample->values.clear();
  for (const auto& [key, value] : values) {
    if (key.rfind("gpm.", 0) == 0 && key != "gpm.supported") {
      gpmSample->values[std::atoi(key.c_str() + 4)] = value;
    }
  }
  return NVML_SUCCESS;
}

// A GPU instance's sample, through its GPU's handle: the values of the MIG device with that GI.
nvmlReturn_t nvmlGpmMigSampleGet(nvmlDevice_t device, unsigned int gpuInstanceId,
                                 nvmlGpmSample_t gpmSample) {
  FAKE_ENTER("nvmlGpmMigSampleGet", device);
  std::lock_guard lock(S().mu);
  State& s = S();
  if (d >= kMigBase || s.gpm_samples.count(gpmSample) == 0) return NVML_ERROR_INVALID_ARGUMENT;
  const auto supported = s.devices[d].values.find("gpm.supported");
  if (supported == s.devices[d].values.end() || supported->second == 0) {
    return NVML_ERROR_NOT_SUPPORTED;
  }
  for (int slot = 0; slot < kMigSlots; ++slot) {
    const int m = MigDevice(d, slot);
    const Device& mig = s.devices[m];
    const auto gi = mig.values.find("mig.gi");
    if (!mig.mig_present || gi == mig.values.end() || gi->second != gpuInstanceId) continue;
    gpmSample->device = m;
    gpmSample->sequence = ++s.gpm_sequence;
    gpmSample->values.clear();
    for (const auto& [key, value] : mig.values) {
      if (key.rfind("gpm.", 0) == 0 && key != "gpm.supported") {
        gpmSample->values[std::atoi(key.c_str() + 4)] = value;
      }
    }
    return NVML_SUCCESS;
  }
  return NVML_ERROR_NOT_FOUND;
}

// As the driver: two samples of one device, the first taken before the second; each metric's
// own status. The value is the newer sample's (the activity over the interval it closes).
nvmlReturn_t nvmlGpmMetricsGet(nvmlGpmMetricsGet_t* metricsGet) {
  Call call("nvmlGpmMetricsGet", -1);
  if (call.ret() != NVML_SUCCESS) return call.ret();
  if (metricsGet == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (metricsGet->version != NVML_GPM_METRICS_GET_VERSION) {
    return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  }
  std::lock_guard lock(S().mu);
  const State& s = S();
  const nvmlGpmSample_st* first = metricsGet->sample1;
  const nvmlGpmSample_st* second = metricsGet->sample2;
  if (s.gpm_samples.count(metricsGet->sample1) == 0 ||
      s.gpm_samples.count(metricsGet->sample2) == 0 || first->device < 0 ||
      first->device != second->device || first->sequence >= second->sequence ||
      metricsGet->numMetrics > ACCELMON_GPM_METRICS) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  for (unsigned i = 0; i < metricsGet->numMetrics; ++i) {
    nvmlGpmMetric_t& m = metricsGet->metrics[i];
    const auto it = second->values.find(static_cast<int>(m.metricId));
    m.nvmlReturn = it == second->values.end() ? NVML_ERROR_NOT_SUPPORTED : NVML_SUCCESS;
    m.value = it == second->values.end() ? 0 : it->second;
  }
  return NVML_SUCCESS;
}
#endif

nvmlReturn_t nvmlDeviceGetCurrPcieLinkGeneration(nvmlDevice_t device, unsigned int* currLinkGen) {
  FAKE_ENTER("nvmlDeviceGetCurrPcieLinkGeneration", device);
  return Out(d, "pcie.gen", currLinkGen);
}

nvmlReturn_t nvmlDeviceGetCurrPcieLinkWidth(nvmlDevice_t device, unsigned int* currLinkWidth) {
  FAKE_ENTER("nvmlDeviceGetCurrPcieLinkWidth", device);
  return Out(d, "pcie.width", currLinkWidth);
}

nvmlReturn_t nvmlDeviceGetPcieReplayCounter(nvmlDevice_t device, unsigned int* value) {
  FAKE_ENTER("nvmlDeviceGetPcieReplayCounter", device);
  return Out(d, "pcie.replay", value);
}

nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link,
                                      nvmlEnableState_t* isActive) {
  FAKE_ENTER("nvmlDeviceGetNvLinkState", device);
  if (const nvmlReturn_t r = LinkExists(d, link); r != NVML_SUCCESS) return r;
  unsigned state = 0;
  if (const nvmlReturn_t r = Out(d, LinkKey(link, "state").c_str(), &state); r != NVML_SUCCESS) {
    return r;
  }
  if (isActive == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *isActive = state != 0 ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t device, unsigned int link,
                                                 nvmlPciInfo_t* pci) {
  FAKE_ENTER("nvmlDeviceGetNvLinkRemotePciInfo_v2", device);
  if (const nvmlReturn_t r = LinkExists(d, link); r != NVML_SUCCESS) return r;
  if (pci == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  int count = 0;
  {
    std::lock_guard lock(S().mu);
    count = S().count;
  }
  int peer = count > 1 ? (d + 1 + static_cast<int>(link) % (count - 1)) % count : d;
  if (const auto p = Value(d, LinkKey(link, "peer"))) peer = static_cast<int>(*p);
  if (peer < 0 || peer >= kMaxDevices) return NVML_ERROR_UNKNOWN;
  *pci = nvmlPciInfo_t{};
  return CopyString(String(peer, "bus"), pci->busId, sizeof pci->busId);
}

nvmlReturn_t nvmlDeviceGetNvLinkErrorCounter(nvmlDevice_t device, unsigned int link,
                                             nvmlNvLinkErrorCounter_t counter,
                                             unsigned long long* counterValue) {
  FAKE_ENTER("nvmlDeviceGetNvLinkErrorCounter", device);
  if (const nvmlReturn_t r = LinkExists(d, link); r != NVML_SUCCESS) return r;
  switch (counter) {
    case NVML_NVLINK_ERROR_DL_REPLAY:
      return Out(d, LinkKey(link, "replay").c_str(), counterValue);
    case NVML_NVLINK_ERROR_DL_RECOVERY:
      return Out(d, LinkKey(link, "recovery").c_str(), counterValue);
    case NVML_NVLINK_ERROR_DL_CRC_FLIT:
      return Out(d, LinkKey(link, "crc_flit").c_str(), counterValue);
    case NVML_NVLINK_ERROR_DL_CRC_DATA:
      return Out(d, LinkKey(link, "crc_data").c_str(), counterValue);
    default:
      return NVML_ERROR_NOT_SUPPORTED;
  }
}

#ifndef FAKE_NVML_LEGACY
nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t device, int valuesCount,
                                      nvmlFieldValue_t* values) {
  FAKE_ENTER("nvmlDeviceGetFieldValues", device);
  if (valuesCount < 0 || (valuesCount > 0 && values == nullptr)) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  for (int i = 0; i < valuesCount; ++i) {
    nvmlFieldValue_t& f = values[i];
    f.timestamp = 1'700'000'000'000'000LL;
    f.latencyUsec = 0;
    f.value.ullVal = 0;
    {
      std::lock_guard lock(S().mu);
      f.nvmlReturn = Call::Scripted(S(), "field:" + std::to_string(f.fieldId), d);
    }
    if (f.nvmlReturn != NVML_SUCCESS) continue;
    std::optional<double> v;
    switch (f.fieldId) {
      case NVML_FI_DEV_MEMORY_TEMP:
        f.valueType = NVML_VALUE_TYPE_UNSIGNED_INT;
        v = Value(d, "temp.memory");
        break;
      case NVML_FI_DEV_NVLINK_SPEED_MBPS_COMMON:
        f.valueType = NVML_VALUE_TYPE_UNSIGNED_INT;
        v = Value(d, "nvlink.speed_mbps");
        break;
      case NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX:
      case NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX:
        f.valueType = NVML_VALUE_TYPE_UNSIGNED_LONG_LONG;
        if (LinkExists(d, f.scopeId) == NVML_SUCCESS) {
          v = Value(
              d, LinkKey(f.scopeId,
                         f.fieldId == NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX ? "tx_kib" : "rx_kib"));
        }
        break;
      default:
        break;
    }
    if (!v) {
      f.nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
    } else if (f.valueType == NVML_VALUE_TYPE_UNSIGNED_INT) {
      f.value.uiVal = static_cast<unsigned>(*v);
    } else {
      f.value.ullVal = static_cast<unsigned long long>(*v);
    }
  }
  return NVML_SUCCESS;
}
#endif

#ifndef FAKE_NVML_LEGACY
nvmlReturn_t nvmlDeviceGetGpuFabricInfoV(nvmlDevice_t device, nvmlGpuFabricInfoV_t* info) {
  FAKE_ENTER("nvmlDeviceGetGpuFabricInfoV", device);
  if (info == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (info->version != nvmlGpuFabricInfo_v2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  const auto state = Value(d, "fabric.state");
  if (!state) return NVML_ERROR_NOT_SUPPORTED;
  const unsigned version = info->version;
  *info = nvmlGpuFabricInfoV_t{};
  info->version = version;
  std::memset(info->clusterUuid, 0xab, sizeof info->clusterUuid);
  info->state = static_cast<nvmlGpuFabricState_t>(*state);
  info->status = static_cast<nvmlReturn_t>(Value(d, "fabric.status").value_or(0));
  info->cliqueId = static_cast<unsigned>(Value(d, "fabric.clique").value_or(0));
  if (const auto degraded = Value(d, "fabric.degraded")) {
    info->healthMask = (*degraded != 0 ? NVML_GPU_FABRIC_HEALTH_MASK_DEGRADED_BW_TRUE
                                       : NVML_GPU_FABRIC_HEALTH_MASK_DEGRADED_BW_FALSE)
                       << NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_DEGRADED_BW;
  }
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int* currentMode,
                                  unsigned int* pendingMode) {
  FAKE_ENTER("nvmlDeviceGetMigMode", device);
  if (currentMode == nullptr || pendingMode == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (d >= kMigBase) return NVML_ERROR_NOT_SUPPORTED;
  if (const nvmlReturn_t r = Out(d, "mig.mode", currentMode); r != NVML_SUCCESS) return r;
  *pendingMode = *currentMode;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int* count) {
  FAKE_ENTER("nvmlDeviceGetMaxMigDeviceCount", device);
  if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (d >= kMigBase || !Value(d, "mig.mode")) return NVML_ERROR_NOT_SUPPORTED;
  *count = kMigSlots;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned int index,
                                                 nvmlDevice_t* migDevice) {
  FAKE_ENTER("nvmlDeviceGetMigDeviceHandleByIndex", device);
  if (migDevice == nullptr || d >= kMigBase || index >= static_cast<unsigned>(kMigSlots)) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  if (Value(d, "mig.mode").value_or(0) == 0) return NVML_ERROR_INVALID_ARGUMENT;
  const int m = MigDevice(d, static_cast<int>(index));
  {
    std::lock_guard lock(S().mu);
    if (!S().devices[m].mig_present) return NVML_ERROR_NOT_FOUND;
  }
  *migDevice = &g_handles[m];
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t device, unsigned int* id) {
  FAKE_ENTER("nvmlDeviceGetGpuInstanceId", device);
  if (d < kMigBase) return NVML_ERROR_INVALID_ARGUMENT;  // not a MIG device
  return Out(d, "mig.gi", id);
}

nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t device, unsigned int* id) {
  FAKE_ENTER("nvmlDeviceGetComputeInstanceId", device);
  if (d < kMigBase) return NVML_ERROR_INVALID_ARGUMENT;
  return Out(d, "mig.ci", id);
}
#endif

nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t* set) {
  Call call("nvmlEventSetCreate", -1);
  if (call.ret() != NVML_SUCCESS) return call.ret();
  if (set == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *set = &g_event_set;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long eventTypes,
                                      nvmlEventSet_t set) {
  FAKE_ENTER("nvmlDeviceRegisterEvents", device);
  if (set != &g_event_set) return NVML_ERROR_INVALID_ARGUMENT;
  if ((eventTypes & nvmlEventTypeXidCriticalError) != 0) {
    std::lock_guard lock(S().mu);
    S().devices[d].xid_registered = true;
  }
  return NVML_SUCCESS;
}

#ifndef FAKE_NVML_LEGACY
nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t* data,
                                 unsigned int timeoutms) {
  return DoWait("nvmlEventSetWait_v2", set, data, timeoutms);
}
#endif

nvmlReturn_t nvmlEventSetWait(nvmlEventSet_t set, nvmlEventData_t* data, unsigned int timeoutms) {
  return DoWait("nvmlEventSetWait", set, data, timeoutms);
}

nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) {
  Call call("nvmlEventSetFree", -1);
  if (call.ret() != NVML_SUCCESS) return call.ret();
  return set == &g_event_set ? NVML_SUCCESS : NVML_ERROR_INVALID_ARGUMENT;
}

#ifndef FAKE_NVML_LEGACY
namespace {
nvmlReturn_t DoProcesses(const char* fn, nvmlDevice_t device, bool compute, unsigned* count,
                         nvmlProcessInfo_t* infos) {
  FAKE_ENTER(fn, device);
  if (count == nullptr || (*count > 0 && infos == nullptr)) return NVML_ERROR_INVALID_ARGUMENT;
  std::lock_guard lock(S().mu);
  Device& dev = S().devices[d];
  auto& list = compute ? dev.compute_processes : dev.graphics_processes;
  if (*count < list.size()) {
    *count = static_cast<unsigned>(list.size());
    const auto appear = dev.values.find("processes.appear_between_calls");
    if (compute && appear != dev.values.end()) {
      for (int i = 0; i < static_cast<int>(appear->second); ++i) {
        list.push_back({static_cast<unsigned>(90000 + list.size()), 1ULL << 20, ~0U, ~0U});
      }
    }
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  std::copy(list.begin(), list.end(), infos);
  *count = static_cast<unsigned>(list.size());
  return NVML_SUCCESS;
}
}  // namespace

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int* infoCount,
                                                     nvmlProcessInfo_t* infos) {
  return DoProcesses("nvmlDeviceGetComputeRunningProcesses_v3", device, true, infoCount, infos);
}

nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t device, unsigned int* infoCount,
                                                      nvmlProcessInfo_t* infos) {
  return DoProcesses("nvmlDeviceGetGraphicsRunningProcesses_v3", device, false, infoCount, infos);
}
#endif

// ---- Control, for tests ----------------------------------------------------------------------

void fake_nvml_reset() {
  std::lock_guard lock(S().mu);
  ResetLocked(S());
}

void fake_nvml_set_device_count(int n) {
  std::lock_guard lock(S().mu);
  S().count = n < 0 ? 0 : (n > kMaxDevices ? kMaxDevices : n);
}

// device -1: every GPU (not the MIG devices); a MIG device by fake_nvml_mig_device's number.
void fake_nvml_set_value(int device, const char* key, double value) {
  std::lock_guard lock(S().mu);
  for (int d = 0; d < kStorage; ++d) {
    if ((device == -1 && d < kMaxDevices) || device == d) S().devices[d].values[key] = value;
  }
}

void fake_nvml_erase_value(int device, const char* key) {
  std::lock_guard lock(S().mu);
  for (int d = 0; d < kStorage; ++d) {
    if ((device == -1 && d < kMaxDevices) || device == d) S().devices[d].values.erase(key);
  }
}

void fake_nvml_set_string(int device, const char* key, const char* value) {
  std::lock_guard lock(S().mu);
  if (device == -1 && std::strcmp(key, "driver") == 0) {
    S().driver = value;
    return;
  }
  for (int d = 0; d < kMaxDevices; ++d) {
    if (device == -1 || device == d) S().devices[d].strings[key] = value;
  }
}

void fake_nvml_set_return(const char* function_name, int device, nvmlReturn_t ret) {
  std::lock_guard lock(S().mu);
  if (ret == NVML_SUCCESS) {
    S().returns.erase({function_name, device});
  } else {
    S().returns[{function_name, device}] = ret;
  }
}

// Queues an XID as the driver would: only for a device registered for XID events.
void fake_nvml_push_xid(int device, unsigned long long xid) {
  std::lock_guard lock(S().mu);
  if (device < 0 || device >= kMaxDevices || !S().devices[device].xid_registered) return;
  S().devices[device].xids.push_back(xid);
}

void fake_nvml_hang(const char* function_name, int milliseconds) {
  std::lock_guard lock(S().mu);
  S().hang_ms[function_name] = milliseconds;
}

// A process on `device` in NVML's "compute" or "graphics" list; used_bytes ~0ULL: not available.
void fake_nvml_add_process(int device, const char* list, unsigned pid,
                           unsigned long long used_bytes) {
  std::lock_guard lock(S().mu);
  if (device < 0 || device >= kStorage) return;
  Device& dev = S().devices[device];
  auto& processes =
      std::strcmp(list, "graphics") == 0 ? dev.graphics_processes : dev.compute_processes;
  processes.push_back({pid, used_bytes, ~0U, ~0U});
}

int fake_nvml_init_count() {
  std::lock_guard lock(S().mu);
  return S().init_count;
}

// How many times `function_name` was called since the last reset.
int fake_nvml_call_count(const char* function_name) {
  std::lock_guard lock(S().mu);
  const auto it = S().calls.find(function_name);
  return it == S().calls.end() ? 0 : it->second;
}

int fake_nvml_calls_in_flight() {
  std::lock_guard lock(S().mu);
  return S().in_flight;
}

unsigned fake_nvml_last_wait_timeout() {
  std::lock_guard lock(S().mu);
  return S().last_wait_timeout;
}

int fake_nvml_wait_calls() {
  std::lock_guard lock(S().mu);
  return S().wait_calls;
}

// A MIG device in `slot` of `gpu` (MIG turns on for that GPU); its number for the other
// control functions.
int fake_nvml_add_mig(int gpu, int slot, const char* profile, unsigned gi, unsigned ci) {
  std::lock_guard lock(S().mu);
  AddMigLocked(S(), gpu, slot, profile, gi, ci);
  return MigDevice(gpu, slot);
}

int fake_nvml_mig_device(int gpu, int slot) { return MigDevice(gpu, slot); }

// Removes the MIG device in `slot` of `gpu` (the GPU stays in MIG mode).
void fake_nvml_remove_mig(int gpu, int slot) {
  std::lock_guard lock(S().mu);
  S().devices[MigDevice(gpu, slot)] = Device{};
}

// GPM samples allocated and not freed.
int fake_nvml_gpm_samples_live() {
  std::lock_guard lock(S().mu);
  return static_cast<int>(S().gpm_samples.size());
}

}  // extern "C"
