#include "collectors/sim.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "collectors/push.h"
#include "proto/time_format.h"

namespace accelmon::collectors {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr uint64_t kReservedBytes = 512ULL << 20;      // what the driver keeps for itself
constexpr double kRampSeconds = 90;                    // the job loads its weights
constexpr double kFragmentationTauSeconds = 3 * 3600;  // fragmentation creeps up over hours
constexpr double kJobMinSeconds = 6 * 3600;            // the job restarts every 6 to 10 hours
constexpr double kJobMaxSeconds = 10 * 3600;
constexpr double kContextBytes = 0.5 * 1024 * 1024 * 1024;  // the process's context, not cached
constexpr double kLargestCachedShare = 0.1;  // the largest cached free block, of all cached
constexpr double kThermalTauSeconds = 60;
constexpr double kSlowdownCelsius = 87;
constexpr double kThermalThrottleFactor = 0.7;  // compute lost while hw_thermal throttles
constexpr double kStepsPerBusySecond = 100;     // training steps per second at full compute
constexpr std::string_view kDefaultJob = "sim-job";

// A pod name from its pattern: {job}, {node}, {device}, {rank} replaced.
std::string PodName(std::string pattern, const std::string& job, const std::string& node,
                    uint32_t device, uint32_t rank) {
  const std::pair<std::string_view, std::string> fields[] = {{"{job}", job},
                                                             {"{node}", node},
                                                             {"{device}", std::to_string(device)},
                                                             {"{rank}", std::to_string(rank)}};
  for (const auto& [key, value] : fields) {
    for (size_t at = pattern.find(key); at != std::string::npos;
         at = pattern.find(key, at + value.size())) {
      pattern.replace(at, key.size(), value);
    }
  }
  return pattern;
}

// SplitMix64: decorrelates the per-device seeds derived from one seed.
uint64_t SplitMix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

double Uniform(std::mt19937_64& rng, double lo, double hi) {
  return std::uniform_real_distribution<double>(lo, hi)(rng);
}

double Noise(std::mt19937_64& rng, double stddev) {
  return std::normal_distribution<double>(0.0, stddev)(rng);
}

std::string PciBusId(uint32_t index) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0000:%02x:00.0", (0x18 + 0x10 * index) & 0xff);
  return buf;
}

std::string Uuid(std::mt19937_64& rng) {
  const uint64_t a = rng(), b = rng();
  char buf[48];
  std::snprintf(buf, sizeof buf, "SIM-%08x-%04x-%04x-%04x-%012llx", static_cast<unsigned>(a >> 32),
                static_cast<unsigned>((a >> 16) & 0xffff), static_cast<unsigned>(a & 0xffff),
                static_cast<unsigned>(b >> 48),
                static_cast<unsigned long long>(b & 0xffffffffffffULL));
  return buf;
}

// How far along a ramp of `over_s` seconds is `t_s` seconds in: 0 to 1.
double RampMix(double t_s, double over_s) { return over_s <= 0 ? 1 : std::min(1.0, t_s / over_s); }

// Even periods since onset are the first half of the fault's cycle (down, or bursting).
bool FirstHalfOfCycle(double t_s, double period_s) {
  return static_cast<int64_t>(std::floor(t_s / period_s)) % 2 == 0;
}

bool IsLinkFault(FaultKind kind) {
  return kind == FaultKind::kLinkDown || kind == FaultKind::kLinkFlap ||
         kind == FaultKind::kLinkDegrade || kind == FaultKind::kLinkBurst;
}

v1::Event& AddEvent(v1::NodeReport& report, v1::EventKind kind, std::string message) {
  v1::Event& e = *report.add_events();
  e.set_kind(kind);
  *e.mutable_time() = report.timestamp();
  e.set_message(std::move(message));
  return e;
}

}  // namespace

uint64_t SimSeedForNode(std::string_view node) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (const char c : node) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ULL;
  }
  return h;
}

void CheckSimScenario(const Scenario& scenario, int devices) {
  SimCollector sim(SimOptions{
      .devices = devices, .seed = 1, .scenario = std::make_shared<const Scenario>(scenario)});
}

