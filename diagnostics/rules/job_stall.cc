// job_stall: the hung collective. Every device of the job that was busy is now idle, its links are
// silent and it still holds its memory, for a while: the ranks wait on each other and nobody makes
// progress. A job that ends frees its memory (or its processes go away); a checkpoint pause is
// shorter than `for`.
//
// Two parts. A device whose holder names its job is judged with the rest of that job across all
// its nodes (the job rule below: one finding for the job, on the node that went idle first). A
// device without one is judged per node (the node rule: every such device of the node, or of one
// job its allocator pushed).
#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "diagnostics/collective_view.h"
#include "diagnostics/rules/format.h"
#include "diagnostics/rules/rule_state.h"
#include "diagnostics/rules/rules.h"

namespace accelmon::diagnostics {
namespace {

// A device's links at one report, as job_stall judges them: how many have a rate and a capacity,
// and whether one of those carries at least `silent_share` of its capacity. Every link's counters
// move on, whatever the device's state (a rate needs the previous report's).
struct LinkTraffic {
  size_t judged = 0;
  bool busy = false;
};

LinkTraffic FollowLinkTraffic(Slots<ByteCounters>& links, const v1::DeviceTelemetry& device,
                              int64_t now, double silent_share) {
  LinkTraffic traffic;
  links.Reserve(static_cast<size_t>(device.links_size()));
  for (int j = 0; j < device.links_size(); ++j) {
    const v1::Link& link = device.links(j);
    const std::optional<double> rate = links.Get(j, link.name()).Update(link, now);
    if (!rate || !link.has_max_bandwidth_bytes_per_second() ||
        link.max_bandwidth_bytes_per_second() <= 0) {
      continue;  // no counters or capacity: not judged
    }
    ++traffic.judged;
    if (*rate >= silent_share * link.max_bandwidth_bytes_per_second()) traffic.busy = true;
  }
  return traffic;
}

class JobStallRule final : public Rule {
 public:
  explicit JobStallRule(const JobStallConfig& config) : config_(config) {}

  // After a restart: idle for for_seconds (after busy, which a fresh rule has not seen).
  double SettleSeconds() const override { return config_.for_seconds; }

  void Observe(const v1::NodeReport& report, RuleContext& context) override {
    const int64_t now = context.now_ns();
    bool by_job = false;
    for (const v1::DeviceTelemetry& device : report.devices()) {
      if (DeviceJob(device).empty() && !JobOf(device).empty()) by_job = true;
    }
    for (auto& [job, group] : groups_) group.Clear();

    for (int i = 0; i < report.devices_size(); ++i) {
      const v1::DeviceTelemetry& device = report.devices(i);
      if (!DeviceJob(device).empty()) continue;  // judged with its job, across nodes
      DeviceState& d = StateOf(i, device);
      const LinkTraffic traffic =
          FollowLinkTraffic(d.links, device, now, config_.silent_link_share);

      const std::string_view job = by_job ? JobOf(device) : std::string_view();
      if (by_job && job.empty()) {
        // Its job's processes went away: that job ended on this device.
        if (d.busy && !d.busy_job.empty()) {
          if (Group* g = FindGroup(d.busy_job)) g->ended = true;
          d.busy = false;
        }
        continue;
      }
      Group& g = GroupOf(job);
      if (!device.utilization().has_compute_ratio()) continue;  // absent: not judged
      g.reporting = true;
      const double compute = device.utilization().compute_ratio();
      const bool has_used = device.memory().has_used_bytes();
      const double used = static_cast<double>(device.memory().used_bytes());
      if (compute >= config_.busy_ratio) {
        d.busy = true;
        d.busy_used_known = has_used;
        d.busy_used = used;
        d.busy_had_processes = device.processes_size() > 0;
        d.busy_job.assign(job);
      }
      if (compute >= config_.idle_ratio) {
        g.active = true;
        continue;
      }
      if (!d.busy) continue;  // never busy (an unused device): not part of the job
      if (d.busy_job != job || (d.busy_had_processes && device.processes_size() == 0)) {
        g.ended = true;  // another job, or its processes went away
        d.busy = false;
        continue;
      }
      if (!has_used || !d.busy_used_known) {
        g.memory_unknown = true;
      } else if (used < config_.memory_kept_share * d.busy_used) {
        g.ended = true;  // memory freed: the job ended
        d.busy = false;
        continue;
      } else {
        g.memory_sum += used;
        ++g.memory_devices;
      }
      ++g.idle_devices;
      g.max_compute = std::max(g.max_compute, compute);
      g.links_busy |= traffic.busy;
      g.links_judged += traffic.judged;
    }

    for (auto it = groups_.begin(); it != groups_.end();) {
      Group& g = it->second;
      if (!g.seen) {
        it = groups_.erase(it);
        continue;
      }
      if (g.active || g.ended || g.links_busy || (g.reporting && g.idle_devices == 0)) {
        g.idle_since_ns.reset();
      } else if (g.idle_devices > 0 && !g.memory_unknown && !g.idle_since_ns) {
        g.idle_since_ns = now;
      }
      // Otherwise unknown (no utilization, memory absent): the state holds.
      if (g.idle_since_ns &&
          static_cast<double>(now - *g.idle_since_ns) / 1e9 >= config_.for_seconds) {
        RaiseFor(it->first, g, by_job, context);
      }
      ++it;
    }
  }

