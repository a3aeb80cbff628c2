#include "daemon/exporter/metrics_renderer.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <chrono>
#include <deque>
#include <optional>
#include <string_view>
#include <tuple>

#include "daemon/common/version.h"
#include "daemon/exporter/text_exposition.h"
#include "proto/buddy_zone.h"
#include "proto/enum_labels.h"
#include "proto/time_format.h"

namespace accelmon {

namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

constexpr MetricKind kGauge = MetricKind::kGauge;
constexpr MetricKind kCounter = MetricKind::kCounter;

void Add(MetricSink& sink, size_t family, const LabelList& labels, double value) {
  sink.Sample(family, labels.span(), value);
}

void Add(MetricSink& sink, size_t family, const LabelList& labels, std::string_view name,
         std::string_view value, double v) {
  sink.Sample(family, labels.With(name, value).span(), v);
}

// An integer as label text, in a buffer of its own (no allocation).
class IntLabel {
 public:
  explicit IntLabel(int64_t value) {
    size_ = static_cast<size_t>(std::to_chars(buf_, buf_ + sizeof buf_, value).ptr - buf_);
  }
  IntLabel(const IntLabel&) = delete;
  IntLabel& operator=(const IntLabel&) = delete;
  std::string_view view() const { return {buf_, size_}; }

 private:
  char buf_[24];
  size_t size_;
};

// A protobuf map's entries sorted by key: map iteration order is unspecified and the exposition
// must be stable. The scratch vector is kept per thread and per map type, so sorting allocates
// nothing once it has grown; the result is valid until the next call for the same map type.
template <typename Map>
const std::vector<const typename Map::value_type*>& SortedByKey(const Map& map) {
  thread_local std::vector<const typename Map::value_type*> sorted;
  sorted.clear();
  for (const auto& entry : map) sorted.push_back(&entry);
  std::sort(sorted.begin(), sorted.end(),
            [](const auto* a, const auto* b) { return a->first < b->first; });
  return sorted;
}

// Pushes a label only when it has a value: Prometheus treats an empty label as no label, and
// leaving it out keeps the exposition short.
void PushIfSet(LabelList& labels, std::string_view name, std::string_view value) {
  if (!value.empty()) labels.Push(name, value);
}

// A device's job: the first of its holders with a job id (docs/jobs.md), empty when none has one.
const v1::DeviceHolder* JobHolder(const v1::DeviceTelemetry& d) {
  for (const v1::DeviceHolder& h : d.holders()) {
    if (!h.job().empty()) return &h;
  }
  return nullptr;
}

// The families every kind of link shares, for hosts and for devices.
class LinkFamilies {
 public:
  enum class Scope { kHost, kDevice };

  LinkFamilies(MetricSink& sink, Scope scope) : sink_(sink) {
    const bool host = scope == Scope::kHost;
    up_ = sink.Family(host ? "accelmon_host_link_up" : "accelmon_device_link_up",
                      "1 while the link is up, 0 when down.", kGauge);
    tx_ = sink.Family(host ? "accelmon_host_link_transmit_bytes_total"
                           : "accelmon_device_link_transmit_bytes_total",
                      "Bytes sent over the link.", kCounter);
    rx_ = sink.Family(host ? "accelmon_host_link_receive_bytes_total"
                           : "accelmon_device_link_receive_bytes_total",
                      "Bytes received over the link.", kCounter);
    tx_packets_ = sink.Family(host ? "accelmon_host_link_transmit_packets_total"
                                   : "accelmon_device_link_transmit_packets_total",
                              "Packets sent over the link.", kCounter);
    rx_packets_ = sink.Family(host ? "accelmon_host_link_receive_packets_total"
                                   : "accelmon_device_link_receive_packets_total",
                              "Packets received over the link.", kCounter);
    max_ = sink.Family(host ? "accelmon_host_link_max_bandwidth_bytes_per_second"
                            : "accelmon_device_link_max_bandwidth_bytes_per_second",
                       "Link capacity in one direction at its current speed and width.", kGauge);
    errors_ =
        sink.Family(host ? "accelmon_host_link_errors_total" : "accelmon_device_link_errors_total",
                    "Link error counters by type.", kCounter);
    mtu_ = sink.Family(host ? "accelmon_host_link_mtu_bytes" : "accelmon_device_link_mtu_bytes",
                       "Link MTU.", kGauge);
    degraded_ = sink.Family(host ? "accelmon_host_link_degraded" : "accelmon_device_link_degraded",
                            "1 while the link works below its rated bandwidth.", kGauge);
  }

  // `labels` identify the owner (node, or node and device); link, kind and peer are added here.
  void Add(const LabelList& labels, const v1::Link& l, bool with_peer) {
    LabelList ll = labels;
    ll.Push("link", l.name());
    ll.Push("kind", LinkKindLabel(l.kind()));
    if (with_peer) ll.Push("peer", l.peer());
    MetricSink& s = sink_;
    if (l.has_up()) accelmon::Add(s, up_, ll, l.up() ? 1 : 0);
    if (l.has_transmit_bytes_total()) {
      accelmon::Add(s, tx_, ll, static_cast<double>(l.transmit_bytes_total()));
    }
    if (l.has_receive_bytes_total()) {
      accelmon::Add(s, rx_, ll, static_cast<double>(l.receive_bytes_total()));
    }
    if (l.has_transmit_packets_total()) {
      accelmon::Add(s, tx_packets_, ll, static_cast<double>(l.transmit_packets_total()));
    }
    if (l.has_receive_packets_total()) {
      accelmon::Add(s, rx_packets_, ll, static_cast<double>(l.receive_packets_total()));
    }
    if (l.has_max_bandwidth_bytes_per_second()) {
      accelmon::Add(s, max_, ll, l.max_bandwidth_bytes_per_second());
    }
    if (l.has_mtu_bytes()) accelmon::Add(s, mtu_, ll, l.mtu_bytes());
    if (l.has_degraded()) accelmon::Add(s, degraded_, ll, l.degraded() ? 1 : 0);
    for (const auto* error : SortedByKey(l.errors_total())) {
      accelmon::Add(s, errors_, ll, "type", error->first, static_cast<double>(error->second));
    }
  }