SimCollector::SimCollector(SimOptions options) : options_(std::move(options)) {
  const auto n = static_cast<uint32_t>(std::max(options_.devices, 0));
  devices_.reserve(n);
  for (uint32_t i = 0; i < n; ++i) {
    SimDevice d;
    d.rng.seed(SplitMix(options_.seed ^ SplitMix(i + 1)));
    d.uuid = Uuid(d.rng);
    d.pci_bus_id = PciBusId(i);
    d.working_set_bytes = Uniform(d.rng, 70, 110) * kGiB;
    d.fragmentation_max = Uniform(d.rng, 0.15, 0.4);
    d.busy_level = Uniform(d.rng, 0.82, 0.95);
    d.job_end_s = Uniform(d.rng, kJobMinSeconds, kJobMaxSeconds);
    devices_.push_back(std::move(d));
  }
  // Links: a full mesh up to 8 devices (as NVLink/HCCS boards are wired), ring neighbours beyond.
  for (uint32_t i = 0; i < n; ++i) {
    uint32_t link_index = 0;
    for (uint32_t j = 0; j < n; ++j) {
      if (j == i) continue;
      const uint32_t distance = std::min((j + n - i) % n, (i + n - j) % n);
      if (n > 8 && distance > 3) continue;
      SimDevice& d = devices_[i];
      d.links.push_back(SimLink{.name = "nvlink" + std::to_string(link_index),
                                .kind = v1::LINK_KIND_NVLINK,
                                .index = link_index,
                                .peer = devices_[j].pci_bus_id,
                                .max_bytes_per_second = kNvlinkBytesPerSecond,
                                .share = Uniform(d.rng, 0.55, 0.8)});
      ++link_index;
    }
    SimDevice& d = devices_[i];
    d.links.push_back(SimLink{.name = "pcie",
                              .kind = v1::LINK_KIND_PCIE,
                              .index = 0,
                              .peer = "host",
                              .max_bytes_per_second = kPcieBytesPerSecond,
                              .share = Uniform(d.rng, 0.05, 0.15)});
  }

  PlaceJobs();
  if (!options_.scenario) return;
  const Scenario& scenario = *options_.scenario;
  const auto fail = [&](const Fault& f, const std::string& what) {
    throw ScenarioError(scenario.path + ":" + std::to_string(f.line) + ": " + what);
  };
  for (const Fault& f : scenario.faults) {
    // Checked on every node alike, so a fault for another node is no less wrong.
    if (f.kind != FaultKind::kOomKill && f.device >= static_cast<int>(n)) {
      fail(f, "device " + std::to_string(f.device) + " is out of range: the simulation has " +
                  std::to_string(n) + " device(s)");
    }
    if (IsLinkFault(f.kind)) {
      for (uint32_t i = 0; i < n; ++i) {
        if (!f.AppliesTo(static_cast<int>(i))) continue;
        const auto& links = devices_[i].links;
        if (std::none_of(links.begin(), links.end(),
                         [&](const SimLink& l) { return l.name == f.link; })) {
          std::string names;
          for (const SimLink& l : links) names += (names.empty() ? "" : ", ") + l.name;
          fail(f, "device " + std::to_string(i) + " has no link \"" + f.link + "\" (it has " +
                      names + ")");
        }
      }
    }
    // A hung rank hangs its whole job: every node of the job keeps it.
    if (f.AppliesTo(options_.node) || f.kind == FaultKind::kRankHang) faults_.push_back(f);
  }
  fault_states_.resize(faults_.size());
}

void SimCollector::PlaceJobs() {
  const auto n = static_cast<uint32_t>(devices_.size());
  if (!options_.scenario || options_.scenario->jobs.empty()) {
    const auto node_index = static_cast<uint32_t>(std::max(options_.node_index, 0));
    const auto nodes = static_cast<uint32_t>(std::max(options_.nodes, 1));
    for (uint32_t i = 0; i < n; ++i) {
      devices_[i].placement =
          Placement{.job = options_.job.empty() ? std::string(kDefaultJob) : options_.job,
                    .user = "sim",
                    .rank = node_index * n + i,
                    .world_size = nodes * n};
    }
    return;
  }
  const Scenario& scenario = *options_.scenario;
  for (const SimJob& job : scenario.jobs) {
    const auto fail = [&](const std::string& what) {
      throw ScenarioError(scenario.path + ":" + std::to_string(job.line) + ": " + what);
    };
    std::vector<uint32_t> devices;
    for (const int d : job.devices) {
      if (d >= static_cast<int>(n)) {
        fail("job " + job.id + ": device " + std::to_string(d) +
             " is out of range: the simulation has " + std::to_string(n) + " device(s)");
      }
      devices.push_back(static_cast<uint32_t>(d));
    }
    if (job.devices.empty()) {
      for (uint32_t i = 0; i < n; ++i) devices.push_back(i);
    }
    if (!job.OnNode(options_.node)) continue;
    // Ranks count node by node (in the order of `nodes:`, else the fleet's), device by device.
    uint32_t node_position = static_cast<uint32_t>(std::max(options_.node_index, 0));
    uint32_t node_count = static_cast<uint32_t>(std::max(options_.nodes, 1));
    if (!job.nodes.empty()) {
      node_position = static_cast<uint32_t>(
          std::find(job.nodes.begin(), job.nodes.end(), options_.node) - job.nodes.begin());
      node_count = static_cast<uint32_t>(job.nodes.size());
    }
    const auto per_node = static_cast<uint32_t>(devices.size());
    for (uint32_t k = 0; k < per_node; ++k) {
      SimDevice& d = devices_[devices[k]];
      if (d.placement) {
        fail("job " + job.id + ": device " + std::to_string(devices[k]) + " of node " +
             (options_.node.empty() ? std::string("(any)") : options_.node) +
             " is already held by job " + d.placement->job);
      }
      const uint32_t rank = node_position * per_node + k;
      d.placement = Placement{
          .job = job.id,
          .pod = job.pod,
          .pod_name = job.pod ? PodName(job.pod_pattern, job.id, options_.node, devices[k], rank)
                              : std::string(),
          .pod_namespace = job.pod ? job.pod_namespace : std::string(),
          .user = job.user,
          .rank = rank,
          .world_size = node_count * per_node};
    }
  }
}

