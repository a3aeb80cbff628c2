#include "daemon/exporter/metrics_renderer.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <chrono>
#include <deque>
#include <optional>
#include <string_view>

#include "collectors/buddyinfo.h"
#include "daemon/common/version.h"
#include "daemon/exporter/text_exposition.h"

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

double Seconds(const google::protobuf::Timestamp& t) {
  return static_cast<double>(t.seconds()) + static_cast<double>(t.nanos()) / 1e9;
}

std::string_view LinkKindLabel(v1::LinkKind kind) {
  switch (kind) {
    case v1::LINK_KIND_NVLINK:
      return "nvlink";
    case v1::LINK_KIND_HCCS:
      return "hccs";
    case v1::LINK_KIND_XGMI:
      return "xgmi";
    case v1::LINK_KIND_PCIE:
      return "pcie";
    case v1::LINK_KIND_INFINIBAND:
      return "infiniband";
    case v1::LINK_KIND_ROCE:
      return "roce";
    case v1::LINK_KIND_ETHERNET:
      return "ethernet";
    default:
      return "unknown";
  }
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
    for (const auto* error : SortedByKey(l.errors_total())) {
      accelmon::Add(s, errors_, ll, "type", error->first, static_cast<double>(error->second));
    }
  }

 private:
  MetricSink& sink_;
  size_t up_, tx_, rx_, tx_packets_, rx_packets_, max_, errors_, mtu_;
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

}  // namespace