 private:
  MetricSink& sink_;
  size_t up_, tx_, rx_, tx_packets_, rx_packets_, max_, errors_, mtu_, degraded_;
};

// Plain function pointers, not pointers to member functions: GCC 12's UBSan miscompiles calls
// through the latter (every has_*() read as true).
struct HostMemoryField {
  const char* name;
  const char* help;
  std::optional<uint64_t> (*read)(const v1::HostMemory&);
};

#define ACCELMON_HOST_MEMORY(field, metric, help)                                 \
  HostMemoryField {                                                               \
    metric, help, [](const v1::HostMemory& m) -> std::optional<uint64_t> {        \
      return m.has_##field() ? std::optional<uint64_t>(m.field()) : std::nullopt; \
    }                                                                             \
  }

const HostMemoryField kHostMemory[] = {
    ACCELMON_HOST_MEMORY(total_bytes, "accelmon_host_memory_total_bytes",
                         "Physical memory of the host (MemTotal)."),
    ACCELMON_HOST_MEMORY(available_bytes, "accelmon_host_memory_available_bytes",
                         "Memory available for new work without swapping (MemAvailable)."),
    ACCELMON_HOST_MEMORY(free_bytes, "accelmon_host_memory_free_bytes",
                         "Memory not used at all (MemFree)."),
    ACCELMON_HOST_MEMORY(buffers_bytes, "accelmon_host_memory_buffers_bytes",
                         "Block device buffers (Buffers)."),
    ACCELMON_HOST_MEMORY(cached_bytes, "accelmon_host_memory_cached_bytes", "Page cache (Cached)."),
    ACCELMON_HOST_MEMORY(shmem_bytes, "accelmon_host_memory_shmem_bytes",
                         "Shared memory and tmpfs (Shmem)."),
    ACCELMON_HOST_MEMORY(slab_reclaimable_bytes, "accelmon_host_memory_slab_reclaimable_bytes",
                         "Reclaimable kernel slab (SReclaimable)."),
    ACCELMON_HOST_MEMORY(slab_unreclaimable_bytes, "accelmon_host_memory_slab_unreclaimable_bytes",
                         "Unreclaimable kernel slab (SUnreclaim)."),
    ACCELMON_HOST_MEMORY(dirty_bytes, "accelmon_host_memory_dirty_bytes",
                         "Memory waiting to be written back (Dirty)."),
    ACCELMON_HOST_MEMORY(writeback_bytes, "accelmon_host_memory_writeback_bytes",
                         "Memory being written back (Writeback)."),
    ACCELMON_HOST_MEMORY(swap_total_bytes, "accelmon_host_memory_swap_total_bytes",
                         "Swap space (SwapTotal)."),
    ACCELMON_HOST_MEMORY(swap_free_bytes, "accelmon_host_memory_swap_free_bytes",
                         "Unused swap space (SwapFree)."),
    ACCELMON_HOST_MEMORY(hugepages_total, "accelmon_host_memory_hugepages",
                         "Huge pages in the pool (HugePages_Total)."),
    ACCELMON_HOST_MEMORY(hugepages_free, "accelmon_host_memory_hugepages_free",
                         "Huge pages not allocated (HugePages_Free)."),
    ACCELMON_HOST_MEMORY(hugepage_size_bytes, "accelmon_host_memory_hugepage_size_bytes",
                         "Size of a huge page (Hugepagesize)."),
};
#undef ACCELMON_HOST_MEMORY

// The node's own series: liveness, its agent's collectors and its agent's health.
class NodeFamilies {
 public:
  explicit NodeFamilies(MetricSink& s)
      : sink_(s),
        up_(s.Family("accelmon_node_up",
                     "1 while the node's agent reports, 0 after three missed intervals.", kGauge)),
        last_(s.Family("accelmon_node_last_report_timestamp_seconds",
                       "Node clock time of the node's latest report.", kGauge)),
        collector_success_(s.Family("accelmon_agent_collector_success",
                                    "1 when the collector read its source in the latest report.",
                                    kGauge)),
        collector_duration_(s.Family("accelmon_agent_collector_duration_seconds",
                                     "Time the collector took in the latest report.", kGauge)),
        agent_dropped_(s.Family(
            "accelmon_agent_dropped_reports_total",
            "Reports the agent dropped: its spool was full, or the exporter can never accept them.",
            kCounter)),
        agent_spool_(s.Family("accelmon_agent_spool_reports",
                              "Reports waiting in the agent's spool for acknowledgement.", kGauge)),
        agent_resent_(s.Family(
            "accelmon_agent_resent_reports_total",
            "Reports the agent sent again after a reconnect or failover because they were not "
            "acknowledged; after a failover the next exporter applies those the first had applied "
            "a second time.",
            kCounter)),
        push_rejected_(s.Family("accelmon_agent_push_rejected_total",
                                "Allocator statistics pushes the agent refused, by reason.",
                                kCounter)) {}

  void Add(const NodeEntry& entry, const LabelList& node, Clock::time_point now) {
    const v1::NodeReport& r = *entry.report;
    MetricSink& s = sink_;
    accelmon::Add(s, up_, node, NodeIsUp(entry, now) ? 1 : 0);
    accelmon::Add(s, last_, node, ToSeconds(r.timestamp()));

    for (const auto& c : r.collectors()) {
      accelmon::Add(s, collector_success_, node, "collector", c.name(), c.success() ? 1 : 0);
      accelmon::Add(s, collector_duration_, node, "collector", c.name(), c.duration_seconds());
    }
    if (!r.has_agent()) return;
    const v1::AgentStats& agent = r.agent();
    if (agent.has_dropped_reports_total()) {
      accelmon::Add(s, agent_dropped_, node, static_cast<double>(agent.dropped_reports_total()));
    }
    if (agent.has_spool_reports()) {
      accelmon::Add(s, agent_spool_, node, static_cast<double>(agent.spool_reports()));
    }
    if (agent.has_resent_reports_total()) {
      accelmon::Add(s, agent_resent_, node, static_cast<double>(agent.resent_reports_total()));
    }
    for (const auto* rejected : SortedByKey(agent.push_rejected_total())) {
      accelmon::Add(s, push_rejected_, node, "reason", rejected->first,
                    static_cast<double>(rejected->second));
    }
  }

 private:
  MetricSink& sink_;
  const size_t up_, last_, collector_success_, collector_duration_, agent_dropped_, agent_spool_,
      agent_resent_, push_rejected_;
};

// The host's series: memory, the kernel's memory health, links and sensors.
class HostFamilies {
 public:
  explicit HostFamilies(MetricSink& s)
      : sink_(s),
        memory_(MemoryFamilies(s)),
        oom_kills_(s.Family("accelmon_host_oom_kills_total",
                            "Processes killed by the kernel's OOM killer since boot.", kCounter)),
        pressure_(s.Family("accelmon_host_memory_pressure_seconds_total",
                           "Time tasks stalled on memory (PSI): some = at least one task, "
                           "full = all non-idle tasks.",
                           kCounter)),
        free_blocks_(s.Family("accelmon_host_memory_free_blocks",
                              "Free blocks of 2^order pages (buddyinfo).", kGauge)),
        unusable_(s.Family("accelmon_host_memory_unusable_free_ratio",
                           "Share of free memory that cannot serve an allocation of "
                           "2^order pages (unusable free space index).",
                           kGauge)),
        links_(s, LinkFamilies::Scope::kHost),
        temperature_(s.Family("accelmon_host_temperature_celsius",
                              "Host temperature sensors (thermal zones, hwmon).", kGauge)),
        power_(s.Family("accelmon_host_power_watts", "Host power sensors (hwmon).", kGauge)) {}

  void Add(const std::string& node_name, const LabelList& node, const v1::HostTelemetry& host) {
    AddMemory(node, host);
    AddBuddyinfo(node_name, host);
    for (const v1::Link& l : host.links()) links_.Add(node, l, /*with_peer=*/false);
    AddSensors(node_name, host);
  }

 private:
  static std::array<size_t, std::size(kHostMemory)> MemoryFamilies(MetricSink& s) {
    std::array<size_t, std::size(kHostMemory)> out;
    for (size_t i = 0; i < std::size(kHostMemory); ++i) {
      out[i] = s.Family(kHostMemory[i].name, kHostMemory[i].help, kGauge);
    }
    return out;
  }

  // /proc/meminfo, the OOM killer and memory pressure.
  void AddMemory(const LabelList& node, const v1::HostTelemetry& host) {
    MetricSink& s = sink_;
    for (size_t i = 0; i < std::size(kHostMemory); ++i) {
      if (const auto value = kHostMemory[i].read(host.memory())) {
        accelmon::Add(s, memory_[i], node, static_cast<double>(*value));
      }
    }
    if (host.vmstat().has_oom_kill_total()) {
      accelmon::Add(s, oom_kills_, node, static_cast<double>(host.vmstat().oom_kill_total()));
    }
    if (host.memory_pressure().has_some_total_us()) {
      accelmon::Add(s, pressure_, node, "kind", "some",
                    static_cast<double>(host.memory_pressure().some_total_us()) / 1e6);
    }
    if (host.memory_pressure().has_full_total_us()) {
      accelmon::Add(s, pressure_, node, "kind", "full",
                    static_cast<double>(host.memory_pressure().full_total_us()) / 1e6);
    }
  }

