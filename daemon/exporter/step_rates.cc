#include "daemon/exporter/step_rates.h"

#include <algorithm>

#include "proto/time_format.h"

namespace accelmon {

std::shared_ptr<const std::vector<StepRate>> StepRateTracker::Update(const v1::NodeReport& report) {
  if (report.agent_instance_id() != instance_) {
    instance_ = report.agent_instance_id();
    anchors_.clear();
  }
  const double now = ToSeconds(report.timestamp());
  std::map<std::pair<uint32_t, uint32_t>, Anchor> next;
  std::vector<StepRate> rates;
  for (const v1::DeviceTelemetry& d : report.devices()) {
    for (const v1::ProcessMemory& pm : d.processes()) {
      if (!pm.has_steps_total()) continue;
      const std::pair<uint32_t, uint32_t> key{d.identity().index(), pm.pid()};
      Anchor anchor{pm.steps_total(), now, std::nullopt};
      if (auto it = anchors_.find(key); it != anchors_.end()) {
        const Anchor& old = it->second;
        const double elapsed = now - old.at_seconds;
        if (pm.steps_total() < old.steps || elapsed < 0) {
          // The counter started over (or the clock went back): measure again from here.
        } else if (elapsed >= kMinWindowSeconds) {
          anchor.rate = static_cast<double>(pm.steps_total() - old.steps) / elapsed;
        } else {
          anchor = old;  // keep measuring from the older report
        }
      }
      if (anchor.rate) rates.push_back({key.first, key.second, *anchor.rate});
      next.insert_or_assign(key, anchor);
    }
  }
  anchors_ = std::move(next);
  if (rates.empty()) return nullptr;  // most nodes push no step counter
  std::sort(rates.begin(), rates.end(), [](const StepRate& a, const StepRate& b) {
    return std::pair(a.device_index, a.pid) < std::pair(b.device_index, b.pid);
  });
  return std::make_shared<const std::vector<StepRate>>(std::move(rates));
}

}  // namespace accelmon