void SimCollector::AddHolder(const Placement& job, uint32_t pid, uint64_t used_bytes,
                             v1::DeviceTelemetry& out) {
  auto& holder = *out.add_holders();
  holder.set_kind(job.pod ? v1::HOLDER_KIND_POD : v1::HOLDER_KIND_SLURM);
  holder.set_job(job.job);
  if (job.pod) {
    holder.set_pod(job.pod_name);
    holder.set_namespace_(job.pod_namespace);
    holder.set_container("trainer");
  } else {
    holder.set_step("0");
  }
  holder.set_user(job.user);
  holder.add_pids(pid);
  holder.set_rank(std::to_string(job.rank));
  holder.set_world_size(job.world_size);
  holder.set_memory_used_bytes(used_bytes);
  holder.set_command("python3");
}

void SimCollector::StartAndEndFaults(v1::NodeReport& report, double elapsed_s) {
  active_.clear();
  for (size_t k = 0; k < faults_.size(); ++k) {
    const Fault& f = faults_[k];
    FaultState& state = fault_states_[k];
    // A job that ended for a while comes back as the sim's jobs do: a new process loading again.
    if (f.kind == FaultKind::kJobEnd && f.duration_s > 0 && !state.end_done &&
        elapsed_s >= f.at_s + f.duration_s) {
      state.end_done = true;
      for (uint32_t i = 0; i < devices_.size(); ++i) {
        if (!f.AppliesTo(static_cast<int>(i))) continue;
        devices_[i].restart_floor_s = f.at_s + f.duration_s;
        ++devices_[i].restarts;
        devices_[i].alloc_retries = 0;
      }
    }
    if (!f.ActiveAt(elapsed_s)) continue;
    active_.push_back(&f);
    if (state.onset_done) continue;
    state.onset_done = true;
    if (f.kind == FaultKind::kOomKill) {
      for (uint64_t c = 0; c < f.count; ++c) {
        AddEvent(report, v1::EVENT_KIND_OOM_KILL,
                 "Killed process " + std::to_string(50000 + 100 * k + c) + " (python) (simulated)");
      }
      continue;
    }
    if (f.kind != FaultKind::kXid && f.kind != FaultKind::kDeviceLost) continue;
    for (uint32_t i = 0; i < devices_.size(); ++i) {
      if (!f.AppliesTo(static_cast<int>(i))) continue;
      v1::Event& e =
          f.kind == FaultKind::kXid
              ? AddEvent(report, v1::EVENT_KIND_XID,
                         "XID " + std::to_string(f.code) + " (simulated)")
              : AddEvent(report, v1::EVENT_KIND_DEVICE_LOST, "device fell off the bus (simulated)");
      e.set_device_index(i);
      e.set_device_uuid(devices_[i].uuid);
      if (f.kind == FaultKind::kXid) e.set_code(f.code);
    }
  }
}

