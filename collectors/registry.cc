#include "collectors/registry.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <exception>

#include "collectors/meminfo.h"
#include "collectors/sim.h"

namespace accelmon::collectors {

std::vector<std::unique_ptr<Collector>> CreateCollectors(const CollectorConfig& config) {
  std::vector<std::unique_ptr<Collector>> collectors;
  collectors.push_back(std::make_unique<MeminfoCollector>(config.paths));
  if (config.sim_devices > 0) {
    collectors.push_back(std::make_unique<SimCollector>(
        SimOptions{.devices = config.sim_devices, .seed = config.sim_seed}));
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
