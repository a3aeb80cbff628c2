// The "processes" collector: who uses each device. Runs after the device collectors and the push
// collector (collectors/registry.cc): adds the amdgpu processes found through
// /proc/PID/fdinfo, fills the user and command of every process on a device from /proc, reads
// each one's Slurm job and step from /proc/PID/cgroup, and groups each device's processes into
// holders (docs/jobs.md "Slurm and plain processes").
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "collectors/collector.h"
#include "collectors/path_resolver.h"

namespace accelmon::collectors {

struct ProcessesOptions {
  // At most this many processes per device in the report (and pids per holder): the ones using
  // the most device memory, pushing processes first (--processes.max-per-device).
  size_t max_per_device = 64;
  // A process's cgroup, user and command are read when it first appears on a device and again
  // after half to all of this long, by pid (they change only at exec or setuid, which a GPU
  // process rarely does).
  std::chrono::milliseconds reread_after{300'000};
  // amdgpu: how often every process's /proc/PID/fd is walked for DRM fds (a process that opens
  // a GPU is seen within this long); the fdinfo of the fds found is read every tick.
  std::chrono::milliseconds fd_rescan_after{10'000};
};

// A Slurm job step from one process's /proc/PID/cgroup, cgroup v1
// ("4:devices:/slurm/uid_1000/job_4711/step_0/task_0") or v2
// ("0::/system.slice/slurmstepd.scope/job_4711/step_batch/user/task_0"). Step is "0", "batch",
// "extern", "interactive"...; empty when the process sits in the job's cgroup outside a step.
struct SlurmStep {
  std::string job;
  std::string step;
  bool operator==(const SlurmStep&) const = default;
};
std::optional<SlurmStep> ParseSlurmCgroup(std::string_view cgroup);

// The real uid of /proc/PID/status ("Uid:\t1000\t1000\t1000\t1000").
std::optional<uint32_t> ParseStatusUid(std::string_view status);

// The keys of one DRM fd's /proc/PID/fdinfo/FD that attribute it (docs/drm-usage-stats).
struct DrmFdinfo {
  std::string driver;                  // drm-driver: "amdgpu"
  std::string pdev;                    // drm-pdev: "0000:c1:00.0"
  std::optional<uint64_t> client_id;   // drm-client-id: the same for fds of one open file
  std::optional<uint64_t> vram_bytes;  // drm-memory-vram (older kernels) or drm-total-vram
};
DrmFdinfo ParseDrmFdinfo(std::string_view fdinfo);

class ProcessesCollector final : public Collector {
 public:
  ProcessesCollector(const PathResolver& paths, ProcessesOptions options);

  std::string_view name() const override { return "processes"; }
  void Collect(v1::NodeReport& report) override;

 private:
  struct ProcessInfo {
    bool gone = false;  // /proc/PID vanished since the device listed it
    std::optional<SlurmStep> slurm;
    std::string user;
    std::string command;
    uint64_t tick = 0;  // the last tick a device listed it
    std::chrono::steady_clock::time_point read_again_at;
  };
  // pid -> (pdev -> bytes) of the amdgpu DRM clients in /proc.
  using AmdgpuClients = std::map<uint32_t, std::map<std::string, std::optional<uint64_t>>>;

  AmdgpuClients ScanAmdgpuClients(std::chrono::steady_clock::time_point now);
  void FindDrmFds();  // every process's fds that open /dev/dri/*, into drm_fds_
  ProcessInfo ReadProcess(uint32_t pid);
  std::string UserName(uint32_t uid);
  // Reads one /proc file; false when it could not (vanished: `gone`; EACCES logged once).
  bool ReadProcFile(uint32_t pid, std::string_view file, std::string& out, bool& gone);
  void NoteUnreadable(const std::string& path, int error);

  PathResolver paths_;
  ProcessesOptions options_;
  std::unordered_map<uint32_t, std::string> users_;       // uid -> name; names rarely change
  std::unordered_map<uint32_t, ProcessInfo> known_;       // pids on a device at the last tick
  uint64_t tick_ = 0;                                     // Collect calls so far
  std::map<uint32_t, std::vector<std::string>> drm_fds_;  // pid -> fd names, amdgpu nodes only
  std::chrono::steady_clock::time_point next_fd_scan_{};
  bool said_unreadable_ = false;
};

}  // namespace accelmon::collectors
