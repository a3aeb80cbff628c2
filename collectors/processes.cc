#include "collectors/processes.h"

#include <pwd.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>
#include <system_error>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "collectors/file_reader.h"
#include "collectors/text_parsing.h"

namespace accelmon::collectors {
namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// "1234 KiB" -> bytes; the unit is optional (drm-usage-stats: none, KiB, MiB, GiB).
std::optional<uint64_t> ParseDrmBytes(std::string_view value) {
  const auto fields = SplitFields(value);
  if (fields.empty() || fields.size() > 2) return std::nullopt;
  const auto n = ParseUint64(fields[0]);
  if (!n) return std::nullopt;
  uint64_t scale = 1;
  if (fields.size() == 2) {
    if (fields[1] == "KiB") {
      scale = 1ULL << 10;
    } else if (fields[1] == "MiB") {
      scale = 1ULL << 20;
    } else if (fields[1] == "GiB") {
      scale = 1ULL << 30;
    } else {
      return std::nullopt;
    }
  }
  return *n * scale;
}

// What the cap keeps: processes that push allocator statistics, then the most device memory.
bool KeepBefore(const v1::ProcessMemory* a, const v1::ProcessMemory* b) {
  const bool a_pushed = a->has_reserved_bytes() || !a->job().empty();
  const bool b_pushed = b->has_reserved_bytes() || !b->job().empty();
  if (a_pushed != b_pushed) return a_pushed;
  if (a->used_bytes() != b->used_bytes()) return a->used_bytes() > b->used_bytes();
  return a->pid() < b->pid();
}

bool ByPid(const v1::ProcessMemory* a, const v1::ProcessMemory* b) { return a->pid() < b->pid(); }

// One entry per pid, ascending: a pid listed twice (NVML and a push appended after it) becomes
// one, the later entry's fields over the earlier's.
void MergeByPid(v1::DeviceTelemetry& d) {
  auto& ps = *d.mutable_processes();
  const auto not_ascending = [](const v1::ProcessMemory* a, const v1::ProcessMemory* b) {
    return a->pid() >= b->pid();
  };
  if (std::adjacent_find(ps.pointer_begin(), ps.pointer_end(), not_ascending) == ps.pointer_end()) {
    return;  // the usual case: one device collector, pid order
  }
  std::stable_sort(ps.pointer_begin(), ps.pointer_end(), ByPid);
  for (int i = ps.size() - 1; i > 0; --i) {
    if (ps[i].pid() != ps[i - 1].pid()) continue;
    ps[i - 1].MergeFrom(ps[i]);
    ps.DeleteSubrange(i, 1);
  }
}

std::unordered_set<uint32_t> HeldPids(const v1::DeviceTelemetry& d) {
  std::unordered_set<uint32_t> held;
  for (const v1::DeviceHolder& h : d.holders()) held.insert(h.pids().begin(), h.pids().end());
  return held;
}

void CapProcesses(v1::DeviceTelemetry& d, size_t max) {
  auto& ps = *d.mutable_processes();
  if (static_cast<size_t>(ps.size()) <= max) return;
  std::sort(ps.pointer_begin(), ps.pointer_end(), KeepBefore);
  ps.DeleteSubrange(static_cast<int>(max), ps.size() - static_cast<int>(max));
  std::sort(ps.pointer_begin(), ps.pointer_end(), ByPid);
}

}  // namespace

std::optional<SlurmStep> ParseSlurmCgroup(std::string_view cgroup) {
  // The first line with a job and a step; else the first with a job (v1 controllers Slurm
  // constrains only at job level, such as memory without ConstrainRAMSpace per step).
  std::optional<SlurmStep> found;
  ForEachLine(cgroup, [&](std::string_view line) {
    if (found && !found->step.empty()) return;
    // "hierarchy-ID:controllers:path"; the path may itself hold ':'.
    const size_t first = line.find(':');
    if (first == std::string_view::npos) return;
    const size_t second = line.find(':', first + 1);
    if (second == std::string_view::npos) return;
    std::string_view path = Trim(line.substr(second + 1));
    std::vector<std::string_view> parts;
    while (!path.empty()) {
      const size_t slash = path.find('/');
      if (slash != 0) parts.push_back(path.substr(0, slash));
      if (slash == std::string_view::npos) break;
      path.remove_prefix(slash + 1);
    }
    for (size_t i = 0; i < parts.size(); ++i) {
      if (!parts[i].starts_with("job_") || !AllDigits(parts[i].substr(4))) continue;
      SlurmStep s{.job = std::string(parts[i].substr(4)), .step = {}};
      if (i + 1 < parts.size() && parts[i + 1].starts_with("step_") && parts[i + 1].size() > 5) {
        s.step = std::string(parts[i + 1].substr(5));
      }
      if (!found || !s.step.empty()) found = std::move(s);
      return;
    }
  });
  return found;
}