 private:
  struct DeviceState {
    bool busy = false;  // busy since it last ended; the fields below are from its last busy report
    bool busy_used_known = false;
    double busy_used = 0;
    bool busy_had_processes = false;
    std::string busy_job;
    Slots<ByteCounters> links;  // by link name
  };

  // One job's devices on this node (or all devices: job ""), accumulated over one report.
  struct Group {
    bool seen = false;
    bool reporting = false;  // some device reports utilization
    bool active = false;     // some device is not idle
    bool ended = false;
    bool links_busy = false;
    bool memory_unknown = false;
    size_t idle_devices = 0;  // idle after being busy, memory held
    size_t links_judged = 0;
    size_t memory_devices = 0;  // of the idle ones, with memory known
    double memory_sum = 0;
    double max_compute = 0;
    std::optional<int64_t> idle_since_ns;  // kept across reports

    void Clear() {
      seen = reporting = active = ended = links_busy = memory_unknown = false;
      idle_devices = links_judged = memory_devices = 0;
      memory_sum = max_compute = 0;
    }
  };

  static std::string_view JobOf(const v1::DeviceTelemetry& device) {
    for (const v1::ProcessMemory& p : device.processes()) {
      if (!p.job().empty()) return p.job();
    }
    return {};
  }

  DeviceState& StateOf(int position, const v1::DeviceTelemetry& device) {
    return devices_.Get(position, DeviceKeyView(device, device_key_));
  }

  Group* FindGroup(std::string_view job) {
    auto it = groups_.find(job);
    return it == groups_.end() ? nullptr : &it->second;
  }

  Group& GroupOf(std::string_view job) {
    auto it = groups_.find(job);
    if (it == groups_.end()) it = groups_.try_emplace(std::string(job)).first;
    it->second.seen = true;
    return it->second;
  }

  void RaiseFor(const std::string& job, const Group& g, bool by_job, RuleContext& context) {
    const double idle_for = static_cast<double>(context.now_ns() - *g.idle_since_ns) / 1e9;
    const double memory_avg =
        g.memory_devices == 0 ? 0 : g.memory_sum / static_cast<double>(g.memory_devices);
    Raised raised;
    raised.severity = kCritical;
    raised.plot = "compute_ratio";
    raised.start_ns = g.idle_since_ns;
    raised.window_start_ns = g.idle_since_ns;
    raised.summary =
        (by_job ? "job " + job + ": all " : std::string("all ")) + std::to_string(g.idle_devices) +
        " devices idle for " + FormatDuration(std::chrono::duration<double>(idle_for)) +
        " with memory held (" + WholeGibText(memory_avg) + " avg), " +
        (g.links_judged > 0 ? "links silent" : "link traffic unknown") + " — hung collective?";
    if (by_job) raised.evidence.push_back(TextEvidence("job", job));
    raised.evidence.push_back(
        NumberEvidence("idle_devices", static_cast<double>(g.idle_devices), "count"));
    raised.evidence.push_back(NumberEvidence("idle_for", idle_for, "seconds"));
    raised.evidence.push_back(NumberEvidence("compute_ratio_max", g.max_compute, "ratio"));
    raised.evidence.push_back(NumberEvidence("memory_used_avg", memory_avg, "bytes"));
    raised.evidence.push_back(
        NumberEvidence("links_silent", static_cast<double>(g.links_judged), "count"));
    context.Raise(Subject{}, std::move(raised));
  }

