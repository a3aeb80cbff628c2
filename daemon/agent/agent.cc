#include "daemon/agent/agent.h"

#include <spdlog/spdlog.h>

#include <cstdio>
#include <random>

#include "daemon/common/version.h"
#include "proto/time_format.h"

namespace accelmon {

std::string NewAgentInstanceId() {
  std::random_device rd;
  const uint64_t a = (static_cast<uint64_t>(rd()) << 32) | rd();
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(a));
  return buf;
}

Agent::Agent(AgentOptions options, collectors::CollectorSet collectors, Uplink& uplink)
    : options_(std::move(options)),
      instance_id_(options_.instance_id.empty() ? NewAgentInstanceId() : options_.instance_id),
      collectors_(std::move(collectors)),
      uplink_(uplink),
      sequence_(options_.last_sequence) {}

Agent::~Agent() { Stop(); }

void Agent::Start() {
  spdlog::info("agent: node \"{}\", instance {}, {} collector(s), every {}, first sequence {}",
               options_.node, instance_id_, collectors_.size(),
               FormatPrometheusDuration(options_.interval), sequence_ + 1);
  thread_ = std::thread([this] { Run(); });
}

void Agent::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

v1::NodeReport Agent::CollectOnce() {
  v1::NodeReport report;
  report.set_node(options_.node);
  report.set_agent_instance_id(instance_id_);
  report.set_sequence(++sequence_);
  report.set_agent_version(kVersion);
  *report.mutable_timestamp() = TimestampFromTimePoint(std::chrono::system_clock::now());
  *report.mutable_interval() =
      DurationFromNanos(std::chrono::nanoseconds(options_.interval).count());

  collectors_.CollectAll(report);

  const UplinkStats stats = uplink_.stats();
  report.mutable_agent()->set_dropped_reports_total(stats.dropped);
  report.mutable_agent()->set_spool_reports(stats.pending);
  report.mutable_agent()->set_resent_reports_total(stats.resent);
  return report;
}

void Agent::Run() {
  auto next = std::chrono::steady_clock::now();
  for (;;) {
    v1::NodeReport report = CollectOnce();
    if (observer_) observer_(report);
    uplink_.Submit(std::move(report));

    next += options_.interval;
    const auto now = std::chrono::steady_clock::now();
    if (next < now) {
      // Collection took longer than the interval: skip the missed ticks rather than burst.
      spdlog::warn("agent: collection overran the {} interval; skipping ahead",
                   FormatPrometheusDuration(options_.interval));
      next = now + options_.interval;
    }
    std::unique_lock lock(mu_);
    if (cv_.wait_until(lock, next, [&] { return stopping_; })) return;
  }
}

}  // namespace accelmon
