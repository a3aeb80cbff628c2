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
#include "daemon/agent/uplink.h"

namespace accelmon {

struct AgentOptions {
  std::string node;
  std::chrono::milliseconds interval{1000};
  // Empty: a new random id. A disk spool passes the id of the run before, and the sequence to
  // continue after, so that re-sent reports stay recognisable across an agent restart.
  std::string instance_id{};
  uint64_t last_sequence = 0;
};

// A random 16 hex digit agent instance id.
std::string NewAgentInstanceId();

class Agent {
 public:
  Agent(AgentOptions options, collectors::CollectorSet collectors, Uplink& uplink);
  ~Agent();

  void Start();
  void Stop();

  const std::string& instance_id() const { return instance_id_; }
  // The last sequence handed out (read it after Stop()).
  uint64_t last_sequence() const { return sequence_; }

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
