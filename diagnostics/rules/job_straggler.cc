// job_straggler: one rank of a job much slower than the rest. In a synchronous job the slowest rank
// sets everyone's pace, so a device (or a whole node) that computes, communicates or steps at a
// fraction of the job's median for a sustained time is worth a look: a throttled or degraded
// device, a noisy neighbour, a slow link. A job rule: it compares the ranks of one job across all
// its nodes.
//
// The measure is the pushed step rate when every rank reports one, else the compute ratio, else
// the link traffic (transmit + receive of all its links). A job that is idle or hung (its median
// compute ratio under `min_busy_ratio`) has no straggler: that is job_stall's business.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "diagnostics/rules/rule_state.h"
#include "diagnostics/rules/rules.h"

namespace accelmon::diagnostics {
namespace {

enum class Measure { kSteps, kCompute, kLinks };

std::string_view MeasureName(Measure m) {
  switch (m) {
    case Measure::kSteps:
      return "step_rate";
    case Measure::kCompute:
      return "compute_ratio";
    case Measure::kLinks:
      return "link_bytes_per_second";
  }
  return "";
}

std::string_view MeasureUnit(Measure m) {
  switch (m) {
    case Measure::kSteps:
      return "steps_per_second";
    case Measure::kCompute:
      return "ratio";
    case Measure::kLinks:
      return "bytes_per_second";
  }
  return "";
}

// The median, in linear time (a job's ranks are judged at every report of each of its nodes).
double Median(std::vector<double>& values) {
  const size_t n = values.size();
  const auto mid = values.begin() + static_cast<std::ptrdiff_t>(n / 2);
  std::nth_element(values.begin(), mid, values.end());
  if (n % 2 == 1) return *mid;
  return (*std::max_element(values.begin(), mid) + *mid) / 2;
}

class JobStragglerRule final : public JobRule {
 public:
  explicit JobStragglerRule(const JobStragglerConfig& config) : config_(config) {}

  // After a restart: slow for for_seconds.
  double SettleSeconds() const override { return config_.for_seconds; }

  void Observe(const JobSlice& slice, JobRuleContext& context) override {
    if (NodeRanks* node = JobNodeState(nodes_, slice)) Update(*node, slice);
    Judge(slice);
    RaiseSlow(slice, context);
  }

 private:
  struct RankState {
    std::string device;  // index, as the `device` label
    std::string uuid;
    std::string rank;  // as the holder says; empty when unknown
    std::optional<double> compute;
    std::optional<double> link_rate;
    std::optional<double> step_rate;
    Slots<ByteCounters> links;
    std::optional<std::pair<uint64_t, int64_t>> steps;  // previous steps_total and its time
    std::optional<int64_t> slow_since_ns;
    double value = 0;   // at the last verdict
    double median = 0;  // of the job, at the last verdict
  };
  using Ranks = std::map<std::string, RankState, std::less<>>;  // by DeviceKey
  struct NodeRanks {
    Ranks ranks;
    // The node as one rank: the mean of its devices against the median of the nodes' means.
    std::optional<int64_t> slow_since_ns;
    double value = 0;
    double median = 0;
  };

  void Update(NodeRanks& node, const JobSlice& slice) {
    UpdateDeviceStates(node.ranks, slice.devices, key_scratch_,
                       [&](RankState& r, const v1::DeviceTelemetry& device) {
                         UpdateRank(r, device, slice.now_ns);
                       });
  }

