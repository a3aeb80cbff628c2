#include "daemon/metrics_renderer.h"

#include <chrono>
#include <deque>
#include <map>
#include <optional>
#include <string_view>

#include "collectors/buddyinfo.h"
#include "daemon/version.h"

namespace accelmon {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;
using Labels = std::vector<ClientMetric::Label>;

// Families in a fixed declaration order; families that end up empty are not emitted.
class Families {
 public:
  MetricFamily& Declare(std::string name, std::string help, MetricType type) {
    families_.push_back(MetricFamily{std::move(name), std::move(help), type, {}});
    return families_.back();
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
  std::deque<MetricFamily> families_;  // deque: references stay valid while declaring
};

void Add(MetricFamily& family, const Labels& labels, double value) {
  ClientMetric& m = family.metric.emplace_back();
  m.label = labels;
  if (family.type == MetricType::Counter) {
    m.counter.value = value;
  } else {
    m.gauge.value = value;
  }
}

void Add(MetricFamily& family, const Labels& labels, std::string_view name, std::string_view value,
         double v) {
  Labels with = labels;
  with.push_back({std::string(name), std::string(value)});
  Add(family, with, v);
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

// The families every kind of link shares; `scope` is "device" or "host".
class LinkFamilies {
 public:
  LinkFamilies(Families& f, const std::string& scope)
      : up_(f.Declare("accelmon_" + scope + "_link_up", "1 while the link is up, 0 when down.",
                      MetricType::Gauge)),
        tx_(f.Declare("accelmon_" + scope + "_link_transmit_bytes_total",
                      "Bytes sent over the link.", MetricType::Counter)),
        rx_(f.Declare("accelmon_" + scope + "_link_receive_bytes_total",
                      "Bytes received over the link.", MetricType::Counter)),
        tx_packets_(f.Declare("accelmon_" + scope + "_link_transmit_packets_total",
                              "Packets sent over the link.", MetricType::Counter)),
        rx_packets_(f.Declare("accelmon_" + scope + "_link_receive_packets_total",
                              "Packets received over the link.", MetricType::Counter)),
        max_(f.Declare("accelmon_" + scope + "_link_max_bandwidth_bytes_per_second",
                       "Link capacity in one direction at its current speed and width.",
                       MetricType::Gauge)),
        errors_(f.Declare("accelmon_" + scope + "_link_errors_total",
                          "Link error counters by type.", MetricType::Counter)),
        mtu_(f.Declare("accelmon_" + scope + "_link_mtu_bytes", "Link MTU.", MetricType::Gauge)) {}

  // `labels` identify the owner (node, or node and device); link, kind and peer are added here.
  void Add(const Labels& labels, const v1::Link& l, bool with_peer) {
    Labels ll = labels;
    ll.push_back({"link", l.name()});
    ll.push_back({"kind", std::string(LinkKindLabel(l.kind()))});
    if (with_peer) ll.push_back({"peer", l.peer()});
    if (l.has_up()) accelmon::Add(up_, ll, l.up() ? 1 : 0);
    if (l.has_transmit_bytes_total()) {
      accelmon::Add(tx_, ll, static_cast<double>(l.transmit_bytes_total()));
    }
    if (l.has_receive_bytes_total()) {
      accelmon::Add(rx_, ll, static_cast<double>(l.receive_bytes_total()));
    }
    if (l.has_transmit_packets_total()) {
      accelmon::Add(tx_packets_, ll, static_cast<double>(l.transmit_packets_total()));
    }
    if (l.has_receive_packets_total()) {
      accelmon::Add(rx_packets_, ll, static_cast<double>(l.receive_packets_total()));
    }
    if (l.has_max_bandwidth_bytes_per_second()) {
      accelmon::Add(max_, ll, l.max_bandwidth_bytes_per_second());
    }
    if (l.has_mtu_bytes()) accelmon::Add(mtu_, ll, l.mtu_bytes());
    // Map iteration order is unspecified; sort for a stable exposition.
    const std::map<std::string, uint64_t> errors(l.errors_total().begin(), l.errors_total().end());
    for (const auto& [type, count] : errors) {
      accelmon::Add(errors_, ll, "type", type, static_cast<double>(count));
    }
  }

 private:
  MetricFamily& up_;
  MetricFamily& tx_;
  MetricFamily& rx_;
  MetricFamily& tx_packets_;
  MetricFamily& rx_packets_;
  MetricFamily& max_;
  MetricFamily& errors_;
  MetricFamily& mtu_;
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

}  // namespace

std::vector<MetricFamily> RenderNodes(const std::vector<NodeEntry>& nodes, Clock::time_point now) {
  Families f;
  auto& node_up = f.Declare("accelmon_node_up",
                            "1 while the node's agent reports, 0 after three missed intervals.",
                            MetricType::Gauge);
  auto& node_last = f.Declare("accelmon_node_last_report_timestamp_seconds",
                              "Node clock time of the node's latest report.", MetricType::Gauge);
  auto& collector_success =
      f.Declare("accelmon_agent_collector_success",
                "1 when the collector read its source in the latest report.", MetricType::Gauge);
  auto& collector_duration =
      f.Declare("accelmon_agent_collector_duration_seconds",
                "Time the collector took in the latest report.", MetricType::Gauge);
  auto& agent_dropped = f.Declare(
      "accelmon_agent_dropped_reports_total",
      "Reports the agent dropped: its spool was full, or the exporter can never accept them.",
      MetricType::Counter);
  auto& agent_spool =
      f.Declare("accelmon_agent_spool_reports",
                "Reports waiting in the agent's spool for acknowledgement.", MetricType::Gauge);
  auto& push_rejected =
      f.Declare("accelmon_agent_push_rejected_total",
                "Allocator statistics pushes the agent refused, by reason.", MetricType::Counter);

  std::vector<MetricFamily*> host_memory;
  for (const auto& field : kHostMemory) {
    host_memory.push_back(&f.Declare(field.name, field.help, MetricType::Gauge));
  }

  auto& oom_kills =
      f.Declare("accelmon_host_oom_kills_total",
                "Processes killed by the kernel's OOM killer since boot.", MetricType::Counter);
  auto& pressure = f.Declare("accelmon_host_memory_pressure_seconds_total",
                             "Time tasks stalled on memory (PSI): some = at least one task, "
                             "full = all non-idle tasks.",
                             MetricType::Counter);
  auto& free_blocks = f.Declare("accelmon_host_memory_free_blocks",
                                "Free blocks of 2^order pages (buddyinfo).", MetricType::Gauge);
  auto& unusable = f.Declare("accelmon_host_memory_unusable_free_ratio",
                             "Share of free memory that cannot serve an allocation of 2^order "
                             "pages (unusable free space index).",
                             MetricType::Gauge);
  LinkFamilies host_links(f, "host");
  auto& host_temp =
      f.Declare("accelmon_host_temperature_celsius",
                "Host temperature sensors (thermal zones, hwmon).", MetricType::Gauge);
  auto& host_power =
      f.Declare("accelmon_host_power_watts", "Host power sensors (hwmon).", MetricType::Gauge);

  auto& info =
      f.Declare("accelmon_device_info", "1 per device; firmware, driver and PCI bus id as labels.",
                MetricType::Gauge);
  auto& up = f.Declare("accelmon_device_up", "1 while the device answers, 0 once it is lost.",
                       MetricType::Gauge);
  auto& mem_total =
      f.Declare("accelmon_device_memory_total_bytes", "Device memory.", MetricType::Gauge);
  auto& mem_used =
      f.Declare("accelmon_device_memory_used_bytes", "Device memory in use.", MetricType::Gauge);
  auto& mem_free = f.Declare("accelmon_device_memory_free_bytes", "Device memory not in use.",
                             MetricType::Gauge);
  auto& mem_reserved =
      f.Declare("accelmon_device_memory_reserved_bytes",
                "Device memory reserved by driver and firmware.", MetricType::Gauge);
  auto& mem_largest =
      f.Declare("accelmon_device_memory_largest_free_block_bytes",
                "The largest single allocation that could succeed now.", MetricType::Gauge);
  auto& mem_frag =
      f.Declare("accelmon_device_memory_fragmentation_ratio",
                "1 - largest free block / free memory, counting memory free inside processes' "
                "allocator caches (0 = unfragmented).",
                MetricType::Gauge);
  auto& temp = f.Declare("accelmon_device_temperature_celsius", "Device temperature by sensor.",
                         MetricType::Gauge);
  auto& temp_threshold =
      f.Declare("accelmon_device_temperature_threshold_celsius",
                "Temperature at which the device slows down or shuts down.", MetricType::Gauge);
  auto& throttled =
      f.Declare("accelmon_device_throttled", "1 while the device is throttled for that reason.",
                MetricType::Gauge);
  auto& power = f.Declare("accelmon_device_power_watts", "Board power draw.", MetricType::Gauge);
  auto& power_limit =
      f.Declare("accelmon_device_power_limit_watts", "Enforced power limit.", MetricType::Gauge);
  auto& energy = f.Declare("accelmon_device_energy_joules_total",
                           "Energy consumed since the driver loaded.", MetricType::Counter);
  auto& util = f.Declare("accelmon_device_utilization_ratio",
                         "Share of time the engine was busy, by kind.", MetricType::Gauge);
  auto& clock =
      f.Declare("accelmon_device_clock_hertz", "Current clock, by kind.", MetricType::Gauge);
  auto& ecc = f.Declare("accelmon_device_ecc_errors_total", "ECC errors since the driver loaded.",
                        MetricType::Counter);
  auto& remapped =
      f.Declare("accelmon_device_remapped_rows",
                "Memory rows remapped, by the kind of error that caused it.", MetricType::Gauge);
  LinkFamilies device_links(f, "device");
  auto& proc_reserved =
      f.Declare("accelmon_process_memory_reserved_bytes",
                "Device memory the process's caching allocator holds (pushed).", MetricType::Gauge);
  auto& proc_allocated =
      f.Declare("accelmon_process_memory_allocated_bytes",
                "Device memory the process's allocator has handed out to tensors (pushed).",
                MetricType::Gauge);
  auto& proc_ooms = f.Declare("accelmon_process_allocator_ooms_total",
                              "Out-of-memory errors the process's allocator raised (pushed).",
                              MetricType::Counter);
  auto& proc_retries =
      f.Declare("accelmon_process_allocator_retries_total",
                "Allocations that succeeded only after the allocator freed its cache (pushed).",
                MetricType::Counter);

  for (const NodeEntry& entry : nodes) {
    const v1::NodeReport& r = *entry.report;
    const Labels node_labels{{"node", r.node()}};

    // Three missed intervals mark a node down; an agent that sent no interval is assumed at 1s.
    const auto interval = r.has_interval() ? std::chrono::seconds(r.interval().seconds()) +
                                                 std::chrono::nanoseconds(r.interval().nanos())
                                           : std::chrono::nanoseconds(std::chrono::seconds(1));
    Add(node_up, node_labels, now - entry.received_at <= 3 * interval ? 1 : 0);
    Add(node_last, node_labels, Seconds(r.timestamp()));

    for (const auto& c : r.collectors()) {
      Add(collector_success, node_labels, "collector", c.name(), c.success() ? 1 : 0);
      Add(collector_duration, node_labels, "collector", c.name(), c.duration_seconds());
    }
    if (r.has_agent()) {
      if (r.agent().has_dropped_reports_total()) {
        Add(agent_dropped, node_labels, static_cast<double>(r.agent().dropped_reports_total()));
      }
      if (r.agent().has_spool_reports()) {
        Add(agent_spool, node_labels, static_cast<double>(r.agent().spool_reports()));
      }
      // Map iteration order is unspecified; sort for a stable exposition.
      const std::map<std::string, uint64_t> rejected(r.agent().push_rejected_total().begin(),
                                                     r.agent().push_rejected_total().end());
      for (const auto& [reason, count] : rejected) {
        Add(push_rejected, node_labels, "reason", reason, static_cast<double>(count));
      }
    }

    const auto& hm = r.host().memory();
    for (size_t i = 0; i < std::size(kHostMemory); ++i) {
      if (const auto value = kHostMemory[i].read(hm)) {
        Add(*host_memory[i], node_labels, static_cast<double>(*value));
      }
    }

    const auto& host = r.host();
    if (host.vmstat().has_oom_kill_total()) {
      Add(oom_kills, node_labels, static_cast<double>(host.vmstat().oom_kill_total()));
    }
    if (host.memory_pressure().has_some_total_us()) {
      Add(pressure, node_labels, "kind", "some",
          static_cast<double>(host.memory_pressure().some_total_us()) / 1e6);
    }
    if (host.memory_pressure().has_full_total_us()) {
      Add(pressure, node_labels, "kind", "full",
          static_cast<double>(host.memory_pressure().full_total_us()) / 1e6);
    }
    for (const v1::BuddyZone& zone : host.buddyinfo()) {
      for (int order = 0; order < zone.free_blocks_size(); ++order) {
        const Labels zl{{"node", r.node()},
                        {"numa_node", std::to_string(zone.numa_node())},
                        {"zone", zone.zone()},
                        {"order", std::to_string(order)}};
        Add(free_blocks, zl, static_cast<double>(zone.free_blocks(order)));
        if (const auto ratio = collectors::UnusableFreeIndex(zone, static_cast<unsigned>(order))) {
          Add(unusable, zl, *ratio);
        }
      }
    }
    for (const v1::Link& l : host.links()) host_links.Add(node_labels, l, /*with_peer=*/false);
    for (const v1::TemperatureSensor& t : host.temperatures()) {
      if (!t.has_celsius()) continue;
      Add(host_temp, {{"node", r.node()}, {"chip", t.chip()}, {"sensor", t.sensor()}}, t.celsius());
    }
    for (const v1::PowerSensor& p : host.power_sensors()) {
      if (!p.has_watts()) continue;
      Add(host_power, {{"node", r.node()}, {"chip", p.chip()}, {"sensor", p.sensor()}}, p.watts());
    }

    for (const v1::DeviceTelemetry& d : r.devices()) {
      const auto& id = d.identity();
      const Labels dl{{"node", r.node()},
                      {"device", std::to_string(id.index())},
                      {"uuid", id.uuid()},
                      {"vendor", id.vendor()},
                      {"model", id.model()}};
      Labels info_labels = dl;
      info_labels.push_back({"firmware", id.firmware_version()});
      info_labels.push_back({"driver", id.driver_version()});
      info_labels.push_back({"pci_bus_id", id.pci_bus_id()});
      Add(info, info_labels, 1);
      if (d.has_up()) Add(up, dl, d.up() ? 1 : 0);

      const auto& m = d.memory();
      if (m.has_total_bytes()) Add(mem_total, dl, static_cast<double>(m.total_bytes()));
      if (m.has_used_bytes()) Add(mem_used, dl, static_cast<double>(m.used_bytes()));
      if (m.has_free_bytes()) Add(mem_free, dl, static_cast<double>(m.free_bytes()));
      if (m.has_reserved_bytes()) Add(mem_reserved, dl, static_cast<double>(m.reserved_bytes()));
      if (m.has_largest_free_block_bytes()) {
        Add(mem_largest, dl, static_cast<double>(m.largest_free_block_bytes()));
      }
      if (m.has_fragmentation_ratio()) Add(mem_frag, dl, m.fragmentation_ratio());

      const auto& t = d.thermal();
      if (t.has_core_celsius()) Add(temp, dl, "sensor", "core", t.core_celsius());
      if (t.has_memory_celsius()) Add(temp, dl, "sensor", "memory", t.memory_celsius());
      if (t.has_slowdown_threshold_celsius()) {
        Add(temp_threshold, dl, "threshold", "slowdown", t.slowdown_threshold_celsius());
      }
      if (t.has_shutdown_threshold_celsius()) {
        Add(temp_threshold, dl, "threshold", "shutdown", t.shutdown_threshold_celsius());
      }
      // Map iteration order is unspecified; sort for a stable exposition.
      std::map<std::string, bool> reasons(t.throttle_reasons().begin(), t.throttle_reasons().end());
      for (const auto& [reason, active] : reasons) {
        Add(throttled, dl, "reason", reason, active ? 1 : 0);
      }

      const auto& p = d.power();
      if (p.has_usage_watts()) Add(power, dl, p.usage_watts());
      if (p.has_limit_watts()) Add(power_limit, dl, p.limit_watts());
      if (p.has_energy_joules_total()) Add(energy, dl, p.energy_joules_total());

      const auto& u = d.utilization();
      if (u.has_compute_ratio()) Add(util, dl, "kind", "compute", u.compute_ratio());
      if (u.has_memory_bandwidth_ratio()) {
        Add(util, dl, "kind", "memory_bandwidth", u.memory_bandwidth_ratio());
      }
      if (d.clocks().has_compute_hz()) Add(clock, dl, "kind", "compute", d.clocks().compute_hz());
      if (d.clocks().has_memory_hz()) Add(clock, dl, "kind", "memory", d.clocks().memory_hz());

      const auto& e = d.errors();
      if (e.has_ecc_corrected_total()) {
        Add(ecc, dl, "type", "corrected", static_cast<double>(e.ecc_corrected_total()));
      }
      if (e.has_ecc_uncorrected_total()) {
        Add(ecc, dl, "type", "uncorrected", static_cast<double>(e.ecc_uncorrected_total()));
      }
      if (e.has_remapped_rows_correctable()) {
        Add(remapped, dl, "cause", "correctable",
            static_cast<double>(e.remapped_rows_correctable()));
      }
      if (e.has_remapped_rows_uncorrectable()) {
        Add(remapped, dl, "cause", "uncorrectable",
            static_cast<double>(e.remapped_rows_uncorrectable()));
      }

      for (const v1::Link& l : d.links()) device_links.Add(dl, l, /*with_peer=*/true);

      for (const v1::ProcessMemory& pm : d.processes()) {
        Labels pl = dl;
        pl.push_back({"pid", std::to_string(pm.pid())});
        pl.push_back({"job", pm.job()});
        pl.push_back({"rank", pm.rank()});
        if (pm.has_reserved_bytes())
          Add(proc_reserved, pl, static_cast<double>(pm.reserved_bytes()));
        if (pm.has_allocated_bytes()) {
          Add(proc_allocated, pl, static_cast<double>(pm.allocated_bytes()));
        }
        if (pm.has_ooms_total()) Add(proc_ooms, pl, static_cast<double>(pm.ooms_total()));
        if (pm.has_alloc_retries_total()) {
          Add(proc_retries, pl, static_cast<double>(pm.alloc_retries_total()));
        }
      }
    }
  }
  return std::move(f).Take();
}

std::vector<MetricFamily> RenderExporterStats(const ExporterStats& stats, size_t nodes) {
  Families f;
  Add(f.Declare("accelmon_build_info", "accelmon version; always 1.", MetricType::Gauge),
      {{"version", kVersion}}, 1);
  Add(f.Declare("accelmon_exporter_reports_ingested_total", "Reports applied to the state.",
                MetricType::Counter),
      {}, static_cast<double>(stats.reports_applied.load()));
  Add(f.Declare("accelmon_exporter_reports_duplicate_total",
                "Reports received again after a reconnect and ignored.", MetricType::Counter),
      {}, static_cast<double>(stats.reports_duplicate.load()));
  auto& rejected = f.Declare("accelmon_exporter_reports_rejected_total",
                             "Reports refused, by reason.", MetricType::Counter);
  for (const auto& [reason, count] : stats.rejected()) {
    Add(rejected, {{"reason", reason}}, static_cast<double>(count));
  }
  Add(f.Declare("accelmon_exporter_streams_active", "Agent streams connected now.",
                MetricType::Gauge),
      {}, static_cast<double>(stats.streams_active.load()));
  Add(f.Declare("accelmon_exporter_reads_throttled_total",
                "Reads of agent streams deferred because the stream sent reports faster than "
                "--grpc.max-reports-per-second.",
                MetricType::Counter),
      {}, static_cast<double>(stats.reads_throttled.load()));
  Add(f.Declare("accelmon_exporter_nodes", "Nodes in the exporter's state.", MetricType::Gauge), {},
      static_cast<double>(nodes));
  Add(f.Declare("accelmon_exporter_scrape_duration_seconds",
                "Time the previous scrape took to render.", MetricType::Gauge),
      {}, stats.last_scrape_seconds.load());
  if (stats.recording) {
    const recording::RecorderStats& r = stats.recorder;
    Add(f.Declare("accelmon_exporter_recorded_reports_total",
                  "Reports written to the flight recording (--record.dir).", MetricType::Counter),
        {}, static_cast<double>(r.reports.load()));
    Add(f.Declare("accelmon_exporter_recorded_bytes_total",
                  "Bytes appended to the flight recording's segment files.", MetricType::Counter),
        {}, static_cast<double>(r.bytes.load()));
    Add(f.Declare("accelmon_exporter_record_errors_total",
                  "Failed writes and syncs of the flight recording (its reports are still "
                  "acknowledged and served).",
                  MetricType::Counter),
        {}, static_cast<double>(r.errors.load()));
    Add(f.Declare("accelmon_exporter_recording_segments",
                  "Segment files in the recording directory.", MetricType::Gauge),
        {}, static_cast<double>(r.segments.load()));
    Add(f.Declare("accelmon_exporter_recording_bytes",
                  "Bytes of the segment files in the recording directory.", MetricType::Gauge),
        {}, static_cast<double>(r.segment_bytes.load()));
  }
  return std::move(f).Take();
}

std::vector<MetricFamily> StateCollectable::Collect() const {
  const auto start = std::chrono::steady_clock::now();
  const Clock::time_point now = clock_();
  const std::vector<NodeEntry> nodes = store_.Snapshot(now);
  std::vector<MetricFamily> out = RenderNodes(nodes, now);
  std::vector<MetricFamily> self = RenderExporterStats(stats_, nodes.size());
  out.insert(out.end(), std::make_move_iterator(self.begin()), std::make_move_iterator(self.end()));
  stats_.last_scrape_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

}  // namespace accelmon
