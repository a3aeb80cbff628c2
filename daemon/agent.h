// The per-node agent: runs the collectors every interval into one NodeReport and hands it to
// the uplink. Collection never waits for the network.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "collectors/registry.h"
#include "daemon/uplink.h"

namespace accelmon {

struct AgentOptions {
  std::string node;
  std::chrono::milliseconds interval{1000};
};

class Agent {
 public:
  Agent(AgentOptions options, collectors::CollectorSet collectors, Uplink& uplink);
  ~Agent();

  void Start();
  void Stop();

  const std::string& instance_id() const { return instance_id_; }

  // Called with each report just before it is handed to the uplink (tests, debugging).
  void set_report_observer(std::function<void(const v1::NodeReport&)> observer) {
    observer_ = std::move(observer);
  }

  // Builds one report now (what each tick does).
  v1::NodeReport CollectOnce();

 private:
  void Run();

  const AgentOptions options_;
  const std::string instance_id_;
  collectors::CollectorSet collectors_;
  Uplink& uplink_;
  std::function<void(const v1::NodeReport&)> observer_;
  uint64_t sequence_ = 0;

  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace accelmon