  const JobStallConfig& config_;  // the engine's: a reload changes it
  Slots<DeviceState> devices_;    // by DeviceKey
  std::map<std::string, Group, std::less<>> groups_;
  std::string device_key_;  // scratch
};

// The job rule: every device of the job, on every node it runs on, idle after being busy with
// its links silent and its memory held. One finding per episode: the job's teardown after it
// (memory freed and processes gone node by node) is not a new stall.
class JobStallAcrossNodesRule final : public JobRule {
 public:
  explicit JobStallAcrossNodesRule(const JobStallConfig& config) : config_(config) {}

  // After a restart: idle for for_seconds on every node.
  double SettleSeconds() const override { return config_.for_seconds; }

  void Observe(const JobSlice& slice, JobRuleContext& context) override {
    if (NodeDevices* devices = JobNodeState(nodes_, slice)) Update(*devices, slice);
    collectives_.Update(slice.node, slice.devices.empty() ? kNone : slice.communicators,
                        slice.now_ns);
    // The node's report interval; a report without one (a JSON-lines file) by its spacing.
    interval_ns_ = slice.interval_ns;
    if (interval_ns_ <= 0) {
      auto [last, fresh] = last_report_ns_.try_emplace(std::string(slice.node), slice.now_ns);
      interval_ns_ = fresh ? 0 : slice.now_ns - last->second;
      last->second = slice.now_ns;
    }
    Judge(slice, context);
  }

 private:
  enum class Status {
    kUnjudged,  // never busy in this job (or no utilization): not part of the verdict
    kActive,    // computing, or its links move data
    kIdle,      // idle after being busy, memory held, links silent
    kEnded,     // memory freed or processes gone: the job ended here
    kUnknown,   // idle, but its memory is not reported: no verdict
  };

  struct DeviceState {
    bool busy = false;
    bool busy_used_known = false;
    double busy_used = 0;
    bool busy_had_processes = false;
    Slots<ByteCounters> links;
    Status status = Status::kUnjudged;
    std::optional<int64_t> idle_since_ns;
    double compute = 0;
    double used = 0;
    size_t links_judged = 0;
  };

  using NodeDevices = std::map<std::string, DeviceState, std::less<>>;  // by DeviceKey

  void Update(NodeDevices& devices, const JobSlice& slice) {
    // Devices that left the job leave its state.
    UpdateDeviceStates(devices, slice.devices, key_scratch_,
                       [&](DeviceState& d, const v1::DeviceTelemetry& device) {
                         UpdateDevice(d, device, slice.now_ns);
                       });
  }

  void UpdateDevice(DeviceState& d, const v1::DeviceTelemetry& device, int64_t now) {
    const LinkTraffic traffic = FollowLinkTraffic(d.links, device, now, config_.silent_link_share);
    d.links_judged = traffic.judged;
    const auto set = [&](Status status) {
      d.status = status;
      if (status != Status::kIdle && status != Status::kUnknown) d.idle_since_ns.reset();
    };
    if (!device.utilization().has_compute_ratio()) return set(Status::kUnjudged);
    d.compute = device.utilization().compute_ratio();
    const bool has_used = device.memory().has_used_bytes();
    d.used = static_cast<double>(device.memory().used_bytes());
    if (d.compute >= config_.busy_ratio) {
      d.busy = true;
      d.busy_used_known = has_used;
      d.busy_used = d.used;
      d.busy_had_processes = device.processes_size() > 0;
    }
    if (d.compute >= config_.idle_ratio || traffic.busy) return set(Status::kActive);
    if (!d.busy) return set(Status::kUnjudged);
    if ((d.busy_had_processes && device.processes_size() == 0) ||
        (has_used && d.busy_used_known && d.used < config_.memory_kept_share * d.busy_used)) {
      d.busy = false;
      return set(Status::kEnded);
    }
    if (!has_used || !d.busy_used_known) return set(Status::kUnknown);
    set(Status::kIdle);
    if (!d.idle_since_ns) d.idle_since_ns = now;
  }

