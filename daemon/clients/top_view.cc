#include "daemon/clients/top_view.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <set>

#include "proto/time_format.h"

namespace accelmon::top {
namespace {

constexpr SortKey kSortKeys[] = {SortKey::kNode, SortKey::kUtil, SortKey::kMemory, SortKey::kTemp,
                                 SortKey::kFindings};

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool Contains(std::string_view haystack, const std::string& lower_needle) {
  return Lower(haystack).find(lower_needle) != std::string::npos;
}

std::optional<double> SecondsSince(const google::protobuf::Timestamp& t,
                                   std::chrono::system_clock::time_point now) {
  if (t.seconds() == 0 && t.nanos() == 0) return std::nullopt;
  const double then = ToSeconds(t);
  const double at = std::chrono::duration<double>(now.time_since_epoch()).count();
  return std::max(0.0, at - then);
}

// Who holds the device: its jobs, else its pods, else its users; "" when nobody is known.
std::string Holder(const v1::DeviceTelemetry& d) {
  std::vector<std::string> names;
  auto add = [&names](const std::string& name) {
    if (!name.empty() && std::find(names.begin(), names.end(), name) == names.end()) {
      names.push_back(name);
    }
  };
  for (const v1::DeviceHolder& h : d.holders()) add(h.job());
  if (names.empty()) {
    for (const v1::DeviceHolder& h : d.holders()) add(h.pod());
  }
  if (names.empty()) {
    for (const v1::DeviceHolder& h : d.holders()) add(h.user());
  }
  return fmt::format("{}", fmt::join(names, ","));
}

DeviceRow MakeDeviceRow(const v1::DeviceTelemetry& d) {
  DeviceRow row;
  row.index = d.identity().index();
  row.model = d.identity().model();
  const v1::DeviceMemory& m = d.memory();
  if (m.has_used_bytes()) row.mem_used = m.used_bytes();
  if (m.has_total_bytes()) row.mem_total = m.total_bytes();
  if (m.has_fragmentation_ratio()) row.fragmentation = m.fragmentation_ratio();
  if (d.utilization().has_compute_ratio()) row.util = d.utilization().compute_ratio();
  if (d.thermal().has_core_celsius()) row.temp = d.thermal().core_celsius();
  if (d.power().has_usage_watts()) row.power = d.power().usage_watts();
  row.holder = Holder(d);
  if (d.has_up()) row.up = d.up();
  return row;
}

template <typename T>
void AddTo(std::optional<T>& sum, T value) {
  sum = sum.value_or(T{}) + value;
}

NodeRow MakeNodeRow(const v1::NodeReport& r, std::chrono::system_clock::time_point now) {
  NodeRow row;
  row.node = r.node();
  row.devices = static_cast<size_t>(r.devices_size());
  double util_sum = 0;
  size_t util_count = 0;
  for (const v1::DeviceTelemetry& d : r.devices()) {
    DeviceRow dev = MakeDeviceRow(d);
    if (dev.util) {
      util_sum += *dev.util;
      ++util_count;
    }
    if (dev.mem_used) AddTo(row.mem_used, *dev.mem_used);
    if (dev.mem_total) AddTo(row.mem_total, *dev.mem_total);
    if (dev.temp) row.max_temp = std::max(row.max_temp.value_or(*dev.temp), *dev.temp);
    if (dev.power) AddTo(row.power, *dev.power);
    row.device_rows.push_back(std::move(dev));
  }
  if (util_count > 0) row.mean_util = util_sum / static_cast<double>(util_count);
  if (r.has_timestamp()) row.age_seconds = SecondsSince(r.timestamp(), now);
  const double interval = r.has_interval() ? static_cast<double>(ToNanos(r.interval())) / 1e9 : 0;
  row.stale = row.age_seconds && interval > 0 && *row.age_seconds > kStaleIntervals * interval;
  return row;
}

// Absent values sort last whichever way the present ones go.
template <typename T>
int CompareDescending(const std::optional<T>& a, const std::optional<T>& b) {
  if (a.has_value() != b.has_value()) return a.has_value() ? -1 : 1;
  if (!a) return 0;
  if (*a == *b) return 0;
  return *a > *b ? -1 : 1;
}

std::optional<double> MemoryShare(std::optional<uint64_t> used, std::optional<uint64_t> total) {
  if (!used) return std::nullopt;
  if (!total || *total == 0) return static_cast<double>(*used);  // no total: by bytes
  return static_cast<double>(*used) / static_cast<double>(*total);
}

int CompareNodes(const NodeRow& a, const NodeRow& b, SortKey key) {
  switch (key) {
    case SortKey::kNode:
      return 0;
    case SortKey::kUtil:
      return CompareDescending(a.mean_util, b.mean_util);
    case SortKey::kMemory:
      return CompareDescending(a.mem_used, b.mem_used);
    case SortKey::kTemp:
      return CompareDescending(a.max_temp, b.max_temp);
    case SortKey::kFindings:
      return CompareDescending(std::optional(a.findings), std::optional(b.findings));
  }
  return 0;
}

int CompareDevices(const DeviceRow& a, const DeviceRow& b, SortKey key) {
  switch (key) {
    case SortKey::kUtil:
      return CompareDescending(a.util, b.util);
    case SortKey::kMemory:
      return CompareDescending(MemoryShare(a.mem_used, a.mem_total),
                               MemoryShare(b.mem_used, b.mem_total));
    case SortKey::kTemp:
      return CompareDescending(a.temp, b.temp);
    case SortKey::kNode:
    case SortKey::kFindings:
      return 0;
  }
  return 0;
}

int SeverityRank(const std::string& severity) {
  if (severity == "critical") return 0;
  if (severity == "warning") return 1;
  return 2;
}

// Columns separated by two spaces, each as wide as its widest cell; the last is not padded.
std::string Table(const std::vector<std::string>& header,
                  const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width(header.size(), 0);
  for (size_t i = 0; i < header.size(); ++i) width[i] = header[i].size();
  for (const auto& row : rows) {
    for (size_t i = 0; i < row.size() && i < width.size(); ++i) {
      width[i] = std::max(width[i], row[i].size());
    }
  }
  std::string out;
  auto line = [&out, &width](const std::vector<std::string>& cells) {
    std::string text;
    for (size_t i = 0; i < cells.size(); ++i) {
      text += cells[i];
      if (i + 1 < cells.size()) text += std::string(width[i] - cells[i].size() + 2, ' ');
    }
    out += text + "\n";
  };
  line(header);
  for (const auto& row : rows) line(row);
  return out;
}

std::string OrDash(const std::string& s) { return s.empty() ? "-" : s; }

}  // namespace

std::string_view SortKeyName(SortKey key) {
  switch (key) {
    case SortKey::kNode:
      return "node";
    case SortKey::kUtil:
      return "util";
    case SortKey::kMemory:
      return "memory";
    case SortKey::kTemp:
      return "temp";
    case SortKey::kFindings:
      return "findings";
  }
  return "node";
}

std::optional<SortKey> ParseSortKey(std::string_view name) {
  for (const SortKey key : kSortKeys) {
    if (SortKeyName(key) == name) return key;
  }
  return std::nullopt;
}

SortKey NextSortKey(SortKey key) {
  const auto* it = std::find(std::begin(kSortKeys), std::end(kSortKeys), key);
  ++it;
  return it == std::end(kSortKeys) ? kSortKeys[0] : *it;
}

View BuildView(const std::vector<v1::NodeReport>& reports, const std::vector<v1::Finding>& findings,
               std::chrono::system_clock::time_point now, const ViewOptions& options) {
  View view;
  std::map<std::string, size_t, std::less<>> open_per_node;
  for (const v1::Finding& f : findings) {
    if (!f.has_end()) ++open_per_node[f.node()];
  }
  const std::string needle = Lower(options.filter);
  std::set<std::string, std::less<>> shown;
  for (const v1::NodeReport& r : reports) {
    NodeRow row = MakeNodeRow(r, now);
    if (!needle.empty()) {
      bool match = Contains(row.node, needle);
      for (const v1::DeviceTelemetry& d : r.devices()) {
        for (const v1::DeviceHolder& h : d.holders()) match = match || Contains(h.job(), needle);
      }
      if (!match) continue;
    }
    if (auto it = open_per_node.find(row.node); it != open_per_node.end()) {
      row.findings = it->second;
    }
    std::stable_sort(row.device_rows.begin(), row.device_rows.end(),
                     [key = options.sort](const DeviceRow& a, const DeviceRow& b) {
                       const int c = CompareDevices(a, b, key);
                       return c != 0 ? c < 0 : a.index < b.index;
                     });
    shown.insert(row.node);
    view.nodes.push_back(std::move(row));
  }
  std::stable_sort(view.nodes.begin(), view.nodes.end(),
                   [key = options.sort](const NodeRow& a, const NodeRow& b) {
                     const int c = CompareNodes(a, b, key);
                     return c != 0 ? c < 0 : a.node < b.node;
                   });

  for (const v1::Finding& f : findings) {
    if (f.has_end()) continue;
    // A job-wide finding may name a node that sent nothing; the filter also matches its job.
    if (!needle.empty() && !shown.contains(f.node()) && !Contains(f.job(), needle)) continue;
    view.findings.push_back(
        FindingRow{.severity = f.severity(),
                   .rule = f.rule(),
                   .node = f.node(),
                   .device = f.device(),
                   .summary = f.summary(),
                   .since_seconds = f.has_start() ? SecondsSince(f.start(), now) : std::nullopt});
  }
  std::stable_sort(view.findings.begin(), view.findings.end(),
                   [](const FindingRow& a, const FindingRow& b) {
                     const int ra = SeverityRank(a.severity), rb = SeverityRank(b.severity);
                     if (ra != rb) return ra < rb;
                     return a.since_seconds.value_or(0) > b.since_seconds.value_or(0);
                   });

  FleetSummary& s = view.summary;
  s.nodes = view.nodes.size();
  for (const NodeRow& n : view.nodes) {
    (n.stale ? s.stale : s.live) += 1;
    s.devices += n.devices;
  }
  s.findings = view.findings.size();
  for (const FindingRow& f : view.findings) {
    if (f.severity == "critical") ++s.critical;
    if (f.severity == "warning") ++s.warning;
  }
  return view;
}

std::string FormatGiB(std::optional<uint64_t> bytes) {
  if (!bytes) return "-";
  return fmt::format("{:.1f}", static_cast<double>(*bytes) / (1024.0 * 1024.0 * 1024.0));
}

std::string FormatBytes(std::optional<uint64_t> bytes) {
  return bytes ? std::to_string(*bytes) : "-";
}

std::string FormatMemory(std::optional<uint64_t> used, std::optional<uint64_t> total) {
  if (!used && !total) return "-";
  return FormatGiB(used) + "/" + FormatGiB(total) + "G";
}

std::string FormatPercent(std::optional<double> ratio) {
  if (!ratio || !std::isfinite(*ratio)) return "-";
  return fmt::format("{:.0f}%", *ratio * 100);
}

std::string FormatRatio(std::optional<double> ratio) {
  if (!ratio || !std::isfinite(*ratio)) return "-";
  return fmt::format("{:.2f}", *ratio);
}

std::string FormatCelsius(std::optional<double> celsius) {
  if (!celsius || !std::isfinite(*celsius)) return "-";
  return fmt::format("{:.0f}", *celsius);
}

std::string FormatWatts(std::optional<double> watts) {
  if (!watts || !std::isfinite(*watts)) return "-";
  return fmt::format("{:.0f}", *watts);
}

std::string FormatAge(std::optional<double> seconds) {
  if (!seconds || !std::isfinite(*seconds)) return "-";
  const double s = *seconds;
  if (s < 10) return fmt::format("{:.1f}s", s);
  const auto whole = static_cast<int64_t>(s);
  if (whole < 60) return fmt::format("{}s", whole);
  if (whole < 3600) return fmt::format("{}m{:02}s", whole / 60, whole % 60);
  if (whole < 86400) return fmt::format("{}h{:02}m", whole / 3600, whole % 3600 / 60);
  return fmt::format("{}d{}h", whole / 86400, whole % 86400 / 3600);
}

std::string FormatSummary(const FleetSummary& s) {
  return fmt::format(
      "nodes {} ({} live, {} stale)  devices {}  open findings {} ({} critical, {} warning)",
      s.nodes, s.live, s.stale, s.devices, s.findings, s.critical, s.warning);
}

std::string FormatText(const View& view, std::string_view source) {
  std::string out = fmt::format("accelmon top: {}\n{}\n\n", source, FormatSummary(view.summary));

  std::vector<std::vector<std::string>> rows;
  for (const NodeRow& n : view.nodes) {
    rows.push_back({n.node, n.stale ? "stale" : "live", std::to_string(n.devices),
                    FormatPercent(n.mean_util), FormatGiB(n.mem_used), FormatGiB(n.mem_total),
                    FormatCelsius(n.max_temp), FormatWatts(n.power), std::to_string(n.findings),
                    FormatAge(n.age_seconds)});
  }
  out += Table({"NODE", "STATE", "DEVICES", "UTIL", "MEM_USED_GIB", "MEM_TOTAL_GIB", "MAX_TEMP_C",
                "POWER_W", "FINDINGS", "AGE"},
               rows);

  rows.clear();
  for (const NodeRow& n : view.nodes) {
    for (const DeviceRow& d : n.device_rows) {
      rows.push_back({n.node, std::to_string(d.index), FormatBytes(d.mem_used),
                      FormatBytes(d.mem_total), FormatMemory(d.mem_used, d.mem_total),
                      FormatRatio(d.fragmentation), FormatPercent(d.util), FormatCelsius(d.temp),
                      FormatWatts(d.power), OrDash(d.holder), OrDash(d.model)});
    }
  }
  out += "\n";
  out += Table({"NODE", "IDX", "MEM_USED_BYTES", "MEM_TOTAL_BYTES", "MEMORY", "FRAG", "UTIL",
                "TEMP_C", "POWER_W", "HOLDER", "MODEL"},
               rows);

  rows.clear();
  for (const FindingRow& f : view.findings) {
    rows.push_back(
        {f.severity, f.rule, f.node, OrDash(f.device), FormatAge(f.since_seconds), f.summary});
  }
  out += "\n";
  out += Table({"SEVERITY", "RULE", "NODE", "DEVICE", "SINCE", "SUMMARY"}, rows);
  return out;
}

}  // namespace accelmon::top