std::optional<uint32_t> ParseStatusUid(std::string_view status) {
  std::optional<uint32_t> uid;
  ForEachLine(status, [&](std::string_view line) {
    if (uid || !line.starts_with("Uid:")) return;
    const auto fields = SplitFields(line.substr(4));
    if (fields.empty()) return;
    const auto v = ParseUint64(fields[0]);
    if (v && *v <= UINT32_MAX) uid = static_cast<uint32_t>(*v);
  });
  return uid;
}

DrmFdinfo ParseDrmFdinfo(std::string_view fdinfo) {
  DrmFdinfo out;
  std::optional<uint64_t> total_vram;
  ForEachLine(fdinfo, [&](std::string_view line) {
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) return;
    const std::string_view key = Trim(line.substr(0, colon));
    const std::string_view value = Trim(line.substr(colon + 1));
    if (key == "drm-driver") {
      out.driver = std::string(value);
    } else if (key == "drm-pdev") {
      out.pdev = Lower(value);
    } else if (key == "drm-client-id") {
      out.client_id = ParseUint64(value);
    } else if (key == "drm-memory-vram") {
      out.vram_bytes = ParseDrmBytes(value);
    } else if (key == "drm-total-vram") {
      total_vram = ParseDrmBytes(value);
    }
  });
  if (!out.vram_bytes) out.vram_bytes = total_vram;  // kernels that print only the newer key
  return out;
}

ProcessesCollector::ProcessesCollector(const PathResolver& paths, ProcessesOptions options)
    : paths_(paths), options_(options) {}

void ProcessesCollector::NoteUnreadable(const std::string& path, int error) {
  if (said_unreadable_) return;
  said_unreadable_ = true;
  spdlog::info(
      "processes: cannot read {}: {}; the user, job and command of such processes stay absent "
      "(the agent runs as uid {}; run it as root to attribute every process)",
      path, std::strerror(error), ::geteuid());
}

bool ProcessesCollector::ReadProcFile(uint32_t pid, std::string_view file, std::string& out,
                                      bool& gone) {
  const auto path = paths_.Proc(std::to_string(pid) + "/" + std::string(file));
  // One read(2) suffices for these small files (the kernel renders them whole); one that fills
  // the buffer may be longer and is read again to the end.
  int error = TryReadAttributeFile(path, out);
  if (error == 0 && out.size() >= 4096) error = TryReadTextFile(path, out);
  if (error == 0) return true;
  // ENOENT: exited since the device listed it; ESRCH: exiting while we read.
  if (error == ENOENT || error == ESRCH) {
    gone = true;
  } else {
    NoteUnreadable(path.string(), error);
  }
  return false;
}

std::string ProcessesCollector::UserName(uint32_t uid) {
  if (const auto it = users_.find(uid); it != users_.end()) return it->second;
  std::string name = std::to_string(uid);  // a uid without a name is shown as the number
  std::vector<char> buffer(16384);
  passwd pw{};
  passwd* result = nullptr;
  int r = 0;
  while ((r = getpwuid_r(uid, &pw, buffer.data(), buffer.size(), &result)) == ERANGE &&
         buffer.size() < (1U << 20)) {
    buffer.resize(buffer.size() * 2);
  }
  if (r == 0 && result != nullptr && result->pw_name != nullptr && result->pw_name[0] != '\0') {
    name = result->pw_name;
  }
  if (users_.size() >= 4096) users_.clear();  // bounds a node that churns through uids
  users_[uid] = name;
  return name;
}

