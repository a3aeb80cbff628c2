#include "collectors/push.h"

#include <algorithm>
#include <filesystem>
#include <limits>
#include <system_error>

namespace accelmon::collectors {
namespace {

uint64_t SaturatingAdd(uint64_t a, uint64_t b) {
  return a > std::numeric_limits<uint64_t>::max() - b ? std::numeric_limits<uint64_t>::max()
                                                      : a + b;
}

v1::ProcessMemory ToProcessMemory(const v1::AllocatorStats& s) {
  v1::ProcessMemory p;
  p.set_pid(s.pid());
  p.set_job(s.job());
  p.set_rank(s.rank());
  if (s.has_reserved_bytes()) p.set_reserved_bytes(s.reserved_bytes());
  if (s.has_allocated_bytes()) p.set_allocated_bytes(s.allocated_bytes());
  if (s.has_active_bytes()) p.set_active_bytes(s.active_bytes());
  if (s.has_inactive_split_bytes()) p.set_inactive_split_bytes(s.inactive_split_bytes());
  if (s.has_largest_free_block_bytes())
    p.set_largest_free_block_bytes(s.largest_free_block_bytes());
  if (s.has_segments()) p.set_segments(s.segments());
  if (s.has_alloc_retries_total()) p.set_alloc_retries_total(s.alloc_retries_total());
  if (s.has_ooms_total()) p.set_ooms_total(s.ooms_total());
  if (s.has_steps_total()) p.set_steps_total(s.steps_total());
  // A world of no processes is no world size at all: absent, never 0.
  if (s.has_world_size() && s.world_size() > 0) p.set_world_size(s.world_size());
  return p;
}

}  // namespace

void MergeProcess(v1::DeviceTelemetry& device, v1::ProcessMemory pushed) {
  for (v1::ProcessMemory& p : *device.mutable_processes()) {
    if (p.pid() != pushed.pid()) continue;
    // Only what the push sets: the driver's used_bytes (and user, command) stay.
    p.MergeFrom(pushed);
    return;
  }
  *device.add_processes() = std::move(pushed);
}

void DeriveFragmentation(v1::DeviceTelemetry& device) {
  if (device.processes().empty()) return;
  auto& m = *device.mutable_memory();
  // A device collector that does not report free memory: only the processes' caches count.
  const uint64_t device_free = m.free_bytes();
  uint64_t largest = device_free;
  uint64_t free_total = device_free;
  for (const v1::ProcessMemory& p : device.processes()) {
    largest = std::max(largest, p.largest_free_block_bytes());
    if (p.has_reserved_bytes() && p.has_allocated_bytes() &&
        p.reserved_bytes() >= p.allocated_bytes()) {
      free_total = SaturatingAdd(free_total, p.reserved_bytes() - p.allocated_bytes());
    }
  }
  // Nothing free at all: nothing is fragmented either.
  const double ratio =
      free_total == 0 ? 0 : 1 - static_cast<double>(largest) / static_cast<double>(free_total);
  m.set_largest_free_block_bytes(largest);
  m.set_fragmentation_ratio(std::clamp(ratio, 0.0, 1.0));
}

PushStore::PushStore(PushStoreOptions options) : options_(std::move(options)) {
  for (const char* reason : kPushRejectReasons) rejected_[reason] = 0;
}

std::string PushStore::DeviceKey(const std::string& uuid, uint32_t index) {
  return uuid.empty() ? "#" + std::to_string(index) : uuid;
}

void PushStore::SetKnownDevices(const v1::NodeReport& report) {
  std::vector<KnownDevice> known;
  known.reserve(static_cast<size_t>(report.devices_size()));
  for (const v1::DeviceTelemetry& d : report.devices()) {
    known.push_back({d.identity().uuid(), d.identity().index()});
  }
  std::lock_guard lock(mu_);
  known_ = std::move(known);
}

std::string PushStore::Accept(const v1::AllocatorStats& stats, SteadyClock::time_point now) {
  std::lock_guard lock(mu_);
  std::string reason = AcceptLocked(stats, now);
  if (!reason.empty()) ++rejected_[reason];
  return reason;
}

std::string PushStore::AcceptLocked(const v1::AllocatorStats& s, SteadyClock::time_point now) {
  if (s.pid() == 0) return "missing_pid";
  if (s.device_uuid().empty() && !s.has_device_index()) return "missing_device";
  if (s.job().size() > options_.max_label_bytes || s.rank().size() > options_.max_label_bytes) {
    return "label_too_long";
  }
  // The uuid when given, else the index; the key is the device's own (its uuid when it has one).
  const KnownDevice* device = nullptr;
  for (const KnownDevice& k : known_) {
    if (s.device_uuid().empty() ? k.index == s.device_index() : k.uuid == s.device_uuid()) {
      device = &k;
      break;
    }
  }
  if (device == nullptr) return "unknown_device";
  if (s.has_reserved_bytes() && s.has_allocated_bytes() &&
      s.allocated_bytes() > s.reserved_bytes()) {
    return "allocated_exceeds_reserved";
  }
  if (s.has_reserved_bytes() && s.has_largest_free_block_bytes() &&
      s.largest_free_block_bytes() > s.reserved_bytes()) {
    return "largest_free_block_exceeds_reserved";
  }

  auto& processes = devices_[DeviceKey(device->uuid, device->index)];
  if (!processes.contains(s.pid())) {
    // Stale entries must not keep a new process out.
    std::erase_if(processes,
                  [&](const auto& kv) { return now - kv.second.received > options_.expire_after; });
    if (processes.size() >= options_.max_processes_per_device) return "too_many_processes";
  }
  processes[s.pid()] = Entry{ToProcessMemory(s), now};
  return {};
}

void PushStore::ExpireLocked(SteadyClock::time_point now) {
  for (auto it = devices_.begin(); it != devices_.end();) {
    std::erase_if(it->second,
                  [&](const auto& kv) { return now - kv.second.received > options_.expire_after; });
    it = it->second.empty() ? devices_.erase(it) : std::next(it);
  }
}

std::map<std::string, std::vector<v1::ProcessMemory>> PushStore::Collect(
    SteadyClock::time_point now) {
  std::vector<uint32_t> pids;
  {
    std::lock_guard lock(mu_);
    ExpireLocked(now);
    for (const auto& [key, processes] : devices_) {
      for (const auto& [pid, entry] : processes) pids.push_back(pid);
    }
  }
  // Looked up without the lock: a slow procfs must not hold up pushes.
  std::sort(pids.begin(), pids.end());
  pids.erase(std::unique(pids.begin(), pids.end()), pids.end());
  std::vector<uint32_t> gone;
  for (const uint32_t pid : pids) {
    std::error_code ec;
    const bool exists =
        std::filesystem::exists(std::filesystem::path(options_.procfs) / std::to_string(pid), ec);
    if (!exists && !ec) gone.push_back(pid);
  }

  std::map<std::string, std::vector<v1::ProcessMemory>> out;
  std::lock_guard lock(mu_);
  for (auto it = devices_.begin(); it != devices_.end();) {
    for (const uint32_t pid : gone) it->second.erase(pid);
    if (it->second.empty()) {
      it = devices_.erase(it);
      continue;
    }
    auto& list = out[it->first];
    for (const auto& [pid, entry] : it->second) list.push_back(entry.process);  // pid order
    ++it;
  }
  return out;
}

std::map<std::string, uint64_t> PushStore::rejected() const {
  std::lock_guard lock(mu_);
  return rejected_;
}

void PushCollector::Collect(v1::NodeReport& report) {
  store_.SetKnownDevices(report);
  auto pushed = store_.Collect(PushStore::SteadyClock::now());
  for (v1::DeviceTelemetry& d : *report.mutable_devices()) {
    const auto it = pushed.find(PushStore::DeviceKey(d.identity().uuid(), d.identity().index()));
    if (it == pushed.end()) continue;  // nothing pushed: keep what the device collector set
    for (v1::ProcessMemory& p : it->second) MergeProcess(d, std::move(p));
    DeriveFragmentation(d);
    pushed.erase(it);  // a second device with the same key (duplicate index) gets nothing
  }
  auto& rejected = *report.mutable_agent()->mutable_push_rejected_total();
  for (const auto& [reason, count] : store_.rejected()) rejected[reason] = count;
}

}  // namespace accelmon::collectors