  void Judge(const JobSlice& slice, JobRuleContext& context) {
    if (nodes_.empty()) {
      stalled_ = false;  // the job is gone: so is its stall (the engine ends it)
      return;
    }
    // NCCL RAS, where the nodes report it: no rank launched a collective for a few intervals
    // while one lags or does not answer. It knows without waiting for the devices to idle (a
    // waiting rank's NCCL kernel may spin at full utilization), and it names the rank.
    const int64_t for_ns = static_cast<int64_t>(config_.collective_intervals) * interval_ns_;
    std::optional<CollectiveVerdict> stopped;
    if (for_ns > 0 && config_.collective_intervals > 0) {
      stopped = collectives_.Stopped(slice.now_ns, for_ns);
    }
    if (stalled_ && by_collectives_) {
      // Over once a collective is launched again; a job torn down (its communicators gone)
      // goes on as a device stall, ending when the job is gone or a device works again.
      if (collectives_.ProgressedAfter(stall_since_ns_)) {
        stalled_ = false;
        return;
      }
      if (stopped) return RaiseCollective(slice, *stopped, context);
      by_collectives_ = false;
    }
    if (stalled_) return GoOn(slice, context);
    if (stopped) {
      stalled_ = by_collectives_ = true;
      stall_node_ = stopped->node;
      stall_since_ns_ = stopped->since_ns;
      return RaiseCollective(slice, *stopped, context);
    }
    int64_t since = 0;  // when the last device went idle: the whole job is idle since then
    std::optional<int64_t> first_idle;
    std::string_view first_node;
    size_t idle = 0, links_judged = 0;
    double memory_sum = 0, max_compute = 0;
    std::string node_names;
    for (const auto& [node, devices] : nodes_) {
      size_t idle_here = 0;
      for (const auto& [key, d] : devices) {
        if (d.status == Status::kUnjudged) continue;
        if (d.status != Status::kIdle) return;  // active, ended or unknown: not a job-wide stall
        ++idle_here;
        since = std::max(since, *d.idle_since_ns);
        if (!first_idle || *d.idle_since_ns < *first_idle) {
          first_idle = d.idle_since_ns;
          first_node = node;
        }
        memory_sum += d.used;
        max_compute = std::max(max_compute, d.compute);
        links_judged += d.links_judged;
      }
      if (idle_here == 0) return;  // a node of the job with no idle device: not all of it hangs
      idle += idle_here;
      node_names += (node_names.empty() ? "" : ", ") + node;
    }
    const double idle_for = static_cast<double>(slice.now_ns - since) / 1e9;
    if (idle_for < config_.for_seconds) return;
    const double memory_avg = memory_sum / static_cast<double>(idle);
    Raised raised;
    raised.severity = kCritical;
    raised.plot = "compute_ratio";
    raised.start_ns = since;
    raised.window_start_ns = since;
    raised.summary = "job " + std::string(slice.job) + ": all " + std::to_string(idle) +
                     " devices on " + std::to_string(nodes_.size()) + " node" +
                     (nodes_.size() == 1 ? "" : "s") + " idle for " +
                     FormatDuration(std::chrono::duration<double>(idle_for)) +
                     " with memory held (" + WholeGibText(memory_avg) + " avg), " +
                     (links_judged > 0 ? "links silent" : "link traffic unknown") + "; " +
                     std::string(first_node) + " went idle first — hung collective?";
    // What NCCL says it waits for, where the nodes report it.
    const std::optional<CollectiveVerdict> lagging = collectives_.Lagging();
    if (lagging) raised.summary += " NCCL: " + lagging->Describe();
    raised.evidence.push_back(TextEvidence("job", slice.job));
    if (lagging) AddCollectiveEvidence(*lagging, raised);
    raised.evidence.push_back(TextEvidence("nodes", node_names));
    raised.evidence.push_back(TextEvidence("first_idle_node", first_node));
    raised.evidence.push_back(NumberEvidence("idle_devices", static_cast<double>(idle), "count"));
    raised.evidence.push_back(NumberEvidence("idle_for", idle_for, "seconds"));
    raised.evidence.push_back(NumberEvidence("compute_ratio_max", max_compute, "ratio"));
    raised.evidence.push_back(NumberEvidence("memory_used_avg", memory_avg, "bytes"));
    raised.evidence.push_back(
        NumberEvidence("links_silent", static_cast<double>(links_judged), "count"));
    stalled_ = true;
    // Where to look: the rank NCCL shows the others waiting for, else the node idle first.
    stall_node_.assign(lagging ? std::string_view(lagging->node) : first_node);
    stall_since_ns_ = since;
    stall_summary_ = raised.summary;
    context.Raise(stall_node_, Subject{}, std::move(raised));
  }