  // Free blocks by NUMA node, zone and order, and how unusable they are.
  void AddBuddyinfo(const std::string& node_name, const v1::HostTelemetry& host) {
    MetricSink& s = sink_;
    for (const v1::BuddyZone& zone : host.buddyinfo()) {
      const IntLabel numa_node(zone.numa_node());
      for (int order = 0; order < zone.free_blocks_size(); ++order) {
        const IntLabel order_text(order);
        const LabelList zl{{"node", node_name},
                           {"numa_node", numa_node.view()},
                           {"zone", zone.zone()},
                           {"order", order_text.view()}};
        accelmon::Add(s, free_blocks_, zl, static_cast<double>(zone.free_blocks(order)));
        if (const auto ratio = UnusableFreeIndex(zone, static_cast<unsigned>(order))) {
          accelmon::Add(s, unusable_, zl, *ratio);
        }
      }
    }
  }

  // Thermal zones and hwmon: temperatures and power.
  void AddSensors(const std::string& node_name, const v1::HostTelemetry& host) {
    MetricSink& s = sink_;
    for (const v1::TemperatureSensor& t : host.temperatures()) {
      if (!t.has_celsius()) continue;
      accelmon::Add(s, temperature_,
                    {{"node", node_name}, {"chip", t.chip()}, {"sensor", t.sensor()}}, t.celsius());
    }
    for (const v1::PowerSensor& p : host.power_sensors()) {
      if (!p.has_watts()) continue;
      accelmon::Add(s, power_, {{"node", node_name}, {"chip", p.chip()}, {"sensor", p.sensor()}},
                    p.watts());
    }
  }

  MetricSink& sink_;
  const std::array<size_t, std::size(kHostMemory)> memory_;
  const size_t oom_kills_, pressure_, free_blocks_, unusable_;
  LinkFamilies links_;
  const size_t temperature_, power_;
};

// Each device's series: identity, memory, thermal, power, utilization and clocks, errors, links,
// who holds it, and the processes on it (the driver's accounting and their allocators' pushes).
class DeviceFamilies {
 public:
  explicit DeviceFamilies(MetricSink& s)
      : sink_(s),
        info_(s.Family("accelmon_device_info",
                       "1 per device; firmware, driver and PCI bus id as labels.", kGauge)),
        up_(s.Family("accelmon_device_up", "1 while the device answers, 0 once it is lost.",
                     kGauge)),
        mem_total_(s.Family("accelmon_device_memory_total_bytes", "Device memory.", kGauge)),
        mem_used_(s.Family("accelmon_device_memory_used_bytes", "Device memory in use.", kGauge)),
        mem_free_(
            s.Family("accelmon_device_memory_free_bytes", "Device memory not in use.", kGauge)),
        mem_reserved_(s.Family("accelmon_device_memory_reserved_bytes",
                               "Device memory reserved by driver and firmware.", kGauge)),
        mem_largest_(s.Family("accelmon_device_memory_largest_free_block_bytes",
                              "The largest single allocation that could succeed now.", kGauge)),
        mem_frag_(
            s.Family("accelmon_device_memory_fragmentation_ratio",
                     "1 - largest free block / free memory, counting memory free inside processes' "
                     "allocator caches (0 = unfragmented).",
                     kGauge)),
        temp_(s.Family("accelmon_device_temperature_celsius", "Device temperature by sensor.",
                       kGauge)),
        temp_threshold_(s.Family("accelmon_device_temperature_threshold_celsius",
                                 "Temperature at which the device slows down or shuts down.",
                                 kGauge)),
        throttled_(s.Family("accelmon_device_throttled",
                            "1 while the device is throttled for that reason.", kGauge)),
        power_(s.Family("accelmon_device_power_watts", "Board power draw.", kGauge)),
        power_limit_(
            s.Family("accelmon_device_power_limit_watts", "Enforced power limit.", kGauge)),
        energy_(s.Family("accelmon_device_energy_joules_total",
                         "Energy consumed since the driver loaded.", kCounter)),
        util_(s.Family("accelmon_device_utilization_ratio",
                       "Share of time the engine was busy, by kind.", kGauge)),
        clock_(s.Family("accelmon_device_clock_hertz", "Current clock, by kind.", kGauge)),
        ecc_(s.Family("accelmon_device_ecc_errors_total", "ECC errors since the driver loaded.",
                      kCounter)),
        remapped_(s.Family("accelmon_device_remapped_rows",
                           "Memory rows remapped, by the kind of error that caused it.", kGauge)),
        remap_pending_(s.Family("accelmon_device_remapped_rows_pending",
                                "1 while a row remap waits for the next device reset.", kGauge)),
        remap_failure_(s.Family("accelmon_device_remapped_rows_failure",
                                "1 when row remapping failed: the device needs service.", kGauge)),
        ecc_lifetime_(s.Family("accelmon_device_ecc_errors_lifetime_total",
                               "ECC errors over the device's lifetime, kept across driver reloads "
                               "and reboots.",
                               kCounter)),
        ecc_location_(s.Family("accelmon_device_ecc_errors_by_location_total",
                               "ECC errors since the driver loaded, by where in the device they "
                               "were counted.",
                               kCounter)),
        ecc_location_lifetime_(s.Family("accelmon_device_ecc_errors_by_location_lifetime_total",
                                        "ECC errors over the device's lifetime, by where in the "
                                        "device they were counted.",
                                        kCounter)),
        retired_(s.Family("accelmon_device_retired_pages",
                          "Memory pages retired after ECC errors, by cause, pending ones included.",
                          kGauge)),
        retired_pending_(s.Family("accelmon_device_retired_pages_pending",
                                  "1 while a retired page waits for the next driver reload.",
                                  kGauge)),
        fan_(s.Family("accelmon_device_fan_speed_ratio",
                      "Fan speed as a share of its maximum intended speed (may exceed 1).",
                      kGauge)),
        violation_(s.Family("accelmon_device_clock_violation_seconds_total",
                            "Time the clocks were held below their application target, by the "
                            "limiter that held them.",
                            kCounter)),
        activity_(s.Family(
            "accelmon_device_activity_ratio",
            "What the device's units did over the last collection interval, by "
            "kind (profiling counters: SM, occupancy, tensor, FP pipes, DRAM, vector cores).",
            kGauge)),
        compute_die_(s.Family("accelmon_device_compute_die_activity_ratio",
                              "Share of the last collection interval each compute die (AMD "
                              "XCD) was busy.",
                              kGauge)),
        bus_(s.Family("accelmon_device_bus_bytes_per_second",
                      "Bus traffic over the last collection interval, by bus and direction.",
                      kGauge)),
        pstate_(s.Family("accelmon_device_performance_state",
                         "Performance state: 0 (P0, maximum performance) to 15.", kGauge)),
        persistence_(s.Family("accelmon_device_persistence_mode",
                              "1 when persistence mode keeps the driver initialised without "
                              "clients.",
                              kGauge)),
        mig_mode_(s.Family("accelmon_device_mig_mode",
                           "1 when the GPU is partitioned into MIG devices, which report as "
                           "devices of their own.",
                           kGauge)),
        mig_info_(s.Family("accelmon_device_mig_info",
                           "1 per MIG device: the GPU it is part of (parent_device, parent_uuid), "
                           "its GPU and compute instance and its profile.",
                           kGauge)),
        links_(s, LinkFamilies::Scope::kDevice),
        job_info_(s.Family("accelmon_device_job_info",
                           "1 per device and holder (Kubernetes container, Slurm step, or the "
                           "other processes of one user); who holds the device as labels.",
                           kGauge)),
        job_(s.Family("accelmon_device_job",
                      "1 per device that belongs to a job: its first holder with a job id. At "
                      "most one per device, the series to join device series to their job on "
                      "(node, device).",
                      kGauge)),
        proc_used_(s.Family("accelmon_device_process_memory_used_bytes",
                            "Device memory the driver accounts to the process (NVML, amdgpu "
                            "fdinfo); at most 256 processes per device.",
                            kGauge)),
        proc_reserved_(s.Family("accelmon_process_memory_reserved_bytes",
                                "Device memory the process's caching allocator holds (pushed).",
                                kGauge)),
        proc_allocated_(s.Family(
            "accelmon_process_memory_allocated_bytes",
            "Device memory the process's allocator has handed out to tensors (pushed).", kGauge)),
        proc_ooms_(s.Family("accelmon_process_allocator_ooms_total",
                            "Out-of-memory errors the process's allocator raised (pushed).",
                            kCounter)),
        proc_retries_(s.Family(
            "accelmon_process_allocator_retries_total",
            "Allocations that succeeded only after the allocator freed its cache (pushed).",
            kCounter)),
        proc_steps_(s.Family("accelmon_process_training_steps_total",
                             "Training steps the process reported (pushed).", kCounter)) {}

