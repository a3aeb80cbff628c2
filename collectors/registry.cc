#include "collectors/registry.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <exception>

#include "collectors/amdgpu.h"
#include "collectors/buddyinfo.h"
#include "collectors/dcmi.h"
#include "collectors/deadline_collector.h"
#include "collectors/hwmon.h"
#include "collectors/infiniband.h"
#include "collectors/meminfo.h"
#include "collectors/netdev.h"
#include "collectors/nvml.h"
#include "collectors/pressure.h"
#include "collectors/sim.h"
#include "collectors/thermal_zone.h"
#include "collectors/vmstat.h"

namespace accelmon::collectors {

std::unique_ptr<Collector> CreateHostCollector(std::string_view name, const PathResolver& paths) {
  if (name == "meminfo") return std::make_unique<MeminfoCollector>(paths);
  if (name == "vmstat") return std::make_unique<VmstatCollector>(paths);
  if (name == "pressure") return std::make_unique<PressureCollector>(paths);
  if (name == "buddyinfo") return std::make_unique<BuddyinfoCollector>(paths);
  if (name == "netdev") return std::make_unique<NetdevCollector>(paths);
  if (name == "infiniband") return std::make_unique<InfinibandCollector>(paths);
  if (name == "thermal_zone") return std::make_unique<ThermalZoneCollector>(paths);
  if (name == "hwmon") return std::make_unique<HwmonCollector>(paths);
  return nullptr;
}

std::vector<std::unique_ptr<Collector>> CreateCollectors(const CollectorConfig& config) {
  std::vector<std::unique_ptr<Collector>> collectors;
  for (const std::string_view name : kHostCollectors) {
    collectors.push_back(CreateHostCollector(name, config.paths));
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
  // Last: it attaches pushed processes to the devices every other collector found.
  if (config.push != nullptr) collectors.push_back(std::make_unique<PushCollector>(*config.push));
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
