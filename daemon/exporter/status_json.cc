#include "daemon/exporter/status_json.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>
#include <set>

#include "daemon/common/version.h"
#include "proto/enum_labels.h"
#include "proto/json_string.h"
#include "proto/time_format.h"

namespace accelmon {
namespace {

constexpr std::string_view kRunbookBase =
    "https://github.com/accelmon/accelmon/blob/main/docs/runbooks.md";

// Writes one JSON object's members; a value the source did not report is left out, never 0.
class JsonObject {
 public:
  explicit JsonObject(std::string& out) : out_(out) { out_ += '{'; }
  ~JsonObject() { out_ += '}'; }
  JsonObject(const JsonObject&) = delete;
  JsonObject& operator=(const JsonObject&) = delete;

  void Number(std::string_view key, double value) {
    Key(key);
    if (std::isfinite(value)) {
      fmt::format_to(std::back_inserter(out_), "{}", value);
    } else {
      out_ += "null";
    }
  }
  void Integer(std::string_view key, uint64_t value) {
    Key(key);
    fmt::format_to(std::back_inserter(out_), "{}", value);
  }
  void Bool(std::string_view key, bool value) {
    Key(key);
    out_ += value ? "true" : "false";
  }
  void String(std::string_view key, std::string_view value) {
    Key(key);
    out_ += JsonString(value);
  }
  // Only when not empty.
  void NonEmpty(std::string_view key, std::string_view value) {
    if (!value.empty()) String(key, value);
  }
  // The caller writes the value (an object or an array) next.
  void Key(std::string_view key) {
    if (!first_) out_ += ',';
    first_ = false;
    out_ += '"';
    out_ += key;
    out_ += "\":";
  }