  void Add(const std::string& node_name, const v1::DeviceTelemetry& d) {
    const auto& id = d.identity();
    const IntLabel index(id.index());
    const LabelList dl{{"node", node_name},
                       {"device", index.view()},
                       {"uuid", id.uuid()},
                       {"vendor", id.vendor()},
                       {"model", id.model()}};
    LabelList info_labels = dl;
    info_labels.Push("firmware", id.firmware_version());
    info_labels.Push("driver", id.driver_version());
    info_labels.Push("pci_bus_id", id.pci_bus_id());
    accelmon::Add(sink_, info_, info_labels, 1);
    if (id.has_mig()) AddMigInfo(dl, id.mig());
    if (d.has_up()) accelmon::Add(sink_, up_, dl, d.up() ? 1 : 0);
    AddMemory(dl, d.memory());
    AddThermal(dl, d.thermal());
    AddPowerAndActivity(dl, d);
    AddErrors(dl, d.errors());
    for (const v1::Link& l : d.links()) links_.Add(dl, l, /*with_peer=*/true);
    AddHolders(node_name, index.view(), d);
    for (const v1::ProcessMemory& pm : d.processes()) AddProcess(dl, pm);
  }

 private:
  void AddMemory(const LabelList& dl, const v1::DeviceMemory& m) {
    MetricSink& s = sink_;
    if (m.has_total_bytes()) accelmon::Add(s, mem_total_, dl, static_cast<double>(m.total_bytes()));
    if (m.has_used_bytes()) accelmon::Add(s, mem_used_, dl, static_cast<double>(m.used_bytes()));
    if (m.has_free_bytes()) accelmon::Add(s, mem_free_, dl, static_cast<double>(m.free_bytes()));
    if (m.has_reserved_bytes()) {
      accelmon::Add(s, mem_reserved_, dl, static_cast<double>(m.reserved_bytes()));
    }
    if (m.has_largest_free_block_bytes()) {
      accelmon::Add(s, mem_largest_, dl, static_cast<double>(m.largest_free_block_bytes()));
    }
    if (m.has_fragmentation_ratio()) accelmon::Add(s, mem_frag_, dl, m.fragmentation_ratio());
  }

  void AddThermal(const LabelList& dl, const v1::DeviceThermal& t) {
    MetricSink& s = sink_;
    if (t.has_core_celsius()) accelmon::Add(s, temp_, dl, "sensor", "core", t.core_celsius());
    if (t.has_memory_celsius()) {
      accelmon::Add(s, temp_, dl, "sensor", "memory", t.memory_celsius());
    }
    if (t.has_slowdown_threshold_celsius()) {
      accelmon::Add(s, temp_threshold_, dl, "threshold", "slowdown",
                    t.slowdown_threshold_celsius());
    }
    if (t.has_shutdown_threshold_celsius()) {
      accelmon::Add(s, temp_threshold_, dl, "threshold", "shutdown",
                    t.shutdown_threshold_celsius());
    }
    for (const auto* reason : SortedByKey(t.throttle_reasons())) {
      accelmon::Add(s, throttled_, dl, "reason", reason->first, reason->second ? 1 : 0);
    }
    if (t.has_fan_speed_ratio()) accelmon::Add(s, fan_, dl, t.fan_speed_ratio());
  }

  // Power and energy, utilization and clocks.
  void AddPowerAndActivity(const LabelList& dl, const v1::DeviceTelemetry& d) {
    MetricSink& s = sink_;
    const auto& p = d.power();
    if (p.has_usage_watts()) accelmon::Add(s, power_, dl, p.usage_watts());
    if (p.has_limit_watts()) accelmon::Add(s, power_limit_, dl, p.limit_watts());
    if (p.has_energy_joules_total()) accelmon::Add(s, energy_, dl, p.energy_joules_total());

    const auto& u = d.utilization();
    if (u.has_compute_ratio()) accelmon::Add(s, util_, dl, "kind", "compute", u.compute_ratio());
    if (u.has_memory_bandwidth_ratio()) {
      accelmon::Add(s, util_, dl, "kind", "memory_bandwidth", u.memory_bandwidth_ratio());
    }
    if (d.clocks().has_compute_hz()) {
      accelmon::Add(s, clock_, dl, "kind", "compute", d.clocks().compute_hz());
    }
    if (d.clocks().has_memory_hz()) {
      accelmon::Add(s, clock_, dl, "kind", "memory", d.clocks().memory_hz());
    }
    AddViolations(dl, d.clocks());
    AddActivity(dl, d.activity());
    const v1::DeviceState& st = d.state();
    if (st.has_performance_state()) {
      accelmon::Add(s, pstate_, dl, static_cast<double>(st.performance_state()));
    }
    if (st.has_mig_enabled()) accelmon::Add(s, mig_mode_, dl, st.mig_enabled() ? 1 : 0);
    if (st.has_persistence_mode()) {
      accelmon::Add(s, persistence_, dl, st.persistence_mode() ? 1 : 0);
    }
  }

  void AddViolations(const LabelList& dl, const v1::DeviceClocks& c) {
    using Has = bool (v1::DeviceClocks::*)() const;
    using Get = double (v1::DeviceClocks::*)() const;
    static constexpr std::tuple<std::string_view, Has, Get> kReasons[] = {
        {"power", &v1::DeviceClocks::has_power_violation_seconds_total,
         &v1::DeviceClocks::power_violation_seconds_total},
        {"thermal", &v1::DeviceClocks::has_thermal_violation_seconds_total,
         &v1::DeviceClocks::thermal_violation_seconds_total},
        {"sync_boost", &v1::DeviceClocks::has_sync_boost_violation_seconds_total,
         &v1::DeviceClocks::sync_boost_violation_seconds_total},
        {"board_limit", &v1::DeviceClocks::has_board_limit_violation_seconds_total,
         &v1::DeviceClocks::board_limit_violation_seconds_total},
        {"low_utilization", &v1::DeviceClocks::has_low_utilization_violation_seconds_total,
         &v1::DeviceClocks::low_utilization_violation_seconds_total},
        {"reliability", &v1::DeviceClocks::has_reliability_violation_seconds_total,
         &v1::DeviceClocks::reliability_violation_seconds_total},
    };
    for (const auto& [reason, has, get] : kReasons) {
      if ((c.*has)()) accelmon::Add(sink_, violation_, dl, "reason", reason, (c.*get)());
    }
  }