  // The stall NCCL RAS shows: the rank(s) the others wait for, and where they all stopped.
  void RaiseCollective(const JobSlice& slice, const CollectiveVerdict& v, JobRuleContext& context) {
    Raised raised;
    raised.severity = kCritical;
    raised.plot = "compute_ratio";
    raised.start_ns = stall_since_ns_;
    raised.window_start_ns = stall_since_ns_;
    const double stopped_for = static_cast<double>(slice.now_ns - stall_since_ns_) / 1e9;
    raised.summary = "job " + std::string(slice.job) + ": no collective launched for " +
                     FormatDuration(std::chrono::duration<double>(stopped_for)) + ": " +
                     v.Describe() + " — the job waits for it (NCCL RAS)";
    stall_summary_ = raised.summary;
    raised.evidence.push_back(TextEvidence("job", slice.job));
    AddCollectiveEvidence(v, raised);
    raised.evidence.push_back(NumberEvidence("stopped_for", stopped_for, "seconds"));
    context.Raise(stall_node_, Subject{}, std::move(raised));
  }

  static void AddCollectiveEvidence(const CollectiveVerdict& v, Raised& raised) {
    const WaitedRank& w = v.waited.front();
    std::string where = "rank " + std::to_string(w.rank);
    if (!w.node.empty()) where += " on " + w.node;
    if (!w.host.empty() && w.node.empty()) where += " (host " + w.host + ")";
    if (w.device) where += " device " + std::to_string(*w.device);
    raised.evidence.push_back(TextEvidence("waiting_for", where));
    raised.evidence.push_back(TextEvidence("communicator", v.communicator));
    raised.evidence.push_back(NumberEvidence("waited_rank", w.rank, "rank"));
    if (w.collectives) {
      raised.evidence.push_back(
          NumberEvidence("waited_rank_collectives", static_cast<double>(*w.collectives), "count"));
    }
    raised.evidence.push_back(
        NumberEvidence("others_collectives", static_cast<double>(v.others_at), "count"));
    raised.evidence.push_back(
        NumberEvidence("waited_ranks", static_cast<double>(v.waited.size()), "count"));
    raised.evidence.push_back(NumberEvidence("communicator_ranks", v.size, "count"));
  }

  // The stall goes on, one finding for the episode, while the job is torn down after it (its
  // devices freeing their memory, their processes gone, nodes leaving the job in turn): it ends
  // when a device of the job works again, or when the job is gone.
  void GoOn(const JobSlice& slice, JobRuleContext& context) {
    size_t idle = 0, ended = 0;
    for (const auto& [node, devices] : nodes_) {
      for (const auto& [key, d] : devices) {
        if (d.status == Status::kActive) {
          stalled_ = false;
          return;
        }
        if (d.status == Status::kIdle) ++idle;
        if (d.status == Status::kEnded) ++ended;
      }
    }
    Raised raised;
    raised.severity = kCritical;
    raised.plot = "compute_ratio";
    raised.start_ns = stall_since_ns_;
    raised.window_start_ns = stall_since_ns_;
    raised.summary = stall_summary_;
    raised.evidence.push_back(TextEvidence("job", slice.job));
    raised.evidence.push_back(NumberEvidence("idle_devices", static_cast<double>(idle), "count"));
    raised.evidence.push_back(NumberEvidence("ended_devices", static_cast<double>(ended), "count"));
    raised.evidence.push_back(
        NumberEvidence("nodes_left", static_cast<double>(nodes_.size()), "count"));
    context.Raise(stall_node_, Subject{}, std::move(raised));
  }

  const JobStallConfig& config_;                           // the engine's: a reload changes it
  std::map<std::string, NodeDevices, std::less<>> nodes_;  // the job's nodes, by name
  std::string key_scratch_;
  // The stall raised and not ended yet: on which node it opened, since when, what it said.
  bool stalled_ = false;
  bool by_collectives_ = false;  // opened on NCCL RAS's word, not the devices'
  CollectiveView collectives_;
  int64_t interval_ns_ = 0;
  std::map<std::string, int64_t, std::less<>> last_report_ns_;  // by node, for reports without
                                                                // an interval
  static inline const std::vector<const v1::Communicator*> kNone{};
  std::string stall_node_;
  int64_t stall_since_ns_ = 0;
  std::string stall_summary_;
};

}  // namespace

std::unique_ptr<Rule> MakeJobStallRule(const Config& config) {
  return std::make_unique<JobStallRule>(config.job_stall);
}

std::unique_ptr<JobRule> MakeJobStallJobRule(const Config& config) {
  return std::make_unique<JobStallAcrossNodesRule>(config.job_stall);
}

}  // namespace accelmon::diagnostics