void SimCollector::Collect(v1::NodeReport& report) {
  const int64_t now_ns = ToNanos(report.timestamp());
  if (!started_) {
    started_ = true;
    start_ns_ = now_ns;
    last_ns_ = now_ns;
  }
  const double elapsed_s = static_cast<double>(now_ns - start_ns_) / 1e9;
  // A clock that steps back must not make counters run backwards.
  const double dt_s = std::max(0.0, static_cast<double>(now_ns - last_ns_) / 1e9);
  last_ns_ = std::max(last_ns_, now_ns);

  if (!faults_.empty()) StartAndEndFaults(report, elapsed_s);
  for (uint32_t i = 0; i < devices_.size(); ++i) {
    Step(devices_[i], i, elapsed_s, dt_s, *report.add_devices());
  }
  // The latest time seen: a clock that steps back does not make counts run backwards.
  if (options_.jobs && options_.communicators) AddCommunicators(report, last_ns_);
}

std::optional<SimCollector::RankAt> SimCollector::JobAt(const std::string& node, int device) const {
  if (node == options_.node || (node.empty() && options_.node.empty())) {
    if (device < 0 || device >= static_cast<int>(devices_.size())) return std::nullopt;
    const auto& placement = devices_[static_cast<size_t>(device)].placement;
    if (!placement) return std::nullopt;
    return RankAt{.job = placement->job, .rank = placement->rank};
  }
  if (!options_.scenario || options_.scenario->jobs.empty()) {
    // The default job holds every device of every node; another node's ranks are not known here.
    return RankAt{.job = options_.job.empty() ? std::string(kDefaultJob) : options_.job,
                  .rank = std::nullopt};
  }
  for (const SimJob& job : options_.scenario->jobs) {
    if (!job.OnNode(node)) continue;
    const auto per_node = job.devices.empty() ? devices_.size() : job.devices.size();
    const auto k =
        job.devices.empty()
            ? static_cast<size_t>(device)
            : static_cast<size_t>(std::find(job.devices.begin(), job.devices.end(), device) -
                                  job.devices.begin());
    if (k >= per_node) continue;
    RankAt at{.job = job.id, .rank = std::nullopt};
    if (!job.nodes.empty()) {
      const auto position = static_cast<size_t>(
          std::find(job.nodes.begin(), job.nodes.end(), node) - job.nodes.begin());
      at.rank = static_cast<uint32_t>(position * per_node + k);
    }
    return at;
  }
  return std::nullopt;
}

bool SimCollector::Hangs(const Fault& f, const std::string& job) const {
  const auto at = JobAt(f.node, f.device);
  return at && at->job == job;
}

