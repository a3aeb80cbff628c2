#include "collectors/sim.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "collectors/push.h"

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

int64_t ToNanos(const google::protobuf::Timestamp& t) {
  return t.seconds() * 1'000'000'000LL + t.nanos();
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

SimCollector::SimCollector(SimOptions options) : options_(options) {
  const auto n = static_cast<uint32_t>(std::max(options_.devices, 0));
  devices_.reserve(n);
  for (uint32_t i = 0; i < n; ++i) {
    SimDevice d;
    d.rng.seed(SplitMix(options_.seed ^ SplitMix(i + 1)));
    d.uuid = Uuid(d.rng);
    d.pci_bus_id = PciBusId(i);
    d.working_set_bytes = Uniform(d.rng, 70, 110) * kGiB;
    d.fragmentation_max = Uniform(d.rng, 0.3, 0.7);
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

  for (uint32_t i = 0; i < devices_.size(); ++i) {
    Step(devices_[i], i, elapsed_s, dt_s, *report.add_devices());
  }
}

void SimCollector::Step(SimDevice& d, uint32_t index, double elapsed_s, double dt_s,
                        v1::DeviceTelemetry& out) {
  auto& id = *out.mutable_identity();
  id.set_vendor("sim");
  id.set_model("accelmon-sim-128g");
  id.set_uuid(d.uuid);
  id.set_index(index);
  id.set_pci_bus_id(d.pci_bus_id);
  id.set_firmware_version("1.0.0-sim");
  id.set_driver_version("accelmon-sim");
  out.set_up(true);

  // The job restarts on a schedule drawn from the seed.
  while (elapsed_s >= d.job_end_s) {
    d.job_start_s = d.job_end_s;
    d.job_end_s += Uniform(d.rng, kJobMinSeconds, kJobMaxSeconds);
    ++d.restarts;
    d.alloc_retries = 0;
  }
  const double job_age_s = std::max(0.0, elapsed_s - d.job_start_s);

  // Utilization: the job is busy once loaded, with noise.
  const double loaded = std::min(1.0, job_age_s / kRampSeconds);
  const double compute = std::clamp(d.busy_level * loaded + Noise(d.rng, 0.03), 0.0, 1.0);
  const double membw = std::clamp(0.7 * compute + Noise(d.rng, 0.03), 0.0, 1.0);
  out.mutable_utilization()->set_compute_ratio(compute);
  out.mutable_utilization()->set_memory_bandwidth_ratio(membw);

  // Memory: the job's allocator holds its working set (allocated, loaded during the ramp) plus a
  // cache of freed blocks that grows and splits over hours; the device's free memory is the rest.
  // Fragmentation follows from that as for pushed statistics (DeriveFragmentation).
  const double total = static_cast<double>(kMemoryTotalBytes);
  const double available = total - static_cast<double>(kReservedBytes) - kContextBytes;
  const double allocated =
      std::clamp(2 * kGiB + (d.working_set_bytes - 2 * kGiB) * loaded + Noise(d.rng, 0.2 * kGiB),
                 0.0, available);
  const double cached_share =
      std::clamp(d.fragmentation_max * (1 - std::exp(-job_age_s / kFragmentationTauSeconds)) +
                     Noise(d.rng, 0.005),
                 0.0, 0.9);
  const auto allocated_b = static_cast<uint64_t>(allocated);
  const auto cached_b = static_cast<uint64_t>((available - allocated) * cached_share);
  const uint64_t process_reserved_b = allocated_b + cached_b;
  const uint64_t used_b = static_cast<uint64_t>(kContextBytes) + process_reserved_b;
  const uint64_t free_b = kMemoryTotalBytes - kReservedBytes - used_b;
  auto& mem = *out.mutable_memory();
  mem.set_total_bytes(kMemoryTotalBytes);
  mem.set_used_bytes(used_b);
  mem.set_free_bytes(free_b);
  mem.set_reserved_bytes(kReservedBytes);

  // Allocations that had to free the cache first become likelier as the cache fragments.
  if (std::uniform_real_distribution<double>(0, 1)(d.rng) < 0.01 * cached_share * dt_s) {
    ++d.alloc_retries;
  }
  auto& process = *out.add_processes();
  process.set_pid(10000 + 1000 * index + d.restarts);
  process.set_job("sim-job");
  process.set_rank(std::to_string(index));
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

  // Power follows utilization; energy integrates power.
  const double watts =
      std::clamp(90 + compute * (kPowerLimitWatts - 110) + Noise(d.rng, 8), 60.0, kPowerLimitWatts);
  d.energy_joules += watts * dt_s;
  out.mutable_power()->set_usage_watts(watts);
  out.mutable_power()->set_limit_watts(kPowerLimitWatts);
  out.mutable_power()->set_energy_joules_total(d.energy_joules);

  // Temperature approaches a level set by utilization, with a thermal time constant.
  const double target = 35 + 45 * compute;
  const double alpha = dt_s <= 0 ? 0 : 1 - std::exp(-dt_s / kThermalTauSeconds);
  d.core_celsius += (target - d.core_celsius) * alpha;
  auto& thermal = *out.mutable_thermal();
  thermal.set_core_celsius(d.core_celsius + Noise(d.rng, 0.3));
  thermal.set_memory_celsius(d.core_celsius + 6 + Noise(d.rng, 0.3));
  thermal.set_slowdown_threshold_celsius(87);
  thermal.set_shutdown_threshold_celsius(95);
  (*thermal.mutable_throttle_reasons())["sw_power_cap"] = watts >= 0.98 * kPowerLimitWatts;
  (*thermal.mutable_throttle_reasons())["hw_thermal"] = d.core_celsius >= 87;

  out.mutable_clocks()->set_compute_hz(compute > 0.05 ? 1.98e9 : 0.345e9);
  out.mutable_clocks()->set_memory_hz(3.2e9);

  // Rare corrected ECC errors; no uncorrected ones.
  if (std::uniform_real_distribution<double>(0, 1)(d.rng) < 0.001 * dt_s) ++d.ecc_corrected;
  out.mutable_errors()->set_ecc_corrected_total(d.ecc_corrected);
  out.mutable_errors()->set_ecc_uncorrected_total(0);

  for (SimLink& link : d.links) {
    const double rate = link.max_bytes_per_second * link.share * compute;
    link.tx += static_cast<uint64_t>(std::max(0.0, rate * dt_s * (1 + Noise(d.rng, 0.02))));
    link.rx += static_cast<uint64_t>(std::max(0.0, rate * dt_s * (1 + Noise(d.rng, 0.02))));
    auto& l = *out.add_links();
    l.set_kind(link.kind);
    l.set_name(link.name);
    l.set_index(link.index);
    l.set_peer(link.peer);
    l.set_up(true);
    l.set_transmit_bytes_total(link.tx);
    l.set_receive_bytes_total(link.rx);
    l.set_max_bandwidth_bytes_per_second(link.max_bytes_per_second);
    if (link.kind == v1::LINK_KIND_PCIE) {
      l.set_pcie_generation(5);
      l.set_pcie_width(16);
    }
  }
}

}  // namespace accelmon::collectors