  void AddActivity(const LabelList& dl, const v1::DeviceActivity& a) {
    using Has = bool (v1::DeviceActivity::*)() const;
    using Get = double (v1::DeviceActivity::*)() const;
    using A = v1::DeviceActivity;
    static constexpr std::tuple<std::string_view, Has, Get> kKinds[] = {
        {"graphics_engine", &A::has_graphics_engine_ratio, &A::graphics_engine_ratio},
        {"sm", &A::has_sm_ratio, &A::sm_ratio},
        {"sm_occupancy", &A::has_sm_occupancy_ratio, &A::sm_occupancy_ratio},
        {"tensor", &A::has_tensor_ratio, &A::tensor_ratio},
        {"tensor_dfma", &A::has_tensor_dfma_ratio, &A::tensor_dfma_ratio},
        {"tensor_hmma", &A::has_tensor_hmma_ratio, &A::tensor_hmma_ratio},
        {"tensor_imma", &A::has_tensor_imma_ratio, &A::tensor_imma_ratio},
        {"fp64", &A::has_fp64_ratio, &A::fp64_ratio},
        {"fp32", &A::has_fp32_ratio, &A::fp32_ratio},
        {"fp16", &A::has_fp16_ratio, &A::fp16_ratio},
        {"integer", &A::has_integer_ratio, &A::integer_ratio},
        {"dram_bandwidth", &A::has_dram_bandwidth_ratio, &A::dram_bandwidth_ratio},
        {"vector", &A::has_vector_ratio, &A::vector_ratio},
    };
    for (const auto& [kind, has, get] : kKinds) {
      if ((a.*has)()) accelmon::Add(sink_, activity_, dl, "kind", kind, (a.*get)());
    }
    for (int die = 0; die < a.compute_die_ratios_size(); ++die) {
      const IntLabel die_text(die);
      accelmon::Add(sink_, compute_die_, dl, "die", die_text.view(), a.compute_die_ratios(die));
    }
    static constexpr std::tuple<std::string_view, std::string_view, Has, Get> kBuses[] = {
        {"pcie", "transmit", &A::has_pcie_transmit_bytes_per_second,
         &A::pcie_transmit_bytes_per_second},
        {"pcie", "receive", &A::has_pcie_receive_bytes_per_second,
         &A::pcie_receive_bytes_per_second},
        {"nvlink", "transmit", &A::has_nvlink_transmit_bytes_per_second,
         &A::nvlink_transmit_bytes_per_second},
        {"nvlink", "receive", &A::has_nvlink_receive_bytes_per_second,
         &A::nvlink_receive_bytes_per_second},
    };
    for (const auto& [bus, direction, has, get] : kBuses) {
      if (!(a.*has)()) continue;
      LabelList bl = dl;
      bl.Push("bus", bus);
      bl.Push("direction", direction);
      accelmon::Add(sink_, bus_, bl, (a.*get)());
    }
  }

  void AddMigInfo(const LabelList& dl, const v1::MigInstance& mig) {
    const IntLabel parent(mig.parent_index());
    const IntLabel gi(mig.has_gpu_instance_id() ? mig.gpu_instance_id() : 0);
    const IntLabel ci(mig.has_compute_instance_id() ? mig.compute_instance_id() : 0);
    LabelList l = dl;
    l.Push("parent_device", parent.view());
    l.Push("parent_uuid", mig.parent_uuid());
    // An instance id the driver did not give is an empty label, not 0.
    l.Push("gpu_instance", mig.has_gpu_instance_id() ? gi.view() : std::string_view());
    l.Push("compute_instance", mig.has_compute_instance_id() ? ci.view() : std::string_view());
    l.Push("profile", mig.profile());
    accelmon::Add(sink_, mig_info_, l, 1);
  }

  void AddEccLocation(const LabelList& dl, const v1::EccLocationCounts& l) {
    using Has = bool (v1::EccLocationCounts::*)() const;
    using Get = uint64_t (v1::EccLocationCounts::*)() const;
    using C = v1::EccLocationCounts;
    struct Counter {
      size_t family;
      std::string_view type;
      Has has;
      Get get;
    };
    const Counter counters[] = {
        {ecc_location_, "corrected", &C::has_corrected_total, &C::corrected_total},
        {ecc_location_, "uncorrected", &C::has_uncorrected_total, &C::uncorrected_total},
        {ecc_location_lifetime_, "corrected", &C::has_corrected_lifetime_total,
         &C::corrected_lifetime_total},
        {ecc_location_lifetime_, "uncorrected", &C::has_uncorrected_lifetime_total,
         &C::uncorrected_lifetime_total},
    };
    LabelList ll = dl;
    ll.Push("location", MemoryLocationLabel(l.location()));
    for (const Counter& c : counters) {
      if ((l.*c.has)()) {
        accelmon::Add(sink_, c.family, ll, "type", c.type, static_cast<double>((l.*c.get)()));
      }
    }
  }

  // ECC counts and remapped rows.
  void AddErrors(const LabelList& dl, const v1::DeviceErrors& e) {
    MetricSink& s = sink_;
    if (e.has_ecc_corrected_total()) {
      accelmon::Add(s, ecc_, dl, "type", "corrected", static_cast<double>(e.ecc_corrected_total()));
    }
    if (e.has_ecc_uncorrected_total()) {
      accelmon::Add(s, ecc_, dl, "type", "uncorrected",
                    static_cast<double>(e.ecc_uncorrected_total()));
    }
    if (e.has_remapped_rows_correctable()) {
      accelmon::Add(s, remapped_, dl, "cause", "correctable",
                    static_cast<double>(e.remapped_rows_correctable()));
    }
    if (e.has_remapped_rows_uncorrectable()) {
      accelmon::Add(s, remapped_, dl, "cause", "uncorrectable",
                    static_cast<double>(e.remapped_rows_uncorrectable()));
    }
    if (e.has_remapped_rows_pending()) {
      accelmon::Add(s, remap_pending_, dl, e.remapped_rows_pending() ? 1 : 0);
    }
    if (e.has_remapped_rows_failure()) {
      accelmon::Add(s, remap_failure_, dl, e.remapped_rows_failure() ? 1 : 0);
    }
    if (e.has_ecc_corrected_lifetime_total()) {
      accelmon::Add(s, ecc_lifetime_, dl, "type", "corrected",
                    static_cast<double>(e.ecc_corrected_lifetime_total()));
    }
    if (e.has_ecc_uncorrected_lifetime_total()) {
      accelmon::Add(s, ecc_lifetime_, dl, "type", "uncorrected",
                    static_cast<double>(e.ecc_uncorrected_lifetime_total()));
    }
    for (const v1::EccLocationCounts& l : e.ecc_by_location()) AddEccLocation(dl, l);
    if (e.has_retired_pages_single_bit()) {
      accelmon::Add(s, retired_, dl, "cause", "single_bit",
                    static_cast<double>(e.retired_pages_single_bit()));
    }
    if (e.has_retired_pages_double_bit()) {
      accelmon::Add(s, retired_, dl, "cause", "double_bit",
                    static_cast<double>(e.retired_pages_double_bit()));
    }
    if (e.has_retired_pages_pending()) {
      accelmon::Add(s, retired_pending_, dl, e.retired_pages_pending() ? 1 : 0);
    }
  }

