#include "diagnostics/series.h"

#include <charconv>
#include <limits>

#include "proto/time_format.h"

namespace accelmon::diagnostics {
namespace {

const v1::DeviceTelemetry* FindDevice(const v1::NodeReport& report, const v1::Finding& f) {
  if (!f.device_uuid().empty()) {
    for (const v1::DeviceTelemetry& d : report.devices()) {
      if (d.identity().uuid() == f.device_uuid()) return &d;
    }
    return nullptr;  // a UUID names one device; an index could be another one after a reset
  }
  uint32_t index = 0;
  const std::string& text = f.device();
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), index);
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size()) return nullptr;
  for (const v1::DeviceTelemetry& d : report.devices()) {
    if (d.identity().index() == index) return &d;
  }
  return nullptr;
}

const v1::Link* FindLink(const v1::NodeReport& report, const v1::Finding& f) {
  const google::protobuf::RepeatedPtrField<v1::Link>* links = &report.host().links();
  if (!f.device().empty() || !f.device_uuid().empty()) {
    const v1::DeviceTelemetry* device = FindDevice(report, f);
    if (device == nullptr) return nullptr;
    links = &device->links();
  }
  for (const v1::Link& link : *links) {
    if (link.name() == f.link()) return &link;
  }
  return nullptr;
}

std::optional<double> Bool(bool has, bool value) {
  if (!has) return std::nullopt;
  return value ? 1.0 : 0.0;
}

// transmit + receive bytes; absent unless both counters are there (half a sum would be a drop).
std::optional<double> LinkBytes(const v1::NodeReport& report, const v1::Finding& f) {
  const v1::Link* link = FindLink(report, f);
  if (link == nullptr || !link->has_transmit_bytes_total() || !link->has_receive_bytes_total()) {
    return std::nullopt;
  }
  return static_cast<double>(link->transmit_bytes_total()) +
         static_cast<double>(link->receive_bytes_total());
}

}  // namespace

std::optional<double> ExtractPlotValue(const v1::NodeReport& report, std::string_view metric,
                                       const v1::Finding& subject) {
  if (metric == "host_oom_kill_total") {
    const v1::HostVmstat& vm = report.host().vmstat();
    if (!vm.has_oom_kill_total()) return std::nullopt;
    return static_cast<double>(vm.oom_kill_total());
  }
  if (metric == "link_up") {
    const v1::Link* link = FindLink(report, subject);
    if (link == nullptr) return std::nullopt;
    return Bool(link->has_up(), link->up());
  }
  if (metric == "link_bytes_per_second") return std::nullopt;  // needs SeriesCollector

  const v1::DeviceTelemetry* d = FindDevice(report, subject);
  if (d == nullptr) return std::nullopt;
  if (metric == "fragmentation_ratio") {
    if (!d->memory().has_fragmentation_ratio()) return std::nullopt;
    return d->memory().fragmentation_ratio();
  }
  if (metric == "memory_used_bytes") {
    if (!d->memory().has_used_bytes()) return std::nullopt;
    return static_cast<double>(d->memory().used_bytes());
  }
  if (metric == "core_celsius") {
    if (!d->thermal().has_core_celsius()) return std::nullopt;
    return d->thermal().core_celsius();
  }
  if (metric == "compute_ratio") {
    if (!d->utilization().has_compute_ratio()) return std::nullopt;
    return d->utilization().compute_ratio();
  }
  if (metric == "sm_ratio") {
    if (!d->activity().has_sm_ratio()) return std::nullopt;
    return d->activity().sm_ratio();
  }
  if (metric == "ecc_corrected_total") {
    if (!d->errors().has_ecc_corrected_total()) return std::nullopt;
    return static_cast<double>(d->errors().ecc_corrected_total());
  }
  if (metric == "ecc_uncorrected_total") {
    if (!d->errors().has_ecc_uncorrected_total()) return std::nullopt;
    return static_cast<double>(d->errors().ecc_uncorrected_total());
  }
  if (metric == "device_up") return Bool(d->has_up(), d->up());
  return std::nullopt;
}

std::string_view PlotUnit(std::string_view metric) {
  if (metric == "fragmentation_ratio" || metric == "compute_ratio" || metric == "sm_ratio") {
    return "ratio";
  }
  if (metric == "memory_used_bytes") return "bytes";
  if (metric == "core_celsius") return "celsius";
  if (metric == "device_up" || metric == "link_up") return "bool";
  if (metric == "link_bytes_per_second") return "bytes_per_second";
  if (metric == "ecc_corrected_total" || metric == "ecc_uncorrected_total" ||
      metric == "host_oom_kill_total") {
    return "count";
  }
  return "";
}

SeriesCollector::SeriesCollector(std::span<const v1::Finding> findings, int64_t margin_ns) {
  tracks_.reserve(findings.size());
  for (const v1::Finding& f : findings) {
    const int64_t start = ToNanos(f.start());
    const int64_t to =
        f.has_end() ? ToNanos(f.end()) + margin_ns : std::numeric_limits<int64_t>::max();
    by_node_[f.node()].push_back(tracks_.size());
    tracks_.push_back(Track{.finding = &f,
                            .from_ns = start - margin_ns,
                            .to_ns = to,
                            .rate = f.plot() == "link_bytes_per_second",
                            .previous = std::nullopt,
                            .points = {}});
  }
}

void SeriesCollector::Add(const v1::NodeReport& report) {
  const auto node = by_node_.find(report.node());
  if (node == by_node_.end()) return;
  const int64_t now = ToNanos(report.timestamp());
  auto [last, inserted] = last_ns_.try_emplace(report.node(), now);
  if (!inserted) {
    if (now <= last->second) return;  // as the engine: rules saw only time-ordered reports
    last->second = now;
  }
  for (size_t i : node->second) {
    Track& t = tracks_[i];
    if (now > t.to_ns) continue;
    if (t.rate) {
      // The sample before the window still counts: it gives the window's first rate.
      const std::optional<double> bytes = LinkBytes(report, *t.finding);
      if (!bytes) {
        t.previous.reset();  // a gap: the next delta would span it
        continue;
      }
      const auto previous = t.previous;
      t.previous = std::pair(now, *bytes);
      // A counter that went down was reset: no rate across it.
      if (now < t.from_ns || !previous || *bytes < previous->second) continue;
      const double seconds = static_cast<double>(now - previous->first) / 1e9;
      t.points.push_back({now, (*bytes - previous->second) / seconds});
      continue;
    }
    if (now < t.from_ns) continue;
    if (auto value = ExtractPlotValue(report, t.finding->plot(), *t.finding)) {
      t.points.push_back({now, *value});
    }
  }
}

}  // namespace accelmon::diagnostics