// NCCL RAS's view of each job on this node: one communicator of the job's ranks, each launching
// kCollectivesPerSecond collectives (counted from midnight UTC, so that agents started apart
// agree) until its device stalls, pauses or is lost. A rank_hang stops its rank at a collective
// the others have already launched: they stay one ahead, waiting for it.
void SimCollector::AddCommunicators(v1::NodeReport& report, int64_t now_ns) {
  const int64_t day_ns = 86400LL * 1000000000LL;
  const int64_t midnight_ns = start_ns_ - ((start_ns_ % day_ns) + day_ns) % day_ns;
  const auto count_at = [&](int64_t t_ns) {
    return static_cast<uint64_t>(static_cast<double>(std::max<int64_t>(0, t_ns - midnight_ns)) /
                                 1e9 * kCollectivesPerSecond);
  };
  const auto onset_ns = [&](const Fault& f) {
    return start_ns_ + static_cast<int64_t>(f.at_s * 1e9);
  };
  // Where a hung rank stops: its count at the onset, rounded up to a hundred (the queued ones
  // go out first), so that live agents started a moment apart agree on it.
  const auto hang_count = [&](const Fault& f) { return (count_at(onset_ns(f)) / 100 + 1) * 100; };
  std::map<std::string, v1::Communicator*> by_job;
  for (uint32_t i = 0; i < devices_.size(); ++i) {
    const SimDevice& d = devices_[i];
    if (!d.placement || d.process_gone) continue;
    const Placement& job = *d.placement;
    v1::Communicator*& c = by_job[job.job];
    if (c == nullptr) {
      c = report.add_communicators();
      uint64_t h = 0xcbf29ce484222325ULL;
      for (const char ch : job.job) h = (h ^ static_cast<unsigned char>(ch)) * 0x100000001b3ULL;
      char hash[24];
      std::snprintf(hash, sizeof hash, "0x%llx", static_cast<unsigned long long>(h));
      c->set_hash(hash);
      c->set_size(job.world_size);
      c->set_ranks_reporting(job.world_size);
      c->set_source("sim");
      c->set_nccl_version("2.29.2-sim");
    }
    // Where this rank stopped launching collectives, if it did.
    std::optional<uint64_t> stopped;
    const auto stop = [&](uint64_t at) { stopped = stopped ? std::min(*stopped, at) : at; };
    for (const Fault* f : active_) {
      const bool here = f->AppliesTo(static_cast<int>(i)) && f->AppliesTo(options_.node);
      if ((f->kind == FaultKind::kStall || f->kind == FaultKind::kPause ||
           f->kind == FaultKind::kDeviceLost) &&
          here) {
        stop(count_at(onset_ns(*f)));
      }
      if (f->kind == FaultKind::kRankHang && Hangs(*f, job.job)) {
        const bool hung = f->node == options_.node && f->device == static_cast<int>(i);
        stop(hang_count(*f) + (hung ? 0 : 1));
      }
    }
    const uint64_t collectives = stopped ? *stopped : count_at(now_ns);
    v1::CommunicatorRank& r = *c->add_ranks();
    r.set_rank(job.rank);
    r.set_local(true);
    r.set_device(i);
    r.set_pid(10000 + 1000 * i + d.restarts);
    r.set_host(options_.node);
    r.set_state(v1::RANK_STATE_OK);
    r.set_collectives(collectives);
    (*r.mutable_collectives_by_kind())["AllReduce"] = collectives;
    c->set_collectives_max(std::max(c->collectives_max(), collectives));
  }
  // The hung rank as the other nodes' RAS sees it, and where the others are.
  for (const Fault* f : active_) {
    if (f->kind != FaultKind::kRankHang || f->node == options_.node) continue;
    const auto at = JobAt(f->node, f->device);
    if (!at) continue;
    const auto it = by_job.find(at->job);
    if (it == by_job.end()) continue;
    const uint64_t hung = hang_count(*f);
    it->second->set_collectives_max(std::max(it->second->collectives_max(), hung + 1));
    if (!at->rank) continue;
    v1::CommunicatorRank& r = *it->second->add_ranks();
    r.set_rank(*at->rank);
    r.set_local(false);
    r.set_device(static_cast<uint32_t>(f->device));
    r.set_host(f->node);
    r.set_state(v1::RANK_STATE_OK);
    r.set_collectives(hung);
    (*r.mutable_collectives_by_kind())["AllReduce"] = hung;
  }
  for (auto& [job, c] : by_job) {
    std::sort(c->mutable_ranks()->begin(), c->mutable_ranks()->end(),
              [](const auto& a, const auto& b) { return a.rank() < b.rank(); });
  }
}

// What this tick's active faults do to one device. Faults only change values after the healthy
// simulation drew its random numbers, so every draw happens as without them.
struct SimCollector::TickFaults {
  bool lost = false, stalled = false, job_ended = false, power_capped = false;
  double compute_factor = 1, leak_bytes = 0;
  double creep_mix = 0, creep_to = 0, ramp_mix = 0, ramp_to = 0, spike_to = 0;
  const std::string* firmware = nullptr;
};

SimCollector::TickFaults SimCollector::FaultsOn(const SimDevice& d, uint32_t index,
                                                double elapsed_s) const {
  TickFaults tf;
  for (const Fault* f : active_) {
    // A hung rank (on any node) stalls every device of its job: the others wait for it.
    if (f->kind == FaultKind::kRankHang && d.placement && Hangs(*f, d.placement->job)) {
      tf.stalled = true;
    }
    if (f->kind == FaultKind::kRankHang || !f->AppliesTo(static_cast<int>(index))) continue;
    const double t = elapsed_s - f->at_s;
    switch (f->kind) {
      case FaultKind::kFragmentationCreep:
        tf.creep_mix = RampMix(t, f->over_s);
        tf.creep_to = f->to;
        break;
      case FaultKind::kThermalRamp:
        tf.ramp_mix = RampMix(t, f->over_s);
        tf.ramp_to = f->to;
        break;
      case FaultKind::kThermalSpike:
        tf.spike_to = std::max(tf.spike_to, f->to);
        break;
      case FaultKind::kPowerThrottle:
        tf.power_capped = true;
        break;
      case FaultKind::kStall:
      case FaultKind::kPause:
        tf.stalled = true;
        break;
      case FaultKind::kJobEnd:
        tf.job_ended = true;
        break;
      case FaultKind::kThroughputDrop:
      case FaultKind::kStraggler:  // a rank of the job slower than the others
        tf.compute_factor *= f->factor;
        break;
      case FaultKind::kLeak:
        tf.leak_bytes += f->rate * t;
        break;
      case FaultKind::kDeviceLost:
        tf.lost = true;
        break;
      case FaultKind::kFirmware:
        tf.firmware = &f->version;
        break;
      default:  // links, ECC and events: StepLinks, StepErrors and StartAndEndFaults
        break;
    }
  }
  return tf;
}