void EmitNodes(const std::vector<NodeEntry>& nodes, Clock::time_point now, MetricSink& s) {
  const size_t node_up =
      s.Family("accelmon_node_up",
               "1 while the node's agent reports, 0 after three missed intervals.", kGauge);
  const size_t node_last = s.Family("accelmon_node_last_report_timestamp_seconds",
                                    "Node clock time of the node's latest report.", kGauge);
  const size_t collector_success =
      s.Family("accelmon_agent_collector_success",
               "1 when the collector read its source in the latest report.", kGauge);
  const size_t collector_duration =
      s.Family("accelmon_agent_collector_duration_seconds",
               "Time the collector took in the latest report.", kGauge);
  const size_t agent_dropped = s.Family(
      "accelmon_agent_dropped_reports_total",
      "Reports the agent dropped: its spool was full, or the exporter can never accept them.",
      kCounter);
  const size_t agent_spool =
      s.Family("accelmon_agent_spool_reports",
               "Reports waiting in the agent's spool for acknowledgement.", kGauge);
  const size_t push_rejected =
      s.Family("accelmon_agent_push_rejected_total",
               "Allocator statistics pushes the agent refused, by reason.", kCounter);

  std::array<size_t, std::size(kHostMemory)> host_memory;
  for (size_t i = 0; i < std::size(kHostMemory); ++i) {
    host_memory[i] = s.Family(kHostMemory[i].name, kHostMemory[i].help, kGauge);
  }

  const size_t oom_kills =
      s.Family("accelmon_host_oom_kills_total",
               "Processes killed by the kernel's OOM killer since boot.", kCounter);
  const size_t pressure = s.Family("accelmon_host_memory_pressure_seconds_total",
                                   "Time tasks stalled on memory (PSI): some = at least one task, "
                                   "full = all non-idle tasks.",
                                   kCounter);
  const size_t free_blocks = s.Family("accelmon_host_memory_free_blocks",
                                      "Free blocks of 2^order pages (buddyinfo).", kGauge);
  const size_t unusable = s.Family("accelmon_host_memory_unusable_free_ratio",
                                   "Share of free memory that cannot serve an allocation of "
                                   "2^order pages (unusable free space index).",
                                   kGauge);
  LinkFamilies host_links(s, LinkFamilies::Scope::kHost);
  const size_t host_temp = s.Family("accelmon_host_temperature_celsius",
                                    "Host temperature sensors (thermal zones, hwmon).", kGauge);
  const size_t host_power =
      s.Family("accelmon_host_power_watts", "Host power sensors (hwmon).", kGauge);

  const size_t info = s.Family("accelmon_device_info",
                               "1 per device; firmware, driver and PCI bus id as labels.", kGauge);
  const size_t up =
      s.Family("accelmon_device_up", "1 while the device answers, 0 once it is lost.", kGauge);
  const size_t mem_total = s.Family("accelmon_device_memory_total_bytes", "Device memory.", kGauge);
  const size_t mem_used =
      s.Family("accelmon_device_memory_used_bytes", "Device memory in use.", kGauge);
  const size_t mem_free =
      s.Family("accelmon_device_memory_free_bytes", "Device memory not in use.", kGauge);
  const size_t mem_reserved = s.Family("accelmon_device_memory_reserved_bytes",
                                       "Device memory reserved by driver and firmware.", kGauge);
  const size_t mem_largest =
      s.Family("accelmon_device_memory_largest_free_block_bytes",
               "The largest single allocation that could succeed now.", kGauge);
  const size_t mem_frag =
      s.Family("accelmon_device_memory_fragmentation_ratio",
               "1 - largest free block / free memory, counting memory free inside processes' "
               "allocator caches (0 = unfragmented).",
               kGauge);
  const size_t temp =
      s.Family("accelmon_device_temperature_celsius", "Device temperature by sensor.", kGauge);
  const size_t temp_threshold =
      s.Family("accelmon_device_temperature_threshold_celsius",
               "Temperature at which the device slows down or shuts down.", kGauge);
  const size_t throttled = s.Family("accelmon_device_throttled",
                                    "1 while the device is throttled for that reason.", kGauge);
  const size_t power = s.Family("accelmon_device_power_watts", "Board power draw.", kGauge);
  const size_t power_limit =
      s.Family("accelmon_device_power_limit_watts", "Enforced power limit.", kGauge);
  const size_t energy = s.Family("accelmon_device_energy_joules_total",
                                 "Energy consumed since the driver loaded.", kCounter);
  const size_t util = s.Family("accelmon_device_utilization_ratio",
                               "Share of time the engine was busy, by kind.", kGauge);
  const size_t clock = s.Family("accelmon_device_clock_hertz", "Current clock, by kind.", kGauge);
  const size_t ecc =
      s.Family("accelmon_device_ecc_errors_total", "ECC errors since the driver loaded.", kCounter);
  const size_t remapped =
      s.Family("accelmon_device_remapped_rows",
               "Memory rows remapped, by the kind of error that caused it.", kGauge);
  LinkFamilies device_links(s, LinkFamilies::Scope::kDevice);
  const size_t proc_reserved =
      s.Family("accelmon_process_memory_reserved_bytes",
               "Device memory the process's caching allocator holds (pushed).", kGauge);
  const size_t proc_allocated =
      s.Family("accelmon_process_memory_allocated_bytes",
               "Device memory the process's allocator has handed out to tensors (pushed).", kGauge);
  const size_t proc_ooms =
      s.Family("accelmon_process_allocator_ooms_total",
               "Out-of-memory errors the process's allocator raised (pushed).", kCounter);
  const size_t proc_retries = s.Family(
      "accelmon_process_allocator_retries_total",
      "Allocations that succeeded only after the allocator freed its cache (pushed).", kCounter);

  for (const NodeEntry& entry : nodes) {
    const v1::NodeReport& r = *entry.report;
    const LabelList node_labels{{"node", r.node()}};

    // Three missed intervals mark a node down; an agent that sent no interval is assumed at 1s.
    const auto interval = r.has_interval() ? std::chrono::seconds(r.interval().seconds()) +
                                                 std::chrono::nanoseconds(r.interval().nanos())
                                           : std::chrono::nanoseconds(std::chrono::seconds(1));
    Add(s, node_up, node_labels, now - entry.received_at <= 3 * interval ? 1 : 0);
    Add(s, node_last, node_labels, Seconds(r.timestamp()));

    for (const auto& c : r.collectors()) {
      Add(s, collector_success, node_labels, "collector", c.name(), c.success() ? 1 : 0);
      Add(s, collector_duration, node_labels, "collector", c.name(), c.duration_seconds());
    }
    if (r.has_agent()) {
      if (r.agent().has_dropped_reports_total()) {
        Add(s, agent_dropped, node_labels, static_cast<double>(r.agent().dropped_reports_total()));
      }
      if (r.agent().has_spool_reports()) {
        Add(s, agent_spool, node_labels, static_cast<double>(r.agent().spool_reports()));
      }
      for (const auto* rejected : SortedByKey(r.agent().push_rejected_total())) {
        Add(s, push_rejected, node_labels, "reason", rejected->first,
            static_cast<double>(rejected->second));
      }
    }

    const auto& hm = r.host().memory();
    for (size_t i = 0; i < std::size(kHostMemory); ++i) {
      if (const auto value = kHostMemory[i].read(hm)) {
        Add(s, host_memory[i], node_labels, static_cast<double>(*value));
      }
    }

    const auto& host = r.host();
    if (host.vmstat().has_oom_kill_total()) {
      Add(s, oom_kills, node_labels, static_cast<double>(host.vmstat().oom_kill_total()));
    }
    if (host.memory_pressure().has_some_total_us()) {
      Add(s, pressure, node_labels, "kind", "some",
          static_cast<double>(host.memory_pressure().some_total_us()) / 1e6);
    }
    if (host.memory_pressure().has_full_total_us()) {
      Add(s, pressure, node_labels, "kind", "full",
          static_cast<double>(host.memory_pressure().full_total_us()) / 1e6);
    }
    for (const v1::BuddyZone& zone : host.buddyinfo()) {
      const IntLabel numa_node(zone.numa_node());
      for (int order = 0; order < zone.free_blocks_size(); ++order) {
        const IntLabel order_text(order);
        const LabelList zl{{"node", r.node()},
                           {"numa_node", numa_node.view()},
                           {"zone", zone.zone()},
                           {"order", order_text.view()}};
        Add(s, free_blocks, zl, static_cast<double>(zone.free_blocks(order)));
        if (const auto ratio = collectors::UnusableFreeIndex(zone, static_cast<unsigned>(order))) {
          Add(s, unusable, zl, *ratio);
        }
      }
    }
    for (const v1::Link& l : host.links()) host_links.Add(node_labels, l, /*with_peer=*/false);
    for (const v1::TemperatureSensor& t : host.temperatures()) {
      if (!t.has_celsius()) continue;
      Add(s, host_temp, {{"node", r.node()}, {"chip", t.chip()}, {"sensor", t.sensor()}},
          t.celsius());
    }
    for (const v1::PowerSensor& p : host.power_sensors()) {
      if (!p.has_watts()) continue;
      Add(s, host_power, {{"node", r.node()}, {"chip", p.chip()}, {"sensor", p.sensor()}},
          p.watts());
    }

    for (const v1::DeviceTelemetry& d : r.devices()) {
      const auto& id = d.identity();
      const IntLabel index(id.index());
      const LabelList dl{{"node", r.node()},
                         {"device", index.view()},
                         {"uuid", id.uuid()},
                         {"vendor", id.vendor()},
                         {"model", id.model()}};
      LabelList info_labels = dl;
      info_labels.Push("firmware", id.firmware_version());
      info_labels.Push("driver", id.driver_version());
      info_labels.Push("pci_bus_id", id.pci_bus_id());
      Add(s, info, info_labels, 1);
      if (d.has_up()) Add(s, up, dl, d.up() ? 1 : 0);

      const auto& m = d.memory();
      if (m.has_total_bytes()) Add(s, mem_total, dl, static_cast<double>(m.total_bytes()));
      if (m.has_used_bytes()) Add(s, mem_used, dl, static_cast<double>(m.used_bytes()));
      if (m.has_free_bytes()) Add(s, mem_free, dl, static_cast<double>(m.free_bytes()));
      if (m.has_reserved_bytes()) {
        Add(s, mem_reserved, dl, static_cast<double>(m.reserved_bytes()));
      }
      if (m.has_largest_free_block_bytes()) {
        Add(s, mem_largest, dl, static_cast<double>(m.largest_free_block_bytes()));
      }
      if (m.has_fragmentation_ratio()) Add(s, mem_frag, dl, m.fragmentation_ratio());

      const auto& t = d.thermal();
      if (t.has_core_celsius()) Add(s, temp, dl, "sensor", "core", t.core_celsius());
      if (t.has_memory_celsius()) Add(s, temp, dl, "sensor", "memory", t.memory_celsius());
      if (t.has_slowdown_threshold_celsius()) {
        Add(s, temp_threshold, dl, "threshold", "slowdown", t.slowdown_threshold_celsius());
      }
      if (t.has_shutdown_threshold_celsius()) {
        Add(s, temp_threshold, dl, "threshold", "shutdown", t.shutdown_threshold_celsius());
      }
      for (const auto* reason : SortedByKey(t.throttle_reasons())) {
        Add(s, throttled, dl, "reason", reason->first, reason->second ? 1 : 0);
      }

      const auto& p = d.power();
      if (p.has_usage_watts()) Add(s, power, dl, p.usage_watts());
      if (p.has_limit_watts()) Add(s, power_limit, dl, p.limit_watts());
      if (p.has_energy_joules_total()) Add(s, energy, dl, p.energy_joules_total());

      const auto& u = d.utilization();
      if (u.has_compute_ratio()) Add(s, util, dl, "kind", "compute", u.compute_ratio());
      if (u.has_memory_bandwidth_ratio()) {
        Add(s, util, dl, "kind", "memory_bandwidth", u.memory_bandwidth_ratio());
      }
      if (d.clocks().has_compute_hz()) {
        Add(s, clock, dl, "kind", "compute", d.clocks().compute_hz());
      }
      if (d.clocks().has_memory_hz()) Add(s, clock, dl, "kind", "memory", d.clocks().memory_hz());

      const auto& e = d.errors();
      if (e.has_ecc_corrected_total()) {
        Add(s, ecc, dl, "type", "corrected", static_cast<double>(e.ecc_corrected_total()));
      }
      if (e.has_ecc_uncorrected_total()) {
        Add(s, ecc, dl, "type", "uncorrected", static_cast<double>(e.ecc_uncorrected_total()));
      }
      if (e.has_remapped_rows_correctable()) {
        Add(s, remapped, dl, "cause", "correctable",
            static_cast<double>(e.remapped_rows_correctable()));
      }
      if (e.has_remapped_rows_uncorrectable()) {
        Add(s, remapped, dl, "cause", "uncorrectable",
            static_cast<double>(e.remapped_rows_uncorrectable()));
      }

      for (const v1::Link& l : d.links()) device_links.Add(dl, l, /*with_peer=*/true);

      for (const v1::ProcessMemory& pm : d.processes()) {
        const IntLabel pid(pm.pid());
        LabelList pl = dl;
        pl.Push("pid", pid.view());
        pl.Push("job", pm.job());
        pl.Push("rank", pm.rank());
        if (pm.has_reserved_bytes()) {
          Add(s, proc_reserved, pl, static_cast<double>(pm.reserved_bytes()));
        }
        if (pm.has_allocated_bytes()) {
          Add(s, proc_allocated, pl, static_cast<double>(pm.allocated_bytes()));
        }
        if (pm.has_ooms_total()) Add(s, proc_ooms, pl, static_cast<double>(pm.ooms_total()));
        if (pm.has_alloc_retries_total()) {
          Add(s, proc_retries, pl, static_cast<double>(pm.alloc_retries_total()));
        }
      }
    }
  }
}