  // Who holds the device: one info series per holder, and the device's job for joins. The job
  // label is job_id, not job: Prometheus attaches its own `job` (the scrape job) to every series
  // and would rename ours to exported_job.
  void AddHolders(std::string_view node, std::string_view device, const v1::DeviceTelemetry& d) {
    MetricSink& s = sink_;
    const LabelList base{{"node", node}, {"device", device}, {"uuid", d.identity().uuid()}};
    for (const v1::DeviceHolder& h : d.holders()) {
      LabelList hl = base;
      PushIfSet(hl, "kind", HolderKindLabel(h.kind()));
      PushIfSet(hl, "job_id", h.job());
      PushIfSet(hl, "pod", h.pod());
      PushIfSet(hl, "namespace", h.namespace_());
      PushIfSet(hl, "container", h.container());
      PushIfSet(hl, "step", h.step());
      PushIfSet(hl, "user", h.user());
      PushIfSet(hl, "rank", h.rank());
      // Kubernetes DRA's claim and the pod's uid: on the info series only, for joins by claim
      // or uid, never on the device's own series.
      PushIfSet(hl, "claim", h.claim());
      PushIfSet(hl, "claim_namespace", h.claim_namespace());
      PushIfSet(hl, "pod_uid", h.pod_uid());
      accelmon::Add(s, job_info_, hl, 1);
    }
    if (const v1::DeviceHolder* h = JobHolder(d)) {
      LabelList jl{{"node", node}, {"device", device}, {"job_id", h->job()}};
      PushIfSet(jl, "rank", h->rank());
      accelmon::Add(s, job_, jl, 1);
    }
  }

  void AddProcess(const LabelList& dl, const v1::ProcessMemory& pm) {
    MetricSink& s = sink_;
    const IntLabel pid(pm.pid());
    LabelList pl = dl;
    pl.Push("pid", pid.view());
    PushIfSet(pl, "job_id", pm.job());
    PushIfSet(pl, "rank", pm.rank());
    if (pm.has_used_bytes()) accelmon::Add(s, proc_used_, pl, static_cast<double>(pm.used_bytes()));
    if (pm.has_reserved_bytes()) {
      accelmon::Add(s, proc_reserved_, pl, static_cast<double>(pm.reserved_bytes()));
    }
    if (pm.has_allocated_bytes()) {
      accelmon::Add(s, proc_allocated_, pl, static_cast<double>(pm.allocated_bytes()));
    }
    if (pm.has_ooms_total()) accelmon::Add(s, proc_ooms_, pl, static_cast<double>(pm.ooms_total()));
    if (pm.has_alloc_retries_total()) {
      accelmon::Add(s, proc_retries_, pl, static_cast<double>(pm.alloc_retries_total()));
    }
    if (pm.has_steps_total()) {
      accelmon::Add(s, proc_steps_, pl, static_cast<double>(pm.steps_total()));
    }
  }

  MetricSink& sink_;
  const size_t info_, up_, mem_total_, mem_used_, mem_free_, mem_reserved_, mem_largest_, mem_frag_,
      temp_, temp_threshold_, throttled_, power_, power_limit_, energy_, util_, clock_, ecc_,
      remapped_, remap_pending_, remap_failure_, ecc_lifetime_, ecc_location_,
      ecc_location_lifetime_, retired_, retired_pending_, fan_, violation_, activity_, compute_die_,
      bus_, pstate_, persistence_, mig_mode_, mig_info_;
  LinkFamilies links_;
  const size_t job_info_, job_, proc_used_, proc_reserved_, proc_allocated_, proc_ooms_,
      proc_retries_, proc_steps_;
};

// Collects samples as prometheus-cpp metric families.
class MetricFamilySink final : public MetricSink {
 public:
  size_t Family(std::string_view name, std::string_view help, MetricKind kind) override {
    families_.push_back(MetricFamily{std::string(name),
                                     std::string(help),
                                     kind == kCounter ? MetricType::Counter : MetricType::Gauge,
                                     {}});
    return families_.size() - 1;
  }

  void Sample(size_t family, std::span<const Label> labels, double value) override {
    MetricFamily& f = families_[family];
    ClientMetric& m = f.metric.emplace_back();
    m.label.reserve(labels.size());
    for (const Label& l : labels) m.label.push_back({std::string(l.name), std::string(l.value)});
    if (f.type == MetricType::Counter) {
      m.counter.value = value;
    } else {
      m.gauge.value = value;
    }
  }

  std::vector<MetricFamily> Take() && {
    std::vector<MetricFamily> out;
    out.reserve(families_.size());
    for (auto& f : families_) {
      if (!f.metric.empty()) out.push_back(std::move(f));
    }
    return out;
  }

 private:
  std::deque<MetricFamily> families_;
};

// NCCL's view of its communicators (collectors/nccl_ras.h): per node, the communicators it has
// ranks in; its own ranks' collective counts, and every rank it lists (its own, and the others'
// that are not OK or lag) with its state and how far it is behind.
class CollectiveFamilies {
 public:
  explicit CollectiveFamilies(MetricSink& s)
      : sink_(s),
        ranks_(s.Family("accelmon_nccl_communicator_ranks",
                        "Ranks in the NCCL communicator (NCCL RAS), per node that has ranks in it.",
                        kGauge)),
        missing_(s.Family("accelmon_nccl_communicator_missing_ranks",
                          "Ranks of the communicator NCCL RAS got no data from (missing, "
                          "unresponsive or dead).",
                          kGauge)),
        max_(s.Family("accelmon_nccl_communicator_collectives_max",
                      "The most collectives any rank of the communicator has launched.", kGauge)),
        collectives_(s.Family("accelmon_nccl_rank_collectives_total",
                              "Collectives this node's rank has launched (all kinds, NCCL RAS).",
                              kCounter)),
        state_(s.Family("accelmon_nccl_rank_state",
                        "1 per rank the node lists, by state: its own ranks, and the others' that "
                        "are not ok or lag (host names those).",
                        kGauge)),
        behind_(s.Family("accelmon_nccl_rank_collectives_behind",
                         "Collectives a rank is behind the communicator's most advanced rank, for "
                         "the ranks that lag.",
                         kGauge)) {}

  void Add(const std::string& node_name, const v1::Communicator& c) {
    const LabelList cl{{"node", node_name}, {"communicator", c.hash()}};
    accelmon::Add(sink_, ranks_, cl, c.size());
    accelmon::Add(sink_, missing_, cl, c.missing_ranks());
    if (c.has_collectives_max()) {
      accelmon::Add(sink_, max_, cl, static_cast<double>(c.collectives_max()));
    }
    for (const v1::CommunicatorRank& r : c.ranks()) {
      const IntLabel rank(r.rank());
      LabelList rl = cl;
      rl.Push("rank", rank.view());
      std::optional<IntLabel> device;
      if (r.has_device()) device.emplace(r.device());
      if (device) rl.Push("device", device->view());
      if (!r.local()) rl.Push("host", r.host());
      if (r.local() && r.has_collectives()) {
        accelmon::Add(sink_, collectives_, rl, static_cast<double>(r.collectives()));
      }
      accelmon::Add(sink_, state_, rl, "state", RankStateLabel(r.state()), 1);
      if (r.has_collectives() && c.has_collectives_max() && r.collectives() < c.collectives_max()) {
        accelmon::Add(sink_, behind_, rl,
                      static_cast<double>(c.collectives_max() - r.collectives()));
      }
    }
  }

 private:
  MetricSink& sink_;
  const size_t ranks_, missing_, max_, collectives_, state_, behind_;
};

}  // namespace