 private:
  std::string& out_;
  bool first_ = true;
};

// "[a,b,...]" with `write` writing each element.
template <typename Range, typename Write>
void Array(std::string& out, const Range& range, Write write) {
  out += '[';
  bool first = true;
  for (const auto& item : range) {
    if (!first) out += ',';
    first = false;
    write(item);
  }
  out += ']';
}

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// Open findings per node, by severity.
struct FindingCounts {
  uint64_t critical = 0;
  uint64_t warning = 0;
};

// One row of the node table: what the page shows without asking for the node's devices.
void WriteNodeRow(const NodeEntry& entry, Clock::time_point now, const FindingCounts* findings,
                  std::string& out) {
  const v1::NodeReport& r = *entry.report;
  JsonObject o(out);
  o.String("node", r.node());
  o.Bool("up", NodeIsUp(entry, now));
  // Shown while the recording could not be written: not in it yet.
  o.Bool("recorded", !entry.unrecorded);
  o.Number("age_seconds", Seconds(now - entry.received_at));
  o.Number("report_time", ToSeconds(r.timestamp()));
  if (r.has_interval())
    o.Number("interval_seconds", static_cast<double>(ToNanos(r.interval())) / 1e9);
  o.NonEmpty("agent_version", r.agent_version());
  o.Integer("devices", static_cast<uint64_t>(r.devices_size()));
  // Sums and means over the devices that report the value; absent when none does.
  double util_sum = 0, power_sum = 0, temp_max = -INFINITY;
  uint64_t used = 0, total = 0;
  int util_n = 0, power_n = 0, used_n = 0, total_n = 0, down = 0;
  std::set<std::string> jobs;
  for (const v1::DeviceTelemetry& d : r.devices()) {
    if (d.has_up() && !d.up()) ++down;
    if (d.utilization().has_compute_ratio()) util_sum += d.utilization().compute_ratio(), ++util_n;
    if (d.power().has_usage_watts()) power_sum += d.power().usage_watts(), ++power_n;
    if (d.thermal().has_core_celsius()) temp_max = std::max(temp_max, d.thermal().core_celsius());
    if (d.memory().has_used_bytes()) used += d.memory().used_bytes(), ++used_n;
    if (d.memory().has_total_bytes()) total += d.memory().total_bytes(), ++total_n;
    for (const v1::DeviceHolder& h : d.holders()) {
      if (!h.job().empty()) jobs.insert(h.job());
    }
  }
  if (down > 0) o.Integer("devices_down", static_cast<uint64_t>(down));
  if (util_n > 0) o.Number("utilization_ratio", util_sum / util_n);
  if (used_n > 0) o.Integer("memory_used_bytes", used);
  if (total_n > 0) o.Integer("memory_total_bytes", total);
  if (std::isfinite(temp_max)) o.Number("temperature_max_celsius", temp_max);
  if (power_n > 0) o.Number("power_watts", power_sum);
  o.Key("jobs");
  Array(out, jobs, [&](const std::string& job) { out += JsonString(job); });
  o.Integer("findings_critical", findings ? findings->critical : 0);
  o.Integer("findings_warning", findings ? findings->warning : 0);
  if (r.agent().has_spool_reports()) o.Integer("agent_spool_reports", r.agent().spool_reports());
  if (r.agent().has_dropped_reports_total()) {
    o.Integer("agent_dropped_reports_total", r.agent().dropped_reports_total());
  }
  int failed = 0;
  for (const v1::CollectorStatus& c : r.collectors()) failed += c.success() ? 0 : 1;
  o.Integer("collectors_failing", static_cast<uint64_t>(failed));
}

void WriteDevice(const v1::DeviceTelemetry& d, std::string& out) {
  JsonObject o(out);
  const v1::DeviceIdentity& id = d.identity();
  o.Integer("index", id.index());
  o.NonEmpty("vendor", id.vendor());
  o.NonEmpty("model", id.model());
  o.NonEmpty("uuid", id.uuid());
  o.NonEmpty("pci_bus_id", id.pci_bus_id());
  if (d.has_up()) o.Bool("up", d.up());
  const v1::DeviceMemory& m = d.memory();
  if (m.has_total_bytes()) o.Integer("memory_total_bytes", m.total_bytes());
  if (m.has_used_bytes()) o.Integer("memory_used_bytes", m.used_bytes());
  if (m.has_free_bytes()) o.Integer("memory_free_bytes", m.free_bytes());
  if (m.has_largest_free_block_bytes()) {
    o.Integer("memory_largest_free_block_bytes", m.largest_free_block_bytes());
  }
  if (m.has_fragmentation_ratio()) o.Number("memory_fragmentation_ratio", m.fragmentation_ratio());
  const v1::DeviceUtilization& u = d.utilization();
  if (u.has_compute_ratio()) o.Number("utilization_ratio", u.compute_ratio());
  if (u.has_memory_bandwidth_ratio()) {
    o.Number("memory_bandwidth_ratio", u.memory_bandwidth_ratio());
  }
  const v1::DeviceThermal& t = d.thermal();
  if (t.has_core_celsius()) o.Number("temperature_celsius", t.core_celsius());
  if (t.has_memory_celsius()) o.Number("memory_temperature_celsius", t.memory_celsius());
  if (t.has_slowdown_threshold_celsius()) {
    o.Number("slowdown_threshold_celsius", t.slowdown_threshold_celsius());
  }
  std::vector<std::string> throttling;
  for (const auto& [reason, active] : t.throttle_reasons()) {
    if (active) throttling.push_back(reason);
  }
  std::sort(throttling.begin(), throttling.end());
  o.Key("throttling");
  Array(out, throttling, [&](const std::string& s) { out += JsonString(s); });
  const v1::DevicePower& p = d.power();
  if (p.has_usage_watts()) o.Number("power_watts", p.usage_watts());
  if (p.has_limit_watts()) o.Number("power_limit_watts", p.limit_watts());
  if (d.clocks().has_compute_hz()) o.Number("clock_hz", d.clocks().compute_hz());
  o.Key("links");
  Array(out, d.links(), [&](const v1::Link& l) {
    JsonObject lo(out);
    lo.String("name", l.name());
    lo.NonEmpty("kind", LinkKindLabel(l.kind()));
    if (l.has_up()) lo.Bool("up", l.up());
    if (l.has_transmit_bytes_total()) lo.Integer("transmit_bytes_total", l.transmit_bytes_total());
    if (l.has_receive_bytes_total()) lo.Integer("receive_bytes_total", l.receive_bytes_total());
    if (l.has_max_bandwidth_bytes_per_second()) {
      lo.Number("max_bandwidth_bytes_per_second", l.max_bandwidth_bytes_per_second());
    }
  });
  o.Key("holders");
  Array(out, d.holders(), [&](const v1::DeviceHolder& h) {
    JsonObject ho(out);
    ho.NonEmpty("kind", HolderKindLabel(h.kind()));
    ho.NonEmpty("job", h.job());
    ho.NonEmpty("pod", h.pod());
    ho.NonEmpty("namespace", h.namespace_());
    ho.NonEmpty("step", h.step());
    ho.NonEmpty("rank", h.rank());
    ho.NonEmpty("user", h.user());
    ho.NonEmpty("command", h.command());
    if (h.has_memory_used_bytes()) ho.Integer("memory_used_bytes", h.memory_used_bytes());
  });
}

void WriteFinding(const v1::Finding& f, std::string& out) {
  JsonObject o(out);
  o.String("rule", f.rule());
  o.String("severity", f.severity());
  o.String("node", f.node());
  o.NonEmpty("device", f.device());
  o.NonEmpty("link", f.link());
  o.NonEmpty("job", f.job());
  o.String("summary", f.summary());
  if (f.has_start()) o.Number("start", ToSeconds(f.start()));
  if (f.has_detected_at()) o.Number("detected_at", ToSeconds(f.detected_at()));
  o.NonEmpty("caused_by", f.caused_by());
  o.NonEmpty("consequence_of", f.consequence_of());
  o.NonEmpty("action", f.action());
  o.String("runbook", RunbookUrl(f.rule()));
  o.Key("evidence");
  Array(out, f.evidence(), [&](const v1::Evidence& e) {
    JsonObject eo(out);
    eo.String("name", e.name());
    if (e.has_value()) eo.Number("value", e.value());
    eo.NonEmpty("text", e.text());
    eo.NonEmpty("unit", e.unit());
  });
}

void WriteExporter(const ExporterStats& stats, double uptime, const DiagnosticsService* diagnostics,
                   std::string& out) {
  JsonObject o(out);
  o.String("version", kVersion);
  o.String("revision", kRevision);
  o.Number("uptime_seconds", uptime);
  o.Integer("reports_applied_total", stats.reports_applied.load());
  o.Integer("reports_duplicate_total", stats.reports_duplicate.load());
  uint64_t rejected = 0;
  for (const auto& [reason, n] : stats.rejected()) rejected += n;
  o.Integer("reports_rejected_total", rejected);
  uint64_t dropped = 0;
  for (const auto& [reason, n] : stats.dropped()) dropped += n;
  o.Integer("report_parts_dropped_total", dropped);
  o.Integer("streams_active", static_cast<uint64_t>(std::max<int64_t>(0, stats.streams_active)));
  o.Integer("reads_throttled_total", stats.reads_throttled.load());
  o.Integer("series", stats.last_scrape_series.load());
  o.Number("scrape_duration_seconds", stats.last_scrape_seconds.load());
  o.Bool("config_reload_successful", stats.config_reload_successful.load());
  o.Key("diagnostics");
  {
    JsonObject d(out);
    d.Bool("enabled", diagnostics != nullptr && diagnostics->enabled());
    if (diagnostics != nullptr) d.Integer("dropped_reports_total", diagnostics->dropped());
  }
  o.Key("recording");
  {
    JsonObject rec(out);
    rec.Bool("enabled", stats.recording.load());
    if (stats.recording) {
      const recording::RecorderStats& r = stats.recorder;
      rec.Integer("reports_total", r.reports.load());
      rec.Integer("segments", r.segments.load());
      rec.Integer("bytes", r.segment_bytes.load());
      rec.Integer("errors_total", r.errors.load());
      rec.Integer("waiting_reports", r.waiting.load());
      rec.NonEmpty("failure", r.failure());
    }
  }
}

}  // namespace

std::string RunbookUrl(std::string_view rule) {
  // The alert of rule foo_bar is AccelmonFooBar, whose section's anchor is #accelmonfoobar.
  std::string anchor = "accelmon";
  for (const char c : rule) {
    if (c != '_') anchor += c;
  }
  return fmt::format("{}#{}", kRunbookBase, anchor);
}

StatusRenderer::StatusRenderer(NodeStore& store, ExporterStats& stats,
                               DiagnosticsService* diagnostics,
                               std::function<Clock::time_point()> clock)
    : store_(store), stats_(stats), diagnostics_(diagnostics), clock_(std::move(clock)) {}

void StatusRenderer::RenderJson(std::string_view node, std::string& out) const {
  const Clock::time_point now = clock_();
  const std::vector<NodeEntry> nodes = store_.Snapshot(now);
  std::vector<v1::Finding> findings;
  if (diagnostics_ != nullptr && diagnostics_->enabled())
    findings = diagnostics_->Findings({}, false);
  std::map<std::string, FindingCounts, std::less<>> per_node;
  FindingCounts total;
  for (const v1::Finding& f : findings) {
    const bool critical = f.severity() == "critical";
    (critical ? per_node[f.node()].critical : per_node[f.node()].warning) += 1;
    (critical ? total.critical : total.warning) += 1;
  }
  uint64_t live = 0, devices = 0;
  for (const NodeEntry& e : nodes) {
    live += NodeIsUp(e, now) ? 1 : 0;
    devices += static_cast<uint64_t>(e.report->devices_size());
  }

  out.clear();
  JsonObject o(out);
  o.Number("time", Seconds(now.time_since_epoch()));
  o.Key("summary");
  {
    JsonObject s(out);
    s.Integer("nodes", nodes.size());
    s.Integer("nodes_live", live);
    s.Integer("nodes_stale", nodes.size() - live);
    s.Integer("devices", devices);
    s.Integer("findings_critical", total.critical);
    s.Integer("findings_warning", total.warning);
  }
  o.Key("exporter");
  WriteExporter(stats_, Seconds(std::chrono::steady_clock::now() - started_), diagnostics_, out);
  o.Key("nodes");
  Array(out, nodes, [&](const NodeEntry& e) {
    const auto it = per_node.find(e.report->node());
    WriteNodeRow(e, now, it == per_node.end() ? nullptr : &it->second, out);
  });
  o.Key("findings");
  Array(out, findings, [&](const v1::Finding& f) { WriteFinding(f, out); });
  if (node.empty()) return;
  const auto selected = std::find_if(nodes.begin(), nodes.end(),
                                     [&](const NodeEntry& e) { return e.report->node() == node; });
  o.Key("node");
  if (selected == nodes.end()) {
    out += "null";  // gone (expired) or never seen
    return;
  }
  JsonObject n(out);
  n.String("node", node);
  n.Number("report_time", ToSeconds(selected->report->timestamp()));
  n.Key("devices");
  Array(out, selected->report->devices(),
        [&](const v1::DeviceTelemetry& d) { WriteDevice(d, out); });
}

}  // namespace accelmon
