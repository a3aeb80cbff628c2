#include "collectors/registry.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <stdexcept>

#include "collectors/amdgpu.h"
#include "collectors/buddyinfo.h"
#include "collectors/dcmi.h"
#include "collectors/deadline_collector.h"
#include "collectors/hwmon.h"
#include "collectors/infiniband.h"
#include "collectors/kubelet.h"
#include "collectors/meminfo.h"
#include "collectors/nccl_ras.h"
#include "collectors/netdev.h"
#include "collectors/nvml.h"
#include "collectors/pressure.h"
#include "collectors/sim.h"
#include "collectors/thermal_zone.h"
#include "collectors/vmstat.h"

namespace accelmon::collectors {

namespace {

template <typename T>
std::unique_ptr<Collector> Make(const PathResolver& paths) {
  return std::make_unique<T>(paths);
}

constexpr HostCollectorInfo kHostCollectors[] = {
    {"meminfo", "Memory use from /proc/meminfo", true, Make<MeminfoCollector>},
    {"vmstat", "VM counters and OOM kills from /proc/vmstat", true, Make<VmstatCollector>},
    {"pressure", "Memory pressure stall information from /proc/pressure/memory", true,
     Make<PressureCollector>},
    {"buddyinfo", "Free memory blocks per NUMA node, zone and order from /proc/buddyinfo", true,
     Make<BuddyinfoCollector>},
    {"netdev", "Network interfaces from /proc/net/dev and /sys/class/net", true,
     Make<NetdevCollector>},
    {"infiniband", "InfiniBand and RoCE ports from /sys/class/infiniband", true,
     Make<InfinibandCollector>},
    {"thermal_zone", "Temperatures of the kernel's thermal zones from /sys/class/thermal", true,
     Make<ThermalZoneCollector>},
    {"hwmon", "Temperature and power sensors of hwmon chips from /sys/class/hwmon", true,
     Make<HwmonCollector>},
};

const HostCollectorInfo* FindHostCollector(std::string_view name) {
  const auto it = std::find_if(std::begin(kHostCollectors), std::end(kHostCollectors),
                               [&](const HostCollectorInfo& c) { return c.name == name; });
  return it == std::end(kHostCollectors) ? nullptr : &*it;
}

}  // namespace

std::span<const HostCollectorInfo> HostCollectors() { return kHostCollectors; }

std::unique_ptr<Collector> CreateHostCollector(std::string_view name, const PathResolver& paths) {
  const HostCollectorInfo* info = FindHostCollector(name);
  return info == nullptr ? nullptr : info->create(paths);
}

bool HostCollectorEnabled(const CollectorConfig& config, std::string_view name) {
  const HostCollectorInfo* info = FindHostCollector(name);
  if (info == nullptr) throw std::invalid_argument("no host collector " + std::string(name));
  const auto it = config.host_collectors.find(name);
  return it == config.host_collectors.end() ? info->default_enabled : it->second;
}

std::vector<std::unique_ptr<Collector>> CreateCollectors(const CollectorConfig& config) {
  for (const auto& entry : config.host_collectors) {
    if (FindHostCollector(entry.first) == nullptr) {
      throw std::invalid_argument("no host collector " + entry.first);
    }
  }
  std::vector<std::unique_ptr<Collector>> collectors;
  for (const HostCollectorInfo& info : kHostCollectors) {
    if (HostCollectorEnabled(config, info.name)) collectors.push_back(info.create(config.paths));
  }
  if (config.devices) {
    // Each vendor's collector turns itself off when its library or sysfs tree is absent; say so
    // once, at info level, so "why are there no GPUs?" has an answer in the log.
    auto add_device = [&](std::string_view vendor, std::unique_ptr<Collector> collector,
                          const std::string& why_not) {
      if (!collector) {
        spdlog::info("{} collection off: {}", vendor, why_not);
        return;
      }
      spdlog::info("{} collection on ({})", vendor, collector->name());
      collectors.push_back(
          std::make_unique<DeadlineCollector>(std::move(collector), config.device_timeout));
    };
    std::string why_not;
    auto nvml = CreateNvmlCollector(config.nvml_library, &why_not);
    add_device("NVIDIA", std::move(nvml), why_not);
    auto amdgpu = CreateAmdgpuCollector(config.paths, &why_not);
    add_device("AMD", std::move(amdgpu), why_not);
    auto dcmi = CreateDcmiCollector(config.dcmi_library, &why_not);
    add_device("Ascend", std::move(dcmi), why_not);
  }
  if (config.sim_devices > 0) {
    collectors.push_back(std::make_unique<SimCollector>(SimOptions{.devices = config.sim_devices,
                                                                   .seed = config.sim_seed,
                                                                   .scenario = config.sim_scenario,
                                                                   .node = config.node}));
  }
  // Then: it attaches pushed processes to the devices every other collector found.
  if (config.push != nullptr) collectors.push_back(std::make_unique<PushCollector>(*config.push));
  // After push: it groups every process a device collector listed or a training process pushed.
  if (config.processes && (config.devices || config.sim_devices > 0)) {
    collectors.push_back(
        std::make_unique<ProcessesCollector>(config.paths, config.processes_options));
  }
  // NCCL's view of the collectives on a node with devices (a simulated node's sim reports its
  // own), asked on its own thread: it never holds up the tick.
  if (config.devices && !config.nccl_ras_addresses.empty()) {
    collectors.push_back(
        std::make_unique<NcclRasCollector>(NcclRasOptions{.addresses = config.nccl_ras_addresses,
                                                          .timeout = config.nccl_ras_timeout,
                                                          .period = config.interval}));
  }
  // After every source of processes and holders: a pod's holder takes in its device's processes.
  if (!config.kubelet_socket.empty()) {
    collectors.push_back(std::make_unique<KubeletCollector>(KubeletOptions{
        .socket = config.kubelet_socket,
        .timeout = config.kubelet_timeout,
        .cdi_spec_dirs = {config.kubelet_cdi_spec_dirs.begin(), config.kubelet_cdi_spec_dirs.end()},
        .pod_logs_dir = config.kubelet_pod_logs_dir,
        .paths = config.paths}));
  }
  return collectors;
}

CollectorSet::CollectorSet(std::vector<std::unique_ptr<Collector>> collectors)
    : collectors_(std::move(collectors)), failing_(collectors_.size(), false) {}

void CollectorSet::CollectAll(v1::NodeReport& report) {
  for (size_t i = 0; i < collectors_.size(); ++i) {
    Collector& collector = *collectors_[i];
    auto& status = *report.add_collectors();
    status.set_name(std::string(collector.name()));
    const auto start = std::chrono::steady_clock::now();
    try {
      collector.Collect(report);
      status.set_success(true);
      if (failing_[i]) spdlog::info("collector {}: data again", collector.name());
      failing_[i] = false;
    } catch (const SourceAbsent& e) {
      // Nothing to collect on this node (no InfiniBand, no hwmon): not a failure.
      status.set_success(true);
      status.set_error(e.what());
      if (!failing_[i])
        spdlog::debug("collector {}: no such source here: {}", collector.name(), e.what());
      failing_[i] = false;
    } catch (const std::exception& e) {
      status.set_success(false);
      status.set_error(e.what());
      spdlog::log(failing_[i] ? spdlog::level::debug : spdlog::level::info,
                  "collector {}: no data: {}", collector.name(), e.what());
      failing_[i] = true;
    }
    status.set_duration_seconds(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
}

}  // namespace accelmon::collectors