void EmitNodes(const std::vector<NodeEntry>& nodes, Clock::time_point now, MetricSink& s) {
  // Declared in this order, the order of the exposition's families: node, host, device.
  NodeFamilies node_families(s);
  HostFamilies host_families(s);
  DeviceFamilies device_families(s);
  CollectiveFamilies collective_families(s);
  for (const NodeEntry& entry : nodes) {
    const v1::NodeReport& r = *entry.report;
    const LabelList node_labels{{"node", r.node()}};
    node_families.Add(entry, node_labels, now);
    host_families.Add(r.node(), node_labels, r.host());
    for (const v1::DeviceTelemetry& d : r.devices()) device_families.Add(r.node(), d);
    for (const v1::Communicator& c : r.communicators()) collective_families.Add(r.node(), c);
  }
}

namespace {

// One device of a job, or one process of a job with a known step rate, in the scrape being
// rendered (views into the snapshot's reports).
struct JobDevice {
  std::string_view job;
  size_t node;  // index into the snapshot
  std::optional<double> compute;
};
struct JobProcess {
  std::string_view job;
  size_t node;
  uint32_t pid;
  double steps_per_second;
};

// min, median and max of `values`, which it sorts; nothing when empty.
void AddStats(MetricSink& s, size_t family, std::string_view job, std::vector<double>& values) {
  if (values.empty()) return;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  const double median = n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
  Add(s, family, {{"job_id", job}, {"stat", "min"}}, values.front());
  Add(s, family, {{"job_id", job}, {"stat", "median"}}, median);
  Add(s, family, {{"job_id", job}, {"stat", "max"}}, values.back());
}

}  // namespace

void EmitJobs(const std::vector<NodeEntry>& nodes, MetricSink& s) {
  const size_t devices_family = s.Family(
      "accelmon_job_devices", "Devices whose job (first holder with a job id) this is.", kGauge);
  const size_t nodes_family =
      s.Family("accelmon_job_nodes", "Nodes with at least one device of the job.", kGauge);
  const size_t utilization_family =
      s.Family("accelmon_job_utilization_ratio",
               "Compute utilization of the job's devices: min, median and max over those that "
               "report it.",
               kGauge);
  const size_t steps_family = s.Family(
      "accelmon_job_step_rate",
      "Training steps per second of the job's processes that push a step counter, each over at "
      "least its last 10 s: min, median and max over the processes.",
      kGauge);

  // Scratch kept per thread: a steady-state scrape allocates nothing here.
  thread_local std::vector<JobDevice> devices;
  thread_local std::vector<JobProcess> processes;
  thread_local std::vector<double> values;
  devices.clear();
  processes.clear();
  for (size_t n = 0; n < nodes.size(); ++n) {
    const v1::NodeReport& r = *nodes[n].report;
    for (const v1::DeviceTelemetry& d : r.devices()) {
      const v1::DeviceHolder* h = JobHolder(d);
      if (!h) continue;
      devices.push_back({h->job(), n,
                         d.utilization().has_compute_ratio()
                             ? std::optional(d.utilization().compute_ratio())
                             : std::nullopt});
    }
    if (!nodes[n].step_rates) continue;
    for (const StepRate& rate : *nodes[n].step_rates) {
      for (const v1::DeviceTelemetry& d : r.devices()) {
        if (d.identity().index() != rate.device_index) continue;
        if (const v1::DeviceHolder* h = JobHolder(d)) {
          processes.push_back({h->job(), n, rate.pid, rate.steps_per_second});
        }
        break;
      }
    }
  }
  std::sort(devices.begin(), devices.end(), [](const JobDevice& a, const JobDevice& b) {
    return std::tie(a.job, a.node) < std::tie(b.job, b.node);
  });
  // A process using several devices of its job counts once.
  std::sort(processes.begin(), processes.end(), [](const JobProcess& a, const JobProcess& b) {
    return std::tie(a.job, a.node, a.pid) < std::tie(b.job, b.node, b.pid);
  });
  processes.erase(std::unique(processes.begin(), processes.end(),
                              [](const JobProcess& a, const JobProcess& b) {
                                return a.job == b.job && a.node == b.node && a.pid == b.pid;
                              }),
                  processes.end());

  auto process = processes.begin();
  for (auto first = devices.begin(); first != devices.end();) {
    const std::string_view job = first->job;
    auto last = first;
    size_t node_count = 0;
    values.clear();
    for (; last != devices.end() && last->job == job; ++last) {
      if (last == first || last->node != (last - 1)->node) ++node_count;
      if (last->compute) values.push_back(*last->compute);
    }
    Add(s, devices_family, {{"job_id", job}}, static_cast<double>(last - first));
    Add(s, nodes_family, {{"job_id", job}}, static_cast<double>(node_count));
    AddStats(s, utilization_family, job, values);
    values.clear();
    while (process != processes.end() && process->job < job) ++process;
    for (; process != processes.end() && process->job == job; ++process) {
      values.push_back(process->steps_per_second);
    }
    AddStats(s, steps_family, job, values);
    first = last;
  }
}