void EmitExporterStats(const ExporterStats& stats, size_t nodes, MetricSink& s) {
  Add(s, s.Family("accelmon_build_info", "accelmon version; always 1.", kGauge),
      {{"version", kVersion}}, 1);
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
                 "Failed writes and syncs of the flight recording (its reports are still "
                 "acknowledged and served).",
                 kCounter),
        {}, static_cast<double>(r.errors.load()));
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
      "A diagnostics finding open now; always 1 (docs/diagnostics.md). device and link are empty "
      "when the finding is not about one.",
      kGauge);
  for (const DiagnosticsMetrics::Active& a : d.active) {
    Add(s, active,
        {{"rule", a.rule},
         {"node", a.node},
         {"device", a.device},
         {"link", a.link},
         {"severity", a.severity}},
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

void StateRenderer::RenderText(std::string& out) const {
  const auto start = std::chrono::steady_clock::now();
  const Clock::time_point now = clock_();
  const std::vector<NodeEntry> nodes = store_.Snapshot(now);
  // One sink per thread: civetweb's worker threads live as long as the server, so each keeps
  // its family buffers from one scrape to the next.
  thread_local TextExpositionSink sink;
  out.clear();
  sink.Clear();
  EmitNodes(nodes, now, sink);
  EmitExporterStats(stats_, nodes.size(), sink);
  if (diagnostics_) EmitDiagnostics(diagnostics_->Metrics(), sink);
  sink.AppendTo(out);
  stats_.last_scrape_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace accelmon
