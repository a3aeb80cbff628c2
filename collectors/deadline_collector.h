// Runs a collector that calls into a vendor library on its own thread, under a deadline, so a
// hung driver call (a GPU falling off the bus can block NVML for minutes) never stalls the other
// collectors or the report.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "collectors/collector.h"

namespace accelmon::collectors {

class DeadlineCollector final : public Collector {
 public:
  DeadlineCollector(std::unique_ptr<Collector> inner, std::chrono::milliseconds deadline);
  ~DeadlineCollector() override;

  std::string_view name() const override { return name_; }

  // Runs the inner collector into a scratch report and merges its devices and events into
  // `report` if it finishes in time. Throws CollectorError when it does not; while a call is
  // still hung, later ticks fail at once instead of queueing behind it.
  void Collect(v1::NodeReport& report) override;

 private:
  struct State;  // shared with the worker thread, which may outlive us while hung
  static void Work(const std::shared_ptr<State>& s);
  const std::string name_;
  const std::chrono::milliseconds deadline_;
  std::shared_ptr<State> state_;
  std::thread thread_;
};

}  // namespace accelmon::collectors
