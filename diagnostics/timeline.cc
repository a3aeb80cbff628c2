#include "diagnostics/timeline.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <limits>
#include <map>
#include <tuple>

#include "diagnostics/rule.h"
#include "diagnostics/rules/format.h"
#include "proto/time_format.h"

namespace accelmon::diagnostics {
namespace {

constexpr int64_t kSecond = 1'000'000'000;
constexpr int64_t kMinute = 60 * kSecond;

std::tm UtcTm(int64_t ns) {
  int64_t seconds = ns / kSecond;
  if (ns % kSecond < 0) --seconds;
  const auto t = static_cast<std::time_t>(seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  return tm;
}

// "03:20:11": the time of day, for an end on the day the finding started.
std::string TimeOfDay(int64_t ns) {
  const std::tm tm = UtcTm(ns);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%02d:%02d:%02d", tm.tm_hour, tm.tm_min, tm.tm_sec);
  return buf;
}

bool SameDay(int64_t a, int64_t b) {
  const std::tm x = UtcTm(a);
  const std::tm y = UtcTm(b);
  return x.tm_year == y.tm_year && x.tm_yday == y.tm_yday;
}

// `ns` beside `other` on one line: the time of day when on the same day, else in full.
std::string TimeBeside(int64_t ns, int64_t other) {
  return SameDay(ns, other) ? TimeOfDay(ns) : FormatRfc3339(ns);
}

std::string Plural(uint64_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

std::string Upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// Shortest text that reads back as the same double.
std::string Number(double v) {
  char buf[32];
  const auto [ptr, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return ec == std::errc() ? std::string(buf, ptr) : "0";
}

// "0.62", "12345678", "1.5e+10": evidence for people.
std::string Readable(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

std::string SizeText(double bytes) { return FormatNumber(bytes, 0, ""); }

std::string SubjectText(const v1::Finding& f) {
  std::string s = "node " + f.node();
  if (!f.device().empty()) s += " device " + f.device();
  if (!f.link().empty()) s += " link " + f.link();
  return s;
}

std::string EvidenceText(const v1::Evidence& e) {
  std::string s = e.name() + ": ";
  if (e.has_value()) {
    s += Readable(e.value());
    if (!e.unit().empty()) s += " " + e.unit();
    if (!e.text().empty()) s += " (" + e.text() + ")";
  } else {
    s += e.text();
  }
  return s;
}

std::string JsonNumber(double v) { return std::isfinite(v) ? Number(v) : "null"; }

std::string JsonTime(const std::optional<int64_t>& ns) {
  return ns ? JsonString(FormatRfc3339(*ns)) : "null";
}

std::string Html(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (const char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// Counts by rule and by severity: "job_stall 1, memory_fragmentation 2; critical 1, warning 2".
std::string Counts(std::span<const v1::Finding> findings) {
  std::map<std::string, uint64_t> rules;
  std::map<std::string, uint64_t> severities;
  for (const v1::Finding& f : findings) {
    ++rules[f.rule()];
    ++severities[f.severity()];
  }
  std::string s;
  for (const auto& [rule, n] : rules) s += (s.empty() ? "" : ", ") + rule + " " + std::to_string(n);
  s += ";";
  bool first = true;
  for (const auto& [severity, n] : severities) {
    s += (first ? " " : ", ") + severity + " " + std::to_string(n);
    first = false;
  }
  return s;
}

// The finding that `caused_by` names: the latest one of that name that started by this one's
// detection; nullopt when it is not among them (a cause outside the input's time range).
std::optional<size_t> CauseIndex(std::span<const v1::Finding> findings, size_t i) {
  const v1::Finding& f = findings[i];
  if (f.caused_by().empty()) return std::nullopt;
  const int64_t by = f.has_detected_at() ? ToNanos(f.detected_at()) : ToNanos(f.start());
  std::optional<size_t> found;
  for (size_t j = 0; j < findings.size(); ++j) {
    if (j != i && ToNanos(findings[j].start()) <= by && FindingName(findings[j]) == f.caused_by()) {
      found = j;
    }
  }
  return found;
}

// "4m 30s after it began": detection against onset, for people.
std::string DetectedText(const v1::Finding& f) {
  const int64_t start = ToNanos(f.start());
  const int64_t detected = ToNanos(f.detected_at());
  std::string out = "detected " + TimeBeside(detected, start);
  if (detected > start) {
    out += " (" + FormatDuration(std::chrono::nanoseconds(detected - start)) + " after it began)";
  }
  if (f.has_window_start() && ToNanos(f.window_start()) < start) {
    out += "; judged on reports since " + TimeBeside(ToNanos(f.window_start()), detected);
  }
  return out;
}

uint64_t OpenCount(std::span<const v1::Finding> findings) {
  return static_cast<uint64_t>(
      std::count_if(findings.begin(), findings.end(), [](const auto& f) { return !f.has_end(); }));
}

// "INPUT: 4800 reports from 2 nodes, FIRST .. LAST (40m00s)" and what was lost or skipped.
std::string InputLine(const InputSummary& in) {
  std::string s = in.input + ": " + Plural(in.reports, "report", "reports") + " from " +
                  Plural(in.nodes, "node", "nodes");
  if (in.first_ns && in.last_ns) {
    s += ", " + FormatRfc3339(*in.first_ns) + " .. " + FormatRfc3339(*in.last_ns) + " (" +
         FormatDuration(std::chrono::nanoseconds(*in.last_ns - *in.first_ns)) + ")";
  }
  if (in.recordings > 1) {
    s += "; " + Plural(in.recordings, "recording", "recordings") + " merged by time";
    if (in.duplicates > 0) {
      s += ", " + Plural(in.duplicates, "report", "reports") + " held by two of them read once";
    }
  }
  if (in.damaged_regions > 0) {
    s += "; DAMAGED: " + Plural(in.damaged_regions, "region", "regions") + ", " +
         SizeText(static_cast<double>(in.damaged_bytes)) + " bytes lost";
  }
  if (in.out_of_order > 0) {
    s += "; " + Plural(in.out_of_order, "report", "reports") +
         " skipped (not newer than their node's previous)";
  }
  if (!in.job.empty()) {
    std::string nodes;
    for (const std::string& n : in.job_nodes) nodes += (nodes.empty() ? "" : ", ") + n;
    s += "\njob " + in.job + ": " + Plural(in.job_devices, "device", "devices") + " on " +
         Plural(in.job_nodes.size(), "node", "nodes") + (nodes.empty() ? "" : " (" + nodes + ")");
  }
  return s;
}

// ---------------------------------------------------------------------------------------------
// The SVG plot

constexpr double kWidth = 760;
constexpr double kHeight = 220;
constexpr double kLeft = 80;
constexpr double kRight = 16;
constexpr double kTop = 12;
constexpr double kBottom = 28;

// A y-axis label in the plot's unit: bytes as GiB, ratios as %.
std::string AxisValue(double v, std::string_view unit) {
  char buf[48];
  if (unit == "bytes") {
    std::snprintf(buf, sizeof buf, "%.2f GiB", v / (1024.0 * 1024 * 1024));
  } else if (unit == "bytes_per_second") {
    if (std::fabs(v) >= 1024.0 * 1024 * 1024) {
      std::snprintf(buf, sizeof buf, "%.2f GiB/s", v / (1024.0 * 1024 * 1024));
    } else {
      std::snprintf(buf, sizeof buf, "%.1f MiB/s", v / (1024.0 * 1024));
    }
  } else if (unit == "ratio") {
    std::snprintf(buf, sizeof buf, "%.0f%%", v * 100);
  } else if (unit == "celsius") {
    std::snprintf(buf, sizeof buf, "%.0f \u00b0C", v);
  } else if (unit == "bool") {
    return v >= 0.5 ? "up" : "down";
  } else {
    std::snprintf(buf, sizeof buf, "%.4g", v);
  }
  return buf;
}

std::string Fixed(double v) { return FormatNumber(v, 1, ""); }

// A time-axis step that gives at most about seven ticks.
int64_t TimeStep(int64_t span_ns) {
  static constexpr int64_t kSteps[] = {10 * kSecond,   30 * kSecond,   kMinute,       2 * kMinute,
                                       5 * kMinute,    10 * kMinute,   15 * kMinute,  30 * kMinute,
                                       60 * kMinute,   120 * kMinute,  360 * kMinute, 720 * kMinute,
                                       1440 * kMinute, 10080 * kMinute};
  for (int64_t step : kSteps) {
    if (span_ns / step <= 7) return step;
  }
  return kSteps[std::size(kSteps) - 1];
}

void WritePlot(std::ostream& out, const v1::Finding& f, const InputSummary& input,
               const std::vector<SeriesPoint>& points) {
  const std::string_view unit = PlotUnit(f.plot());
  const int64_t start = ToNanos(f.start());
  const int64_t x0 = start - SeriesCollector::kDefaultMarginNs;
  int64_t x1 = f.has_end() ? ToNanos(f.end()) + SeriesCollector::kDefaultMarginNs
                           : input.last_ns.value_or(start);
  // Points are what the collector kept; the axis must hold them even when the input ran on.
  if (!points.empty()) x1 = std::max(x1, points.back().time_ns);
  x1 = std::max(x1, x0 + kMinute);

  double lo = points.front().value;
  double hi = lo;
  for (const SeriesPoint& p : points) {
    lo = std::min(lo, p.value);
    hi = std::max(hi, p.value);
  }
  if (unit == "ratio" || unit == "bool") {
    lo = std::min(lo, 0.0);
    hi = std::max(hi, 1.0);
  } else if (unit == "bytes" || unit == "bytes_per_second" || unit == "count") {
    lo = std::min(lo, 0.0);
  }
  if (hi - lo < 1e-12) {
    const double pad = std::max(std::fabs(hi) * 0.1, 1.0);
    lo -= pad;
    hi += pad;
  }

  const double plot_w = kWidth - kLeft - kRight;
  const double plot_h = kHeight - kTop - kBottom;
  auto x = [&](int64_t t) {
    return kLeft + plot_w * static_cast<double>(t - x0) / static_cast<double>(x1 - x0);
  };
  auto y = [&](double v) { return kTop + plot_h * (1 - (v - lo) / (hi - lo)); };

  out << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kWidth << "\" height=\"" << kHeight
      << "\" viewBox=\"0 0 " << kWidth << ' ' << kHeight << "\" role=\"img\" aria-label=\""
      << Html(f.plot()) << "\">\n";
  // The finding's span, shaded.
  const double span_from = x(std::max(start, x0));
  const double span_to = x(std::min(f.has_end() ? ToNanos(f.end()) : x1, x1));
  out << "<rect class=\"span " << Html(f.severity()) << "\" x=\"" << Fixed(span_from) << "\" y=\""
      << kTop << "\" width=\"" << Fixed(std::max(span_to - span_from, 1.0)) << "\" height=\""
      << plot_h << "\"/>\n";
  // Axes, with value labels at five levels and time labels at round steps.
  out << "<g class=\"axis\">\n";
  for (int i = 0; i <= 4; ++i) {
    const double v = lo + (hi - lo) * i / 4;
    if (unit == "bool" && i % 4 != 0) continue;
    out << "<line x1=\"" << kLeft << "\" x2=\"" << kWidth - kRight << "\" y1=\"" << Fixed(y(v))
        << "\" y2=\"" << Fixed(y(v)) << "\" class=\"grid\"/>"
        << "<text x=\"" << kLeft - 6 << "\" y=\"" << Fixed(y(v) + 4) << "\" text-anchor=\"end\">"
        << Html(AxisValue(v, unit)) << "</text>\n";
  }
  const int64_t step = TimeStep(x1 - x0);
  for (int64_t t = (x0 / step + 1) * step; t <= x1; t += step) {
    const std::string label = TimeOfDay(t).substr(0, step < kMinute ? 8 : 5);
    out << "<line x1=\"" << Fixed(x(t)) << "\" x2=\"" << Fixed(x(t)) << "\" y1=\"" << kTop
        << "\" y2=\"" << kTop + plot_h << "\" class=\"grid\"/>"
        << "<text x=\"" << Fixed(x(t)) << "\" y=\"" << kHeight - 8 << "\" text-anchor=\"middle\">"
        << label << "</text>\n";
  }
  out << "<rect class=\"frame\" x=\"" << kLeft << "\" y=\"" << kTop << "\" width=\"" << plot_w
      << "\" height=\"" << plot_h << "\"/>\n</g>\n";

  // The line, broken where reports are missing (a gap over 3x the usual interval).
  std::vector<int64_t> steps;
  for (size_t i = 1; i < points.size(); ++i)
    steps.push_back(points[i].time_ns - points[i - 1].time_ns);
  int64_t gap = std::numeric_limits<int64_t>::max();
  if (!steps.empty()) {
    std::nth_element(steps.begin(), steps.begin() + static_cast<ptrdiff_t>(steps.size() / 2),
                     steps.end());
    gap = 3 * std::max<int64_t>(steps[steps.size() / 2], kSecond);
  }
  size_t begin = 0;
  for (size_t i = 1; i <= points.size(); ++i) {
    if (i < points.size() && points[i].time_ns - points[i - 1].time_ns <= gap) continue;
    if (i - begin == 1) {
      out << "<circle class=\"line\" cx=\"" << Fixed(x(points[begin].time_ns)) << "\" cy=\""
          << Fixed(y(points[begin].value)) << "\" r=\"2\"/>\n";
    } else {
      out << "<polyline class=\"line\" points=\"";
      for (size_t j = begin; j < i; ++j) {
        out << (j == begin ? "" : " ") << Fixed(x(points[j].time_ns)) << ','
            << Fixed(y(points[j].value));
      }
      out << "\"/>\n";
    }
    begin = i;
  }
  out << "</svg>\n";
}

constexpr const char* kStyle = R"(body{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#222}
h1{font-size:1.4em}h2{font-size:1.1em;margin-top:2em}
table{border-collapse:collapse}td,th{padding:.25em .6em;border-bottom:1px solid #ddd;text-align:left;vertical-align:top}
.critical{color:#b00020;font-weight:bold}.warning{color:#a15c00;font-weight:bold}
code{font-size:.95em}.note{color:#666}ul{margin:.3em 0}tr.consequence td{color:#555}tr.consequence td:first-child{padding-left:1.6em}
svg text{font:11px system-ui,sans-serif;fill:#444}
svg .grid{stroke:#eee}svg .frame{fill:none;stroke:#999}
svg .line{fill:none;stroke:#1f5fbf;stroke-width:1.5}svg circle.line{fill:#1f5fbf}
svg .span{fill:#f5c542;fill-opacity:.25}svg .span.critical{fill:#e0453a;fill-opacity:.18}
)";

}  // namespace

void SortFindings(std::vector<v1::Finding>& findings) {
  std::stable_sort(findings.begin(), findings.end(), [](const auto& a, const auto& b) {
    return std::tuple(ToNanos(a.start()), a.node(), a.rule(), a.device(), a.link()) <
           std::tuple(ToNanos(b.start()), b.node(), b.rule(), b.device(), b.link());
  });
}

// Which findings of a timeline are likely consequences of another one in it.
struct Groups {
  std::vector<std::optional<size_t>> first_fault;  // per finding: its first fault's index
  std::vector<std::vector<size_t>> consequences;   // per finding: its consequences' indices
};

static Groups GroupConsequences(std::span<const v1::Finding> findings) {
  std::map<std::string, size_t, std::less<>> by_name;
  for (size_t i = 0; i < findings.size(); ++i) by_name.emplace(FindingName(findings[i]), i);
  Groups g{.first_fault = std::vector<std::optional<size_t>>(findings.size()),
           .consequences = std::vector<std::vector<size_t>>(findings.size())};
  for (size_t i = 0; i < findings.size(); ++i) {
    if (findings[i].consequence_of().empty()) continue;
    const auto first = by_name.find(findings[i].consequence_of());
    if (first == by_name.end() || first->second == i) continue;
    g.consequences[first->second].push_back(i);
    g.first_fault[i] = first->second;
  }
  return g;
}

// One finding of the text timeline: its line, then its details, each line after `indent`.
static void WriteTextFinding(std::ostream& out, const v1::Finding& f, std::string_view indent) {
  char severity[16];
  std::snprintf(severity, sizeof severity, "%-8s", Upper(f.severity()).c_str());
  out << indent << FormatRfc3339(ToNanos(f.start())) << "  " << severity << "  " << f.rule() << "  "
      << SubjectText(f) << "  " << f.summary() << '\n';
  const std::string pad = std::string(indent) + "    ";
  // The job, unless the evidence says it already.
  const bool job_in_evidence =
      std::any_of(f.evidence().begin(), f.evidence().end(),
                  [&](const v1::Evidence& e) { return e.name() == "job" && e.text() == f.job(); });
  if (!f.job().empty() && !job_in_evidence) out << pad << "job: " << f.job() << '\n';
  if (f.has_detected_at()) out << pad << DetectedText(f) << '\n';
  if (!f.caused_by().empty()) out << pad << "caused by " << f.caused_by() << '\n';
  if (!f.consequence_of().empty()) {
    out << pad << "likely a consequence of " << f.consequence_of() << '\n';
  }
  if (!f.action().empty()) out << pad << "action: " << f.action() << '\n';
  for (const v1::Evidence& e : f.evidence()) out << pad << EvidenceText(e) << '\n';
  if (f.has_end()) {
    const int64_t start = ToNanos(f.start());
    const int64_t end = ToNanos(f.end());
    out << pad << "ended " << TimeBeside(end, start) << " ("
        << FormatDuration(std::chrono::nanoseconds(end - start)) << ")\n";
  } else {
    out << pad << "still open\n";
  }
}

void WriteText(std::ostream& out, std::span<const v1::Finding> findings,
               const InputSummary& input) {
  out << InputLine(input) << "\n\n";
  if (findings.empty()) {
    out << "no findings\n";
    return;
  }
  // A likely consequence of a finding in the list is printed under it, not as an incident of
  // its own: the person paged reads the first fault, then what followed from it.
  const Groups groups = GroupConsequences(findings);
  for (size_t i = 0; i < findings.size(); ++i) {
    if (groups.first_fault[i]) continue;
    WriteTextFinding(out, findings[i], "");
    if (groups.consequences[i].empty()) continue;
    out << "    "
        << Plural(groups.consequences[i].size(), "likely consequence", "likely consequences")
        << " of it:\n";
    for (const size_t j : groups.consequences[i]) WriteTextFinding(out, findings[j], "      ");
  }
  const uint64_t open = OpenCount(findings);
  out << '\n'
      << Plural(findings.size(), "finding", "findings") << " (" << open
      << " still open): " << Counts(findings) << '\n';
}

void WriteJson(std::ostream& out, std::span<const v1::Finding> findings,
               const InputSummary& input) {
  out << "{\"input\": {\"path\": " << JsonString(input.input) << ", \"reports\": " << input.reports
      << ", \"nodes\": " << input.nodes << ", \"first\": " << JsonTime(input.first_ns)
      << ", \"last\": " << JsonTime(input.last_ns) << ", \"damage\": " << input.damaged_regions
      << ", \"damaged_bytes\": " << input.damaged_bytes
      << ", \"out_of_order\": " << input.out_of_order;
  if (input.recordings > 1) {
    out << ", \"recordings\": " << input.recordings << ", \"duplicates\": " << input.duplicates;
  }
  if (!input.job.empty()) {
    out << ", \"job\": {\"id\": " << JsonString(input.job) << ", \"nodes\": [";
    for (size_t i = 0; i < input.job_nodes.size(); ++i) {
      out << (i == 0 ? "" : ", ") << JsonString(input.job_nodes[i]);
    }
    out << "], \"devices\": " << input.job_devices << '}';
  }
  out << "},\n \"findings\": [";
  bool first = true;
  for (const v1::Finding& f : findings) {
    out << (first ? "\n  " : ",\n  ");
    first = false;
    out << "{\"rule\": " << JsonString(f.rule()) << ", \"severity\": " << JsonString(f.severity())
        << ", \"node\": " << JsonString(f.node()) << ", \"device\": " << JsonString(f.device())
        << ", \"link\": " << JsonString(f.link()) << ", \"job\": " << JsonString(f.job())
        << ", \"consequence_of\": " << JsonString(f.consequence_of())
        << ", \"caused_by\": " << JsonString(f.caused_by())
        << ", \"action\": " << JsonString(f.action())
        << ", \"start\": " << JsonString(FormatRfc3339(ToNanos(f.start()))) << ", \"detected_at\": "
        << (f.has_detected_at() ? JsonString(FormatRfc3339(ToNanos(f.detected_at())))
                                : std::string("null"))
        << ", \"window_start\": "
        << (f.has_window_start() ? JsonString(FormatRfc3339(ToNanos(f.window_start())))
                                 : std::string("null"))
        << ", \"end\": "
        << (f.has_end() ? JsonString(FormatRfc3339(ToNanos(f.end()))) : std::string("null"))
        << ", \"summary\": " << JsonString(f.summary()) << ", \"evidence\": [";
    for (int i = 0; i < f.evidence_size(); ++i) {
      const v1::Evidence& e = f.evidence(i);
      out << (i == 0 ? "" : ", ") << "{\"name\": " << JsonString(e.name());
      if (e.has_value()) {
        out << ", \"value\": " << JsonNumber(e.value()) << ", \"unit\": " << JsonString(e.unit());
        if (!e.text().empty()) out << ", \"text\": " << JsonString(e.text());
      } else {
        out << ", \"text\": " << JsonString(e.text());
      }
      out << '}';
    }
    out << "]}";
  }
  out << (findings.empty() ? "]}\n" : "\n ]}\n");
}

void WriteHtml(std::ostream& out, std::span<const v1::Finding> findings, const InputSummary& input,
               std::span<const std::vector<SeriesPoint>> series) {
  out << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      << "<title>accelmon diagnose: " << Html(input.input) << "</title>\n<style>\n"
      << kStyle << "</style>\n</head>\n<body>\n"
      << "<h1>accelmon diagnose</h1>\n<p>" << Html(InputLine(input)) << "</p>\n";
  if (findings.empty()) {
    out << "<p>No findings.</p>\n</body>\n</html>\n";
    return;
  }
  out << "<p>" << Html(Plural(findings.size(), "finding", "findings")) << " ("
      << OpenCount(findings) << " still open): " << Html(Counts(findings)) << "</p>\n";
  out << "<table>\n<thead><tr><th>start</th><th>severity</th><th>rule</th><th>subject</th>"
         "<th>summary</th><th>end</th></tr></thead>\n<tbody>\n";
  // Each first fault's consequences right under it, marked as such.
  const Groups groups = GroupConsequences(findings);
  std::vector<size_t> rows;
  for (size_t i = 0; i < findings.size(); ++i) {
    if (groups.first_fault[i]) continue;
    rows.push_back(i);
    rows.insert(rows.end(), groups.consequences[i].begin(), groups.consequences[i].end());
  }
  for (const size_t i : rows) {
    const v1::Finding& f = findings[i];
    const int64_t start = ToNanos(f.start());
    out << (groups.first_fault[i] ? "<tr class=\"consequence\">" : "<tr>") << "<td>"
        << (groups.first_fault[i] ? "&#8627; " : "") << "<a href=\"#f" << i << "\">"
        << FormatRfc3339(start) << "</a></td><td class=\"" << Html(f.severity()) << "\">"
        << Html(f.severity()) << "</td><td><code>" << Html(f.rule()) << "</code></td><td>"
        << Html(SubjectText(f)) << "</td><td>" << Html(f.summary());
    if (const auto cause = CauseIndex(findings, i)) {
      out << "<br><span class=\"cause\">&#8592; caused by <a href=\"#f" << *cause << "\">"
          << Html(f.caused_by()) << "</a></span>";
    } else if (!f.caused_by().empty()) {
      out << "<br><span class=\"cause\">&#8592; caused by " << Html(f.caused_by()) << "</span>";
    }
    out << "</td><td>";
    if (f.has_end()) {
      out << FormatRfc3339(ToNanos(f.end())) << " ("
          << FormatDuration(std::chrono::nanoseconds(ToNanos(f.end()) - start)) << ")";
    } else {
      out << "still open";
    }
    out << "</td></tr>\n";
  }
  out << "</tbody>\n</table>\n";

  for (size_t i = 0; i < findings.size(); ++i) {
    const v1::Finding& f = findings[i];
    out << "<h2 id=\"f" << i << "\"><span class=\"" << Html(f.severity()) << "\">"
        << Html(Upper(f.severity())) << "</span> <code>" << Html(f.rule()) << "</code> "
        << Html(SubjectText(f)) << "</h2>\n<p>" << Html(f.summary()) << "</p>\n";
    if (f.has_detected_at()) out << "<p class=\"note\">" << Html(DetectedText(f)) << "</p>\n";
    if (const auto first = groups.first_fault[i]) {
      out << "<p class=\"cause\">likely a consequence of <a href=\"#f" << *first << "\">"
          << Html(f.consequence_of()) << "</a></p>\n";
    }
    if (!groups.consequences[i].empty()) {
      out << "<p>Likely consequences:";
      for (const size_t j : groups.consequences[i]) {
        out << " <a href=\"#f" << j << "\">" << Html(FindingName(findings[j])) << "</a>";
      }
      out << "</p>\n";
    }
    if (const auto cause = CauseIndex(findings, i)) {
      out << "<p class=\"cause\">&#8592; caused by <a href=\"#f" << *cause << "\">"
          << Html(f.caused_by()) << "</a></p>\n";
    }
    if (!f.action().empty()) {
      out << "<p>Action: <code>" << Html(f.action()) << "</code></p>\n";
    }
    if (f.evidence_size() > 0) {
      out << "<ul>\n";
      for (const v1::Evidence& e : f.evidence())
        out << "<li>" << Html(EvidenceText(e)) << "</li>\n";
      out << "</ul>\n";
    }
    const std::vector<SeriesPoint>* points = i < series.size() ? &series[i] : nullptr;
    if (f.plot().empty()) {
      out << "<p class=\"note\">No plot for this rule.</p>\n";
    } else if (points == nullptr || points->empty()) {
      out << "<p class=\"note\">No values of <code>" << Html(f.plot())
          << "</code> around this finding.</p>\n";
    } else {
      out << "<p class=\"note\"><code>" << Html(f.plot())
          << "</code> from 10 minutes before to 10 minutes after (shaded: the finding)</p>\n";
      WritePlot(out, f, input, *points);
    }
  }
  out << "</body>\n</html>\n";
}

}  // namespace accelmon::diagnostics
