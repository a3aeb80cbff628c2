#include "daemon/exporter/series_budget.h"

#include <algorithm>
#include <string>
#include <vector>

namespace accelmon {
namespace {

// Series per element, as metrics_renderer.cc emits them (upper bounds).
constexpr size_t kNodeSeries = 4;        // up, last report, agent dropped and spool
constexpr size_t kCollectorSeries = 2;   // success, duration
constexpr size_t kHostSeries = 40;       // meminfo fields, OOM kills, pressure some/full
constexpr size_t kBuddyOrderSeries = 2;  // free blocks, unusable free ratio
constexpr size_t kLinkSeries = 7;        // up, bytes and packets both ways, bandwidth, MTU
constexpr size_t kDeviceSeries = 23;     // info, up, memory, thermal, power, activity, errors
constexpr size_t kHolderSeries = 1;      // job info (and one job series per device)
constexpr size_t kProcessSeries = 7;     // memory, allocator, OOMs, retries, steps, step rate

size_t LinkSeries(const v1::Link& l) { return kLinkSeries + l.errors_total_size(); }

size_t DeviceSeries(const v1::DeviceTelemetry& d) {
  size_t n = kDeviceSeries + d.thermal().throttle_reasons_size();
  for (const v1::Link& l : d.links()) n += LinkSeries(l);
  n += kHolderSeries * static_cast<size_t>(d.holders_size());
  n += kProcessSeries * static_cast<size_t>(d.processes_size());
  return n;
}

size_t HostSeries(const v1::HostTelemetry& h) {
  size_t n = kHostSeries + static_cast<size_t>(h.temperatures_size() + h.power_sensors_size());
  for (const v1::BuddyZone& z : h.buddyinfo()) n += kBuddyOrderSeries * z.free_blocks_size();
  for (const v1::Link& l : h.links()) n += LinkSeries(l);
  return n;
}

// Keeps the `keep` smallest keys of `map` (protobuf maps iterate in no fixed order); returns
// how many entries went.
template <typename Map>
uint64_t KeepSmallestKeys(Map& map, size_t keep) {
  if (map.size() <= keep) return 0;
  std::vector<std::string> keys;
  keys.reserve(map.size());
  for (const auto& [key, value] : map) keys.push_back(key);
  std::sort(keys.begin(), keys.end());
  for (size_t i = keep; i < keys.size(); ++i) map.erase(keys[i]);
  return keys.size() - keep;
}

template <typename Repeated>
uint64_t KeepFirst(Repeated& list, size_t keep) {
  const auto size = static_cast<size_t>(list.size());
  if (size <= keep) return 0;
  list.DeleteSubrange(static_cast<int>(keep), static_cast<int>(size - keep));
  return size - keep;
}

// Drops elements from the end of `list` while the report is over budget; `series` is what the
// element at an index costs. Returns how many went.
template <typename Repeated, typename Cost>
uint64_t DropFromEnd(Repeated& list, size_t& total, size_t budget, Cost series) {
  int keep = list.size();
  while (keep > 0 && total > budget) {
    --keep;
    total -= std::min(total, series(list.Get(keep)));
  }
  const auto dropped = static_cast<uint64_t>(list.size() - keep);
  if (dropped > 0) list.DeleteSubrange(keep, list.size() - keep);
  return dropped;
}

}  // namespace

size_t CountSeries(const v1::NodeReport& report) {
  size_t n = kNodeSeries + kCollectorSeries * static_cast<size_t>(report.collectors_size()) +
             report.agent().push_rejected_total_size();
  if (report.has_host()) n += HostSeries(report.host());
  for (const v1::DeviceTelemetry& d : report.devices()) n += DeviceSeries(d);
  return n;
}

Dropped TrimReport(v1::NodeReport& report, const TrimLimits& limits) {
  Dropped dropped;
  const auto count = [&](const char* reason, uint64_t n) {
    if (n > 0) dropped[reason] += n;
  };
  // Lists and maps that no hard limit bounds.
  count("too_many_collectors", KeepFirst(*report.mutable_collectors(), limits.max_collectors));
  if (report.has_agent()) {
    count("too_many_map_entries",
          KeepSmallestKeys(*report.mutable_agent()->mutable_push_rejected_total(),
                           limits.max_map_entries));
  }
  if (report.has_host()) {
    v1::HostTelemetry& host = *report.mutable_host();
    count("too_many_sensors", KeepFirst(*host.mutable_temperatures(), limits.max_sensors));
    count("too_many_sensors", KeepFirst(*host.mutable_power_sensors(), limits.max_sensors));
    count("too_many_buddy_zones", KeepFirst(*host.mutable_buddyinfo(), limits.max_buddy_zones));
    for (v1::BuddyZone& zone : *host.mutable_buddyinfo()) {
      const auto orders = static_cast<size_t>(zone.free_blocks_size());
      if (orders > limits.max_buddy_orders) {
        zone.mutable_free_blocks()->Truncate(static_cast<int>(limits.max_buddy_orders));
        count("too_many_buddy_orders", orders - limits.max_buddy_orders);
      }
    }
    for (v1::Link& l : *host.mutable_links()) {
      count("too_many_map_entries",
            KeepSmallestKeys(*l.mutable_errors_total(), limits.max_map_entries));
    }
  }
  for (v1::DeviceTelemetry& d : *report.mutable_devices()) {
    count("too_many_map_entries", KeepSmallestKeys(*d.mutable_thermal()->mutable_throttle_reasons(),
                                                   limits.max_map_entries));
    for (v1::Link& l : *d.mutable_links()) {
      count("too_many_map_entries",
            KeepSmallestKeys(*l.mutable_errors_total(), limits.max_map_entries));
    }
  }

  // Then the node's series budget: the least telling parts go first.
  size_t total = CountSeries(report);
  const size_t budget = limits.series_per_node;
  if (total <= budget) return dropped;
  uint64_t n = 0;
  if (report.has_host()) {
    v1::HostTelemetry& host = *report.mutable_host();
    n += DropFromEnd(*host.mutable_temperatures(), total, budget,
                     [](const auto&) { return size_t{1}; });
    n += DropFromEnd(*host.mutable_power_sensors(), total, budget,
                     [](const auto&) { return size_t{1}; });
    n += DropFromEnd(*host.mutable_buddyinfo(), total, budget, [](const v1::BuddyZone& z) {
      return kBuddyOrderSeries * static_cast<size_t>(z.free_blocks_size());
    });
    n += DropFromEnd(*host.mutable_links(), total, budget, LinkSeries);
  }
  auto& devices = *report.mutable_devices();
  // Per device, from the last device to the first, so that the first devices keep the most.
  const auto each_device = [&](auto&& trim) {
    for (int i = devices.size() - 1; i >= 0 && total > budget; --i) trim(*devices.Mutable(i));
  };
  each_device([&](v1::DeviceTelemetry& d) {
    n += DropFromEnd(*d.mutable_processes(), total, budget,
                     [](const auto&) { return kProcessSeries; });
  });
  each_device([&](v1::DeviceTelemetry& d) {
    n +=
        DropFromEnd(*d.mutable_holders(), total, budget, [](const auto&) { return kHolderSeries; });
  });
  each_device([&](v1::DeviceTelemetry& d) {
    for (v1::Link& l : *d.mutable_links()) {
      if (total <= budget) break;
      const size_t entries = l.errors_total_size();
      l.mutable_errors_total()->clear();
      total -= std::min(total, entries);
      n += entries;
    }
  });
  each_device([&](v1::DeviceTelemetry& d) {
    const size_t entries = d.thermal().throttle_reasons_size();
    if (entries == 0) return;
    d.mutable_thermal()->mutable_throttle_reasons()->clear();
    total -= std::min(total, entries);
    n += entries;
  });
  each_device([&](v1::DeviceTelemetry& d) {
    n += DropFromEnd(*d.mutable_links(), total, budget, LinkSeries);
  });
  n += DropFromEnd(devices, total, budget, DeviceSeries);
  if (total > budget) {
    // Only the fixed series are left (collectors, node, host memory): drop the collectors too.
    n += DropFromEnd(*report.mutable_collectors(), total, budget,
                     [](const auto&) { return kCollectorSeries; });
  }
  count("series_budget", n);
  return dropped;
}

}  // namespace accelmon