ProcessesCollector::ProcessInfo ProcessesCollector::ReadProcess(uint32_t pid) {
  ProcessInfo info;
  std::string text;
  if (ReadProcFile(pid, "status", text, info.gone)) {
    if (const auto uid = ParseStatusUid(text)) info.user = UserName(*uid);
  }
  if (info.gone) return info;
  if (ReadProcFile(pid, "comm", text, info.gone)) info.command = std::string(Trim(text));
  if (info.gone) return info;
  if (ReadProcFile(pid, "cgroup", text, info.gone)) info.slurm = ParseSlurmCgroup(text);
  return info;
}

void ProcessesCollector::FindDrmFds() {
  drm_fds_.clear();
  std::error_code ec;
  std::filesystem::directory_iterator procs(paths_.procfs_root(), ec);
  if (ec) return;
  for (const auto& entry : procs) {
    const std::string pid_name = entry.path().filename().string();
    if (!AllDigits(pid_name)) continue;
    const auto pid = ParseUint64(pid_name);
    if (!pid || *pid > UINT32_MAX) continue;
    std::filesystem::directory_iterator fds(entry.path() / "fd", ec);
    if (ec) {
      if (ec != std::errc::no_such_file_or_directory) {
        NoteUnreadable((entry.path() / "fd").string(), ec.value());
      }
      continue;
    }
    for (const auto& fd : fds) {
      const auto link = std::filesystem::read_symlink(fd.path(), ec);
      if (ec || !link.native().starts_with("/dev/dri/")) continue;
      drm_fds_[static_cast<uint32_t>(*pid)].push_back(fd.path().filename().string());
    }
  }
}

ProcessesCollector::AmdgpuClients ProcessesCollector::ScanAmdgpuClients(
    std::chrono::steady_clock::time_point now) {
  // Walking every process's fds is the expensive part (a readlink per fd of every process), so
  // it is done every fd_rescan_after; the fdinfo of the DRM fds found is read every tick.
  if (now >= next_fd_scan_) {
    FindDrmFds();
    next_fd_scan_ = now + options_.fd_rescan_after;
  }
  AmdgpuClients clients;
  std::string fdinfo;
  for (auto it = drm_fds_.begin(); it != drm_fds_.end();) {
    const uint32_t pid = it->first;
    auto& fds = it->second;
    // (pdev, client id): two fds of one open DRM file are one client, counted once.
    std::set<std::pair<std::string, uint64_t>> seen;
    std::erase_if(fds, [&](const std::string& fd) {
      const auto info_path = paths_.Proc(std::to_string(pid) + "/fdinfo/" + fd);
      const int error = TryReadTextFile(info_path, fdinfo);
      if (error != 0) {
        if (error != ENOENT && error != ESRCH) NoteUnreadable(info_path.string(), error);
        return error == ENOENT || error == ESRCH;  // closed, or the process exited
      }
      const DrmFdinfo drm = ParseDrmFdinfo(fdinfo);
      if (drm.driver != "amdgpu" || drm.pdev.empty()) return false;
      // Without a client id (older kernels) every fd counts as its own client.
      if (drm.client_id && !seen.emplace(drm.pdev, *drm.client_id).second) return false;
      auto& used = clients[pid][drm.pdev];
      if (drm.vram_bytes) used = used.value_or(0) + *drm.vram_bytes;
      return false;
    });
    it = fds.empty() ? drm_fds_.erase(it) : std::next(it);
  }
  return clients;
}