void SimCollector::Step(SimDevice& d, uint32_t index, double elapsed_s, double dt_s,
                        v1::DeviceTelemetry& out) {
  TickFaults faults = FaultsOn(d, index, elapsed_s);
  auto& id = *out.mutable_identity();
  id.set_vendor("sim");
  id.set_model("accelmon-sim-128g");
  id.set_uuid(d.uuid);
  id.set_index(index);
  id.set_pci_bus_id(d.pci_bus_id);
  id.set_firmware_version(faults.firmware != nullptr ? *faults.firmware : "1.0.0-sim");
  id.set_driver_version("accelmon-sim");
  out.set_up(true);

  // The job restarts on a schedule drawn from the seed.
  while (elapsed_s >= d.job_end_s) {
    d.job_start_s = d.job_end_s;
    d.job_end_s += Uniform(d.rng, kJobMinSeconds, kJobMaxSeconds);
    ++d.restarts;
    d.alloc_retries = 0;
  }
  const double job_age_s = std::max(0.0, elapsed_s - std::max(d.job_start_s, d.restart_floor_s));

  // Utilization: the job is busy once loaded, with noise. A device throttling for heat (as of
  // the last tick) computes less.
  const double loaded = std::min(1.0, job_age_s / kRampSeconds);
  const double compute_noise = Noise(d.rng, 0.03);
  double compute = std::clamp(d.busy_level * loaded + compute_noise, 0.0, 1.0);
  if (d.core_celsius >= kSlowdownCelsius) compute *= kThermalThrottleFactor;
  compute *= faults.compute_factor;
  const double membw_noise = Noise(d.rng, 0.03);
  double membw = std::clamp(0.7 * compute + membw_noise, 0.0, 1.0);
  if (faults.stalled) {
    // A hung collective: the devices spin at next to nothing.
    compute = std::clamp(0.005 + compute_noise / 6, 0.0, 0.01);
    membw = std::clamp(0.005 + membw_noise / 6, 0.0, 0.01);
  }
  // A device nobody holds idles, as one whose job ended.
  if (!d.placement) faults.job_ended = true;
  if (faults.job_ended) compute = membw = 0;
  d.process_gone = faults.job_ended;
  out.mutable_utilization()->set_compute_ratio(compute);
  out.mutable_utilization()->set_memory_bandwidth_ratio(membw);

  StepMemory(d, index, dt_s, job_age_s, loaded, compute, faults, out);

  // Power follows utilization; energy integrates power.
  const double watts =
      std::clamp(90 + compute * (kPowerLimitWatts - 110) + Noise(d.rng, 8), 60.0, kPowerLimitWatts);
  d.energy_joules += watts * dt_s;
  out.mutable_power()->set_usage_watts(watts);
  out.mutable_power()->set_limit_watts(kPowerLimitWatts);
  out.mutable_power()->set_energy_joules_total(d.energy_joules);

  // Temperature approaches a level set by utilization, with a thermal time constant; a thermal
  // ramp moves that level. A spike is a brief hot spot the sensor reads: it does not heat the
  // core's thermal mass, so it ends with the fault and never throttles.
  double target = 35 + 45 * compute;
  target += (faults.ramp_to - target) * faults.ramp_mix;
  const double alpha = dt_s <= 0 ? 0 : 1 - std::exp(-dt_s / kThermalTauSeconds);
  d.core_celsius += (target - d.core_celsius) * alpha;
  auto& thermal = *out.mutable_thermal();
  thermal.set_core_celsius(std::max(d.core_celsius, faults.spike_to) + Noise(d.rng, 0.3));
  thermal.set_memory_celsius(d.core_celsius + 6 + Noise(d.rng, 0.3));
  thermal.set_slowdown_threshold_celsius(kSlowdownCelsius);
  thermal.set_shutdown_threshold_celsius(95);
  const bool power_throttled = faults.power_capped || watts >= 0.98 * kPowerLimitWatts;
  const bool thermal_throttled = d.core_celsius >= kSlowdownCelsius;
  (*thermal.mutable_throttle_reasons())["sw_power_cap"] = power_throttled;
  (*thermal.mutable_throttle_reasons())["hw_thermal"] = thermal_throttled;

  const double busy_hz = power_throttled || thermal_throttled ? 1.4e9 : 1.98e9;
  out.mutable_clocks()->set_compute_hz(compute > 0.05 ? busy_hz : 0.345e9);
  out.mutable_clocks()->set_memory_hz(3.2e9);

  StepErrors(d, index, elapsed_s, dt_s, out);
  StepLinks(d, index, elapsed_s, dt_s, compute, faults, out);

  // A lost device answers with who it is and that it is down; everything else is unknown.
  if (faults.lost) {
    const v1::DeviceIdentity identity = out.identity();
    out.Clear();
    *out.mutable_identity() = identity;
    out.set_up(false);
  }
}

