// Allocator statistics pushed by training processes (proto/accelmon/v1/push.proto): the table of
// the latest push per (device, pid), and the "push" collector that attaches it to the report and
// derives the device's largest free block and fragmentation from it.
//
// Device memory fragmentation lives inside the framework's caching allocator: memory the
// allocator reserved but does not use is free for that process only, and only in blocks no larger
// than its largest cached free block.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "accelmon/v1/push.pb.h"
#include "collectors/collector.h"

namespace accelmon::collectors {

// Sets memory.largest_free_block_bytes and memory.fragmentation_ratio of `device` from its
// processes (device.processes()) and its free memory:
//   largest free block = max(largest cached free block of any process, device free memory)
//   fragmentation      = 1 - largest free block / (device free + sum(reserved - allocated))
// clamped to [0, 1]; 0 when nothing at all is free. Leaves both untouched when the device has no
// processes.
void DeriveFragmentation(v1::DeviceTelemetry& device);

// Adds a pushed process to `device`: into the entry of the same pid when a device collector
// already listed it (NVML's used_bytes stays, the pushed fields are added), else as a new entry.
void MergeProcess(v1::DeviceTelemetry& device, v1::ProcessMemory pushed);

struct PushStoreOptions {
  size_t max_processes_per_device = 64;
  std::chrono::milliseconds expire_after{30'000};
  // Where /proc/<pid> is looked up to expire processes that are gone.
  std::string procfs = "/proc";
  // Longer job and rank labels are refused (the exporter's label limit).
  size_t max_label_bytes = 128;
};

// The reasons a push is refused (PushReply.reason and the `reason` label of
// accelmon_agent_push_rejected_total).
// (Invalid UTF-8 in job or rank never arrives: gRPC cannot parse such a message.)
inline constexpr const char* kPushRejectReasons[] = {"missing_pid",
                                                     "missing_device",
                                                     "unknown_device",
                                                     "label_too_long",
                                                     "allocated_exceeds_reserved",
                                                     "largest_free_block_exceeds_reserved",
                                                     "too_many_processes"};

// Thread-safe; every call does work bounded by the number of devices and
// max_processes_per_device under its mutex, so no client can stall the collection thread.
class PushStore {
 public:
  using SteadyClock = std::chrono::steady_clock;

  explicit PushStore(PushStoreOptions options);

  // The devices of the agent's latest report: pushes for other devices are refused.
  void SetKnownDevices(const v1::NodeReport& report);

  // Keeps `stats` as the latest of its (device, pid); returns why not, or empty when accepted.
  std::string Accept(const v1::AllocatorStats& stats, SteadyClock::time_point now);

  // Drops entries older than expire_after or whose process is gone, then returns the rest per
  // device key (see DeviceKey), sorted by pid.
  std::map<std::string, std::vector<v1::ProcessMemory>> Collect(SteadyClock::time_point now);

  // Rejected pushes by reason, every reason present (0 when none).
  std::map<std::string, uint64_t> rejected() const;

  // How a device is keyed: its uuid, or "#<index>" for a device without one.
  static std::string DeviceKey(const std::string& uuid, uint32_t index);

 private:
  struct Entry {
    v1::ProcessMemory process;
    SteadyClock::time_point received;
  };
  struct KnownDevice {
    std::string uuid;
    uint32_t index;
  };

  std::string AcceptLocked(const v1::AllocatorStats& stats, SteadyClock::time_point now);
  void ExpireLocked(SteadyClock::time_point now);

  const PushStoreOptions options_;
  mutable std::mutex mu_;
  std::vector<KnownDevice> known_;
  std::map<std::string, std::map<uint32_t, Entry>> devices_;  // device key -> pid -> latest
  std::map<std::string, uint64_t> rejected_;
};

// Runs after the device collectors: attaches the pushed processes to the devices of the report
// (matched by uuid, else by index; merged by pid into the processes already listed), derives
// fragmentation for those devices, tells the store which devices exist, and reports the rejection
// counters in report.agent().
class PushCollector final : public Collector {
 public:
  explicit PushCollector(PushStore& store) : store_(store) {}

  std::string_view name() const override { return "push"; }
  void Collect(v1::NodeReport& report) override;

 private:
  PushStore& store_;
};

}  // namespace accelmon::collectors