void ProcessesCollector::Collect(v1::NodeReport& report) {
  const auto now = std::chrono::steady_clock::now();
  bool any_amdgpu = false;
  for (const v1::DeviceTelemetry& d : report.devices()) {
    any_amdgpu = any_amdgpu || d.identity().vendor() == "amd";
  }
  // Only amdgpu needs the walk of every process's fds; NVML lists its processes itself.
  if (any_amdgpu) {
    const AmdgpuClients clients = ScanAmdgpuClients(now);
    for (v1::DeviceTelemetry& d : *report.mutable_devices()) {
      if (d.identity().vendor() != "amd" || d.identity().pci_bus_id().empty()) continue;
      const std::string pdev = Lower(d.identity().pci_bus_id());
      for (const auto& [pid, by_pdev] : clients) {
        const auto it = by_pdev.find(pdev);
        if (it == by_pdev.end()) continue;
        v1::ProcessMemory& p = *d.add_processes();  // merged with a pushed entry just below
        p.set_pid(pid);
        if (it->second) p.set_used_bytes(*it->second);
      }
    }
  }

  // Each pid on any device, read when it first appears and again after reread_after (spread
  // over that window by pid, so processes that started together are not all read in one tick).
  // A pid already in a holder is left to whoever made it: the sim names its own simulated
  // processes, whose pids mean nothing in this host's /proc.
  ++tick_;
  for (v1::DeviceTelemetry& d : *report.mutable_devices()) {
    MergeByPid(d);
    const std::unordered_set<uint32_t> held = HeldPids(d);
    for (const v1::ProcessMemory& p : d.processes()) {
      if (!held.empty() && held.contains(p.pid())) continue;
      auto [it, added] = known_.try_emplace(p.pid());
      ProcessInfo& info = it->second;
      if (info.tick == tick_) continue;
      info.tick = tick_;
      if (added || now >= info.read_again_at) {
        info = ReadProcess(p.pid());
        info.tick = tick_;
        const auto spread = options_.reread_after.count() > 0
                                ? std::chrono::milliseconds(p.pid() % options_.reread_after.count())
                                : std::chrono::milliseconds(0);
        info.read_again_at = now + options_.reread_after / 2 + spread / 2;
      }
    }
  }
  // Kept for the next tick: processes still on a device (a vanished one is read again).
  std::erase_if(known_, [&](const auto& kv) { return kv.second.tick != tick_ || kv.second.gone; });

  struct Group {
    const ProcessInfo* info;  // the first process's: its Slurm step or user is the group's
    std::vector<v1::ProcessMemory*> processes;
  };
  std::vector<Group> groups;
  for (v1::DeviceTelemetry& d : *report.mutable_devices()) {
    if (d.processes().empty()) continue;
    const std::unordered_set<uint32_t> held = HeldPids(d);

    // One SLURM holder per (job, step), then one PROCESS holder per user; pids ascending.
    groups.clear();
    for (v1::ProcessMemory& p : *d.mutable_processes()) {
      if (!held.empty() && held.contains(p.pid())) continue;
      const auto found = known_.find(p.pid());
      if (found == known_.end()) continue;  // vanished
      const ProcessInfo& info = found->second;
      if (p.user().empty()) p.set_user(info.user);
      if (p.command().empty()) p.set_command(info.command);
      const auto same = [&](const Group& g) {
        return info.slurm ? g.info->slurm == info.slurm
                          : !g.info->slurm && g.info->user == info.user;
      };
      const auto g = std::find_if(groups.begin(), groups.end(), same);
      if (g == groups.end()) {
        groups.push_back({&info, {&p}});
      } else {
        g->processes.push_back(&p);
      }
    }
    std::sort(groups.begin(), groups.end(), [](const Group& a, const Group& b) {
      const auto key = [](const Group& g) {
        static const SlurmStep kNone;
        const SlurmStep& s = g.info->slurm ? *g.info->slurm : kNone;
        return std::tie(s.job, s.step, g.info->user);
      };
      if (a.info->slurm.has_value() != b.info->slurm.has_value()) return a.info->slurm.has_value();
      return key(a) < key(b);
    });
    for (const Group& group : groups) {
      v1::DeviceHolder& h = *d.add_holders();
      const auto& slurm = group.info->slurm;
      h.set_kind(slurm ? v1::HOLDER_KIND_SLURM : v1::HOLDER_KIND_PROCESS);
      if (slurm) {
        h.set_job(slurm->job);
        h.set_step(slurm->step);
      }
      h.set_command(group.processes.front()->command());
      std::optional<uint64_t> memory;
      for (const v1::ProcessMemory* p : group.processes) {
        if (static_cast<size_t>(h.pids_size()) < options_.max_per_device) h.add_pids(p->pid());
        if (p->has_used_bytes()) memory = memory.value_or(0) + p->used_bytes();
        // What the training process pushed, where Slurm does not say.
        if (h.user().empty()) h.set_user(p->user());
        if (h.job().empty()) h.set_job(p->job());
        if (h.rank().empty()) h.set_rank(p->rank());
        if (!h.has_world_size() && p->has_world_size()) h.set_world_size(p->world_size());
      }
      if (memory) h.set_memory_used_bytes(*memory);
    }
    CapProcesses(d, options_.max_per_device);
  }
}

}  // namespace accelmon::collectors