void SimCollector::StepMemory(SimDevice& d, uint32_t index, double dt_s, double job_age_s,
                              double loaded, double compute, const TickFaults& faults,
                              v1::DeviceTelemetry& out) {
  // Memory: the job's allocator holds its working set (allocated, loaded during the ramp) plus a
  // cache of freed blocks that grows and splits over hours; the device's free memory is the rest.
  // Fragmentation follows from that as for pushed statistics (DeriveFragmentation).
  const double total = static_cast<double>(kMemoryTotalBytes);
  const double available = total - static_cast<double>(kReservedBytes) - kContextBytes;
  double allocated =
      std::clamp(2 * kGiB + (d.working_set_bytes - 2 * kGiB) * loaded + Noise(d.rng, 0.2 * kGiB),
                 0.0, available);
  allocated = std::min(available, allocated + faults.leak_bytes);
  const double healthy_share =
      d.fragmentation_max * (1 - std::exp(-job_age_s / kFragmentationTauSeconds));
  double cached_share = std::clamp(
      healthy_share + (faults.creep_to - healthy_share) * faults.creep_mix + Noise(d.rng, 0.005),
      0.0, 0.9);
  if (faults.stalled) {
    allocated = d.last_allocated;  // a hung job allocates and frees nothing
    cached_share = d.last_cached_share;
  } else {
    d.last_allocated = allocated;
    d.last_cached_share = cached_share;
  }
  const auto allocated_b = static_cast<uint64_t>(allocated);
  const auto cached_b = static_cast<uint64_t>((available - allocated) * cached_share);
  const uint64_t process_reserved_b = allocated_b + cached_b;
  // A job that ended has freed everything, its context too.
  const uint64_t used_b =
      faults.job_ended ? 0 : static_cast<uint64_t>(kContextBytes) + process_reserved_b;
  const uint64_t free_b = kMemoryTotalBytes - kReservedBytes - used_b;
  auto& mem = *out.mutable_memory();
  mem.set_total_bytes(kMemoryTotalBytes);
  mem.set_used_bytes(used_b);
  mem.set_free_bytes(free_b);
  mem.set_reserved_bytes(kReservedBytes);

  // Allocations that had to free the cache first become likelier as the cache fragments.
  if (std::uniform_real_distribution<double>(0, 1)(d.rng) < 0.01 * cached_share * dt_s &&
      !faults.stalled && !faults.job_ended) {
    ++d.alloc_retries;
  }
  // Training steps advance with the useful work; a restarted process counts from 0 again.
  if (d.steps_restarts != d.restarts) {
    d.steps_restarts = d.restarts;
    d.steps = 0;
  }
  if (!faults.stalled && !faults.job_ended) d.steps += kStepsPerBusySecond * compute * dt_s;
  if (!faults.job_ended) {
    const Placement& job = *d.placement;
    const uint32_t pid = 10000 + 1000 * index + d.restarts;
    auto& process = *out.add_processes();
    process.set_pid(pid);
    if (options_.jobs) {
      process.set_job(job.job);
      process.set_rank(std::to_string(job.rank));
      process.set_world_size(job.world_size);
    }
    process.set_steps_total(static_cast<uint64_t>(d.steps));
    process.set_used_bytes(used_b);
    process.set_command("python3");
    process.set_user(job.user);
    process.set_reserved_bytes(process_reserved_b);
    process.set_allocated_bytes(allocated_b);
    process.set_active_bytes(allocated_b);
    process.set_inactive_split_bytes(static_cast<uint64_t>(0.8 * static_cast<double>(cached_b)));
    process.set_largest_free_block_bytes(
        static_cast<uint64_t>(kLargestCachedShare * static_cast<double>(cached_b)));
    process.set_segments(1 + process_reserved_b / (2ULL << 30));
    process.set_alloc_retries_total(d.alloc_retries);
    process.set_ooms_total(0);
    DeriveFragmentation(out);

    // The sim is the device and its scheduler at once: it says who holds the device.
    if (options_.jobs) AddHolder(job, pid, used_b, out);
  }
}