  static void UpdateRank(RankState& r, const v1::DeviceTelemetry& device, int64_t now) {
    r.device = std::to_string(device.identity().index());
    r.uuid = device.identity().uuid();
    r.rank.clear();
    for (const v1::DeviceHolder& h : device.holders()) {
      if (!h.job().empty()) {
        r.rank = h.rank();
        break;
      }
    }
    r.compute.reset();
    if (device.utilization().has_compute_ratio()) r.compute = device.utilization().compute_ratio();
    r.link_rate.reset();
    r.links.Reserve(static_cast<size_t>(device.links_size()));
    for (int j = 0; j < device.links_size(); ++j) {
      const v1::Link& link = device.links(j);
      if (const auto rate = r.links.Get(j, link.name()).Update(link, now)) {
        r.link_rate = r.link_rate.value_or(0) + *rate;
      }
    }
    // Steps: the sum of what the device's processes pushed; a counter that went down (a
    // restarted process) skips one interval.
    std::optional<uint64_t> steps;
    for (const v1::ProcessMemory& p : device.processes()) {
      if (p.has_steps_total()) steps = steps.value_or(0) + p.steps_total();
    }
    r.step_rate.reset();
    if (steps && r.steps && now > r.steps->second && *steps >= r.steps->first) {
      r.step_rate = static_cast<double>(*steps - r.steps->first) /
                    (static_cast<double>(now - r.steps->second) / 1e9);
    }
    if (steps) {
      r.steps = std::pair(*steps, now);
    } else {
      r.steps.reset();
    }
  }

  static std::optional<double> ValueOf(const RankState& r, Measure m) {
    switch (m) {
      case Measure::kSteps:
        return r.step_rate;
      case Measure::kCompute:
        return r.compute;
      case Measure::kLinks:
        return r.link_rate;
    }
    return std::nullopt;
  }

  // The measure every rank reports, in order of preference; none when no measure is complete.
  std::optional<Measure> CommonMeasure() const {
    for (const Measure m : {Measure::kSteps, Measure::kCompute, Measure::kLinks}) {
      bool all = true;
      for (const auto& [name, node] : nodes_) {
        for (const auto& [key, r] : node.ranks) all = all && ValueOf(r, m).has_value();
      }
      if (all) return m;
    }
    return std::nullopt;
  }

  void ResetAll() {
    for (auto& [name, node] : nodes_) {
      node.slow_since_ns.reset();
      for (auto& [key, r] : node.ranks) r.slow_since_ns.reset();
    }
  }

  // Judges the ranks of the slice's node (the ones with fresh values) against the job's median.
  void Judge(const JobSlice& slice) {
    measure_ = CommonMeasure();
    std::vector<double> values, computes, node_means;
    for (const auto& [name, node] : nodes_) {
      double sum = 0;
      for (const auto& [key, r] : node.ranks) {
        if (measure_) values.push_back(*ValueOf(r, *measure_));
        if (measure_) sum += *ValueOf(r, *measure_);
        if (r.compute) computes.push_back(*r.compute);
      }
      if (!node.ranks.empty()) node_means.push_back(sum / static_cast<double>(node.ranks.size()));
    }
    const bool judged = measure_ && values.size() >= config_.min_ranks &&
                        (computes.empty() || Median(computes) >= config_.min_busy_ratio);
    if (!judged) {
      ResetAll();
      return;
    }
    median_ = Median(values);
    if (median_ <= 0) {
      ResetAll();
      return;
    }
    auto it = nodes_.find(slice.node);
    if (it == nodes_.end()) return;
    NodeRanks& node = it->second;
    double sum = 0;
    for (auto& [key, r] : node.ranks) {
      r.value = *ValueOf(r, *measure_);
      r.median = median_;
      sum += r.value;
      Track(r.slow_since_ns, r.value < config_.ratio * median_, slice.now_ns);
    }
    // A node is judged as one rank among at least three nodes, when it has several devices.
    node.value = sum / static_cast<double>(node.ranks.size());
    node.median = Median(node_means);
    Track(node.slow_since_ns,
          nodes_.size() >= 3 && node.ranks.size() > 1 && node.value < config_.ratio * node.median,
          slice.now_ns);
  }

  static void Track(std::optional<int64_t>& since, bool slow, int64_t now) {
    if (!slow) {
      since.reset();
    } else if (!since) {
      since = now;
    }
  }

  bool SlowLongEnough(const std::optional<int64_t>& since, int64_t now) const {
    return since && static_cast<double>(now - *since) / 1e9 >= config_.for_seconds;
  }