void EmitExporterStats(const ExporterStats& stats, size_t nodes, MetricSink& s,
                       size_t unrecorded_nodes) {
  Add(s,
      s.Family("accelmon_build_info",
               "accelmon version and the git revision it was built from; always 1.", kGauge),
      {{"version", kVersion}, {"revision", kRevision}}, 1);
  Add(s,
      s.Family("accelmon_exporter_reports_ingested_total", "Reports applied to the state.",
               kCounter),
      {}, static_cast<double>(stats.reports_applied.load()));
  Add(s,
      s.Family("accelmon_exporter_reports_duplicate_total",
               "Reports received again after a reconnect and ignored.", kCounter),
      {}, static_cast<double>(stats.reports_duplicate.load()));
  const size_t rejected =
      s.Family("accelmon_exporter_reports_rejected_total", "Reports refused, by reason.", kCounter);
  for (const auto& [reason, count] : stats.rejected()) {
    Add(s, rejected, {{"reason", reason}}, static_cast<double>(count));
  }
  const size_t dropped = s.Family(
      "accelmon_exporter_ingest_dropped_total",
      "Parts of applied reports dropped to keep them within the limits (docs/limits.md), by "
      "reason: collectors, map entries, sensors, buddyinfo zones or orders, and what went to keep "
      "a node within --limits.series-per-node.",
      kCounter);
  for (const auto& [reason, count] : stats.dropped()) {
    Add(s, dropped, {{"reason", reason}}, static_cast<double>(count));
  }
  Add(s, s.Family("accelmon_exporter_streams_active", "Agent streams connected now.", kGauge), {},
      static_cast<double>(stats.streams_active.load()));
  Add(s,
      s.Family("accelmon_exporter_reads_throttled_total",
               "Reads of agent streams deferred because the stream sent reports faster than "
               "--grpc.max-reports-per-second.",
               kCounter),
      {}, static_cast<double>(stats.reads_throttled.load()));
  Add(s, s.Family("accelmon_exporter_nodes", "Nodes in the exporter's state.", kGauge), {},
      static_cast<double>(nodes));
  Add(s,
      s.Family("accelmon_exporter_scrape_duration_seconds",
               "Time the previous scrape took to render.", kGauge),
      {}, stats.last_scrape_seconds.load());
  Add(s,
      s.Family("accelmon_config_last_reload_successful",
               "1 when the last configuration reload (SIGHUP, POST /-/reload) succeeded, 0 when "
               "it failed and the previous configuration stayed.",
               kGauge),
      {}, stats.config_reload_successful.load() ? 1 : 0);
  Add(s,
      s.Family("accelmon_config_last_reload_success_timestamp_seconds",
               "When the configuration was last read successfully (start-up or a reload), as a "
               "Unix time.",
               kGauge),
      {}, stats.config_reload_success_seconds.load());
  Add(s,
      s.Family("accelmon_exporter_state_restored",
               "1 when the exporter started from its recording's state (nodes, open findings), 0 "
               "when it started empty (no --record.dir, or nothing recorded).",
               kGauge),
      {}, stats.restored_nodes.load() + stats.restored_findings.load() > 0 ? 1 : 0);
  if (stats.recording) {
    Add(s,
        s.Family("accelmon_exporter_restored_nodes",
                 "Nodes whose latest report was read back from the recording at start-up.", kGauge),
        {}, static_cast<double>(stats.restored_nodes.load()));
    Add(s,
        s.Family("accelmon_exporter_restored_findings",
                 "Open diagnostics findings read back from the recording directory at start-up.",
                 kGauge),
        {}, static_cast<double>(stats.restored_findings.load()));
  }
  if (stats.recording) {
    const recording::RecorderStats& r = stats.recorder;
    Add(s,
        s.Family("accelmon_exporter_recorded_reports_total",
                 "Reports written to the flight recording (--record.dir).", kCounter),
        {}, static_cast<double>(r.reports.load()));
    Add(s,
        s.Family("accelmon_exporter_recorded_bytes_total",
                 "Bytes appended to the flight recording's segment files.", kCounter),
        {}, static_cast<double>(r.bytes.load()));
    Add(s,
        s.Family("accelmon_exporter_record_errors_total",
                 "Failed writes and syncs of the flight recording (its reports are kept, "
                 "unacknowledged, and written again).",
                 kCounter),
        {}, static_cast<double>(r.errors.load()));
    Add(s,
        s.Family("accelmon_exporter_recorded_again_total",
                 "Reports written to the recording again because the sync after their first "
                 "write failed: the failed sync may have kept them, so they may be in the "
                 "recording twice (replay and restart apply each once).",
                 kCounter),
        {}, static_cast<double>(r.rewritten.load()));
    Add(s,
        s.Family("accelmon_exporter_recording_failing",
                 "1 while the flight recording cannot be written (a full or failing disk): "
                 "reports are not acknowledged and /readyz says why.",
                 kGauge),
        {}, static_cast<double>(r.failing.load()));
    Add(s,
        s.Family("accelmon_exporter_recording_waiting_reports",
                 "Reports held, unacknowledged, until the recording can be written again.", kGauge),
        {}, static_cast<double>(r.waiting.load()));
    Add(s,
        s.Family("accelmon_exporter_acks_waiting",
                 "Reports applied but not acknowledged yet: their ack waits for the recording, "
                 "and for the findings they opened, escalated or closed to be saved.",
                 kGauge),
        {}, static_cast<double>(stats.acks_waiting.load()));
    Add(s,
        s.Family("accelmon_exporter_reports_unrecorded_total",
                 "Reports shown on /metrics, the status page and Watch while the recording could "
                 "not be written, neither recorded nor acknowledged: their agents send them again "
                 "once it can be, and they are recorded then.",
                 kCounter),
        {}, static_cast<double>(stats.reports_unrecorded.load()));
    Add(s,
        s.Family("accelmon_exporter_unrecorded_nodes",
                 "Nodes whose report shown now is not recorded yet (shown while the recording "
                 "could not be written).",
                 kGauge),
        {}, static_cast<double>(unrecorded_nodes));
    Add(s,
        s.Family("accelmon_exporter_recording_segments",
                 "Segment files in the recording directory.", kGauge),
        {}, static_cast<double>(r.segments.load()));
    Add(s,
        s.Family("accelmon_exporter_recording_bytes",
                 "Bytes of the segment files in the recording directory.", kGauge),
        {}, static_cast<double>(r.segment_bytes.load()));
  }
}

void EmitDiagnostics(const DiagnosticsMetrics& d, MetricSink& s) {
  if (!d.enabled) return;
  // The contract with the alerting rules: names and label sets must not change.
  const size_t active = s.Family(
      "accelmon_diagnosis_active",
      "A diagnostics finding open now; always 1 (docs/diagnostics.md). device, link and job_id "
      "are empty when the finding is not about one (job_id: the device's job, or the job of a "
      "job-wide finding); finding is its name (RULE on NODE device D), consequence_of its first "
      "fault's when it likely follows from one.",
      kGauge);
  for (const DiagnosticsMetrics::Active& a : d.active) {
    Add(s, active,
        {{"rule", a.rule},
         {"node", a.node},
         {"device", a.device},
         {"link", a.link},
         {"severity", a.severity},
         // job_id, not job: Prometheus attaches its own `job` (the scrape job) to every series.
         {"job_id", a.job},
         // Both fixed while the finding is open: no new series.
         {"finding", a.name},
         {"consequence_of", a.consequence_of}},
        1);
  }
  const size_t findings = s.Family(
      "accelmon_diagnosis_findings_total",
      "Diagnostics findings opened (or risen to this severity), by rule and severity.", kCounter);
  for (const auto& [key, count] : d.opened) {
    Add(s, findings, {{"rule", key.first}, {"severity", key.second}}, static_cast<double>(count));
  }
  Add(s,
      s.Family("accelmon_exporter_diagnosis_reports_total",
               "Reports the diagnostics engine processed.", kCounter),
      {}, static_cast<double>(d.reports));
  Add(s,
      s.Family("accelmon_exporter_diagnosis_out_of_order_total",
               "Reports not newer than their node's previous one, skipped by diagnostics.",
               kCounter),
      {}, static_cast<double>(d.out_of_order));
  Add(s,
      s.Family("accelmon_exporter_diagnosis_dropped_reports_total",
               "Applied reports neither diagnosed nor sent to Watch clients because the "
               "diagnostics queue was full.",
               kCounter),
      {}, static_cast<double>(d.dropped));
}

std::vector<MetricFamily> RenderNodes(const std::vector<NodeEntry>& nodes, Clock::time_point now) {
  MetricFamilySink sink;
  EmitNodes(nodes, now, sink);
  return std::move(sink).Take();
}

std::vector<MetricFamily> RenderExporterStats(const ExporterStats& stats, size_t nodes) {
  MetricFamilySink sink;
  EmitExporterStats(stats, nodes, sink);
  return std::move(sink).Take();
}

void StateRenderer::Render(TextExpositionSink& sink) const {
  const auto start = std::chrono::steady_clock::now();
  const Clock::time_point now = clock_();
  const std::vector<NodeEntry> nodes = store_.Snapshot(now);
  sink.Clear();
  EmitNodes(nodes, now, sink);
  EmitJobs(nodes, sink);
  const auto unrecorded =
      std::count_if(nodes.begin(), nodes.end(), [](const NodeEntry& e) { return e.unrecorded; });
  EmitExporterStats(stats_, nodes.size(), sink, static_cast<size_t>(unrecorded));
  if (diagnostics_) EmitDiagnostics(diagnostics_->Metrics(), sink);
  stats_.last_scrape_series = sink.samples();
  stats_.last_scrape_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void StateRenderer::RenderPieces(TextExpositionSink& sink,
                                 std::vector<std::string_view>& pieces) const {
  Render(sink);
  sink.Pieces(pieces);
}

void StateRenderer::RenderText(std::string& out) const {
  std::lock_guard lock(text_mu_);
  Render(text_sink_);
  out.clear();
  text_sink_.AppendTo(out);
}

}  // namespace accelmon