void SimCollector::StepErrors(SimDevice& d, uint32_t index, double elapsed_s, double dt_s,
                              v1::DeviceTelemetry& out) const {
  // Rare corrected ECC errors; no uncorrected ones, but for an ecc_burst, which adds its counts
  // at onset (its corrected ones spread over its duration, when it has one) and keeps them.
  if (std::uniform_real_distribution<double>(0, 1)(d.rng) < 0.001 * dt_s) ++d.ecc_corrected;
  uint64_t burst_corrected = 0, burst_uncorrected = 0;
  for (const Fault& f : faults_) {
    if (f.kind != FaultKind::kEccBurst || elapsed_s < f.at_s ||
        !f.AppliesTo(static_cast<int>(index))) {
      continue;
    }
    const double share = f.duration_s > 0 ? RampMix(elapsed_s - f.at_s, f.duration_s) : 1;
    burst_corrected += static_cast<uint64_t>(std::floor(static_cast<double>(f.corrected) * share));
    burst_uncorrected += f.uncorrected;
  }
  v1::DeviceErrors& errors = *out.mutable_errors();
  errors.set_ecc_corrected_total(d.ecc_corrected + burst_corrected);
  errors.set_ecc_uncorrected_total(burst_uncorrected);
  // Split as a GPU from Turing on splits them: all of it in device memory (HBM), none on chip.
  v1::EccLocationCounts& dram = *errors.add_ecc_by_location();
  dram.set_location(v1::MEMORY_LOCATION_DRAM);
  dram.set_corrected_total(errors.ecc_corrected_total());
  dram.set_uncorrected_total(errors.ecc_uncorrected_total());
  v1::EccLocationCounts& sram = *errors.add_ecc_by_location();
  sram.set_location(v1::MEMORY_LOCATION_SRAM);
  sram.set_corrected_total(0);
  sram.set_uncorrected_total(0);
}

void SimCollector::StepLinks(SimDevice& d, uint32_t index, double elapsed_s, double dt_s,
                             double compute, const TickFaults& faults,
                             v1::DeviceTelemetry& out) const {
  for (SimLink& link : d.links) {
    bool up = true;
    double max_bps = link.max_bytes_per_second;
    double traffic = 1;
    double width = 16;
    for (const Fault* f : active_) {
      if (!IsLinkFault(f->kind) || f->link != link.name || !f->AppliesTo(static_cast<int>(index))) {
        continue;
      }
      const double t = elapsed_s - f->at_s;
      switch (f->kind) {
        case FaultKind::kLinkDown:
          up = false;
          break;
        case FaultKind::kLinkFlap:
          if (FirstHalfOfCycle(t, f->period_s)) up = false;
          break;
        case FaultKind::kLinkDegrade:
          max_bps *= f->capacity;
          traffic *= f->traffic;
          // Lanes come in powers of two: x16 at half capacity trains at x8.
          width = std::max(1.0, std::exp2(std::round(std::log2(width * f->capacity))));
          break;
        case FaultKind::kLinkBurst:
          traffic *= FirstHalfOfCycle(t, f->period_s) ? 2 : 0.2;
          break;
        default:
          break;
      }
    }
    // No link carries more than its capacity.
    const double rate =
        std::min(link.max_bytes_per_second * link.share * compute * traffic, max_bps);
    const double tx_noise = Noise(d.rng, 0.02);
    const double rx_noise = Noise(d.rng, 0.02);
    // A link that is down, or whose job hangs or ended, moves nothing.
    if (up && !faults.stalled && !faults.job_ended) {
      link.tx += static_cast<uint64_t>(std::max(0.0, rate * dt_s * (1 + tx_noise)));
      link.rx += static_cast<uint64_t>(std::max(0.0, rate * dt_s * (1 + rx_noise)));
    }
    auto& l = *out.add_links();
    l.set_kind(link.kind);
    l.set_name(link.name);
    l.set_index(link.index);
    l.set_peer(link.peer);
    l.set_up(up);
    l.set_transmit_bytes_total(link.tx);
    l.set_receive_bytes_total(link.rx);
    l.set_max_bandwidth_bytes_per_second(max_bps);
    if (link.kind == v1::LINK_KIND_PCIE) {
      l.set_pcie_generation(5);
      l.set_pcie_width(static_cast<uint32_t>(width));
    }
  }
}

}  // namespace accelmon::collectors