  void RaiseSlow(const JobSlice& slice, JobRuleContext& context) {
    if (!measure_) return;
    size_t total = 0;
    for (const auto& [name, node] : nodes_) total += node.ranks.size();
    for (const auto& [name, node] : nodes_) {
      // A whole node slower than the others is one straggler, not one per device.
      if (node.slow_since_ns) {
        if (SlowLongEnough(node.slow_since_ns, slice.now_ns)) {
          RaiseNode(slice, context, name, node, total);
        }
        continue;
      }
      for (const auto& [key, r] : node.ranks) {
        if (SlowLongEnough(r.slow_since_ns, slice.now_ns)) {
          RaiseRank(slice, context, name, r, total);
        }
      }
    }
  }

  Raised Common(const JobSlice& slice, double value, double median, int64_t since, size_t ranks,
                const std::string& who) const {
    const double share = value / median;
    const double slow_for = static_cast<double>(slice.now_ns - since) / 1e9;
    Raised raised;
    raised.severity = kWarning;
    raised.plot = measure_ == Measure::kLinks ? "link_bytes_per_second" : "compute_ratio";
    raised.start_ns = since;
    raised.window_start_ns = since;
    raised.summary = "job " + std::string(slice.job) + ": " + who + " at " +
                     std::to_string(std::lround(share * 100)) + "% of the job's median " +
                     std::string(MeasureName(*measure_)) + " for " +
                     FormatDuration(std::chrono::duration<double>(slow_for)) + " — straggler";
    raised.evidence.push_back(TextEvidence("job", slice.job));
    raised.evidence.push_back(TextEvidence("measure", MeasureName(*measure_)));
    raised.evidence.push_back(NumberEvidence("value", value, MeasureUnit(*measure_)));
    raised.evidence.push_back(NumberEvidence("job_median", median, MeasureUnit(*measure_)));
    raised.evidence.push_back(NumberEvidence("share_of_median", share, "ratio"));
    raised.evidence.push_back(NumberEvidence("ranks", static_cast<double>(ranks), "count"));
    raised.evidence.push_back(NumberEvidence("slow_for", slow_for, "seconds"));
    return raised;
  }

  void RaiseRank(const JobSlice& slice, JobRuleContext& context, const std::string& node,
                 const RankState& r, size_t total) const {
    const std::string who = (r.rank.empty() ? std::string("a rank") : "rank " + r.rank) + " (" +
                            node + " device " + r.device + ")";
    Raised raised = Common(slice, r.value, r.median, *r.slow_since_ns, total, who);
    if (!r.rank.empty())
      raised.evidence.insert(raised.evidence.begin() + 1, TextEvidence("rank", r.rank));
    context.Raise(node, Subject{.device = r.device, .device_uuid = r.uuid, .link = {}},
                  std::move(raised));
  }

  void RaiseNode(const JobSlice& slice, JobRuleContext& context, const std::string& name,
                 const NodeRanks& node, size_t total) const {
    std::vector<const RankState*> by_index;  // in device order, as people count them
    for (const auto& [key, r] : node.ranks) by_index.push_back(&r);
    std::sort(by_index.begin(), by_index.end(), [](const RankState* a, const RankState* b) {
      return std::pair(a->device.size(), a->device) < std::pair(b->device.size(), b->device);
    });
    std::string rank_list;
    for (const RankState* r : by_index) {
      if (!r->rank.empty()) rank_list += (rank_list.empty() ? "" : ", ") + r->rank;
    }
    const std::string who =
        "node " + name + " (all " + std::to_string(node.ranks.size()) + " of its devices)";
    Raised raised = Common(slice, node.value, node.median, *node.slow_since_ns, total, who);
    if (!rank_list.empty()) {
      raised.evidence.insert(raised.evidence.begin() + 1, TextEvidence("ranks_on_node", rank_list));
    }
    context.Raise(name, Subject{}, std::move(raised));
  }

  const JobStragglerConfig& config_;                     // the engine's: a reload changes it
  std::map<std::string, NodeRanks, std::less<>> nodes_;  // the job's nodes, by name
  std::string key_scratch_;
  std::optional<Measure> measure_;
  double median_ = 0;
};

}  // namespace

std::unique_ptr<JobRule> MakeJobStragglerRule(const Config& config) {
  return std::make_unique<JobStragglerRule>(config.job_straggler);
}

}  // namespace accelmon::diagnostics
