#include "diagnostics/score.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <tuple>

#include "diagnostics/rule.h"
#include "diagnostics/timeline.h"
#include "proto/time_format.h"

namespace accelmon::diagnostics {
namespace {

class Reader {
 public:
  explicit Reader(std::string name) : name_(std::move(name)) {}

  [[noreturn]] void Fail(const YAML::Node& at, const std::string& what) const {
    const int line = at.Mark().line >= 0 ? at.Mark().line + 1 : 1;
    throw ScoreError(name_ + ":" + std::to_string(line) + ": " + what);
  }

  std::string String(const YAML::Node& node, const std::string& name) const {
    if (!node.IsScalar()) Fail(node, name + " must be a string");
    return node.as<std::string>();
  }

  std::string Rule(const YAML::Node& node, const std::string& name) const {
    const std::string id = String(node, name);
    std::string known;
    for (const RuleDefinition& rule : AllRules()) {
      if (rule.id == id) return id;
      known += (known.empty() ? "" : ", ") + std::string(rule.id);
    }
    Fail(node, name + ": unknown rule \"" + id + "\" (one of " + known + ")");
  }

  std::vector<std::string> Rules(const YAML::Node& node, const std::string& name) const {
    if (!node.IsSequence()) Fail(node, name + " must be a list of rules (e.g. [link_down])");
    std::vector<std::string> rules;
    for (const auto& item : node) rules.push_back(Rule(item, name + "[]"));
    return rules;
  }

 private:
  std::string name_;
};

Expectation ReadExpectation(const Reader& r, const YAML::Node& node) {
  if (!node.IsMap()) r.Fail(node, "an expectation must be a mapping (rule:, node:, onset:, ...)");
  if (!node["rule"]) r.Fail(node, "rule is missing (e.g. rule: link_down)");
  if (!node["node"]) r.Fail(node, "node is missing (e.g. node: sim-0)");
  if (!node["onset"]) r.Fail(node, "onset is missing (e.g. onset: 35m)");
  Expectation e;
  e.line = node.Mark().line + 1;
  for (const auto& kv : node) {
    const std::string key = r.String(kv.first, "a key");
    const YAML::Node& value = kv.second;
    if (key == "rule") {
      e.rule = r.Rule(value, "rule");
    } else if (key == "node") {
      e.node = r.String(value, "node");
      if (e.node.empty()) r.Fail(value, "node is empty");
    } else if (key == "device") {
      const std::string text = r.String(value, "device");
      const bool digits =
          !text.empty() && text.size() <= 4 &&
          std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
      if (!digits) r.Fail(value, "device: \"" + text + "\" is not a device index (0, 1, ...)");
      e.device = std::to_string(std::stoi(text));
    } else if (key == "link") {
      e.link = r.String(value, "link");
      if (e.link.empty()) r.Fail(value, "link is empty");
    } else if (key == "onset") {
      const std::string text = r.String(value, "onset");
      const auto seconds = ParseSecondsDuration(text);
      if (!seconds) {
        r.Fail(value, "onset: \"" + text + "\" is not a duration (examples: 30s, 35m, 2130s)");
      }
      e.onset_s = *seconds;
    } else if (key == "optional") {
      bool optional = false;
      if (!value.IsScalar() || !YAML::convert<bool>::decode(value, optional)) {
        r.Fail(value, "optional must be true or false");
      }
      e.optional = optional;
    } else if (key == "allow") {
      e.allow = r.Rules(value, "allow");
    } else {
      r.Fail(kv.first, "unknown key \"" + key +
                           "\" for an expectation (rule, node, device, link, onset, optional, "
                           "allow)");
    }
  }
  return e;
}

Expectations Read(const YAML::Node& root, const std::string& name) {
  const Reader r(name);
  Expectations out;
  out.path = name;
  if (!root.IsMap()) r.Fail(root, "expected a mapping with an expect: list (expect: [] for none)");
  for (const auto& kv : root) {
    const std::string key = r.String(kv.first, "a key");
    if (key == "expect") {
      const YAML::Node& list = kv.second;
      if (list.IsNull()) continue;
      if (!list.IsSequence()) r.Fail(list, "expect must be a list ([] when nothing should open)");
      for (const auto& item : list) out.expect.push_back(ReadExpectation(r, item));
    } else if (key == "allow") {
      out.allow = r.Rules(kv.second, "allow");
    } else if (key != "faults" && key != "jobs") {  // the scenario's own: the sim reads them
      r.Fail(kv.first, "unknown key \"" + key + "\" (expect:, allow:, faults: or jobs:)");
    }
  }
  if (!root["expect"]) r.Fail(root, "no expect: list (expect: [] when nothing should open)");
  return out;
}

using Key = std::tuple<std::string, std::string, std::string, std::string>;
Key KeyOf(const v1::Finding& f) { return {f.rule(), f.node(), f.device(), f.link()}; }
Key KeyOf(const Expectation& e) { return {e.rule, e.node, e.device, e.link}; }

double Seconds(int64_t ns) { return static_cast<double>(ns) / 1e9; }

// "12s", "-3.5s", "+1860s": whole seconds unless there is a fraction (to 0.1 s).
std::string FormatSeconds(std::optional<double> s, bool sign) {
  if (!s) return "-";
  char buf[64];
  const double rounded = std::round(*s * 10) / 10;
  if (rounded == 0) return "0s";
  const bool whole = rounded == std::floor(rounded);
  std::snprintf(buf, sizeof buf, whole ? (sign ? "%+.0fs" : "%.0fs") : (sign ? "%+.1fs" : "%.1fs"),
                rounded);
  return buf;
}

std::string JsonNumber(std::optional<double> v) {
  if (!v || !std::isfinite(*v)) return "null";
  std::ostringstream s;
  s << std::round(*v * 1000) / 1000;
  return s.str();
}

std::string JsonTime(const google::protobuf::Timestamp& t) {
  return JsonString(FormatRfc3339(ToNanos(t)));
}

std::string Where(std::string_view node, std::string_view device, std::string_view link) {
  std::string s = std::string(node);
  if (!device.empty()) s += " device " + std::string(device);
  if (!link.empty()) s += " link " + std::string(link);
  return s;
}

void WriteCounts(std::ostream& out, const RuleScore& r) {
  out << "\"expected\": " << r.expected << ", \"found\": " << r.found
      << ", \"missed\": " << r.missed << ", \"false\": " << r.false_findings
      << ", \"allowed\": " << r.allowed << ", \"recall\": "
      << (r.expected == 0 ? std::string("null")
                          : JsonNumber(static_cast<double>(r.found) / r.expected))
      << ", \"onset_error_s\": {\"median_abs\": " << JsonNumber(MedianAbs(r.onset_errors_s))
      << ", \"worst\": " << JsonNumber(WorstSigned(r.onset_errors_s))
      << "}, \"detection_delay_s\": {\"median\": " << JsonNumber(Median(r.detection_delays_s))
      << ", \"worst\": " << JsonNumber(WorstSigned(r.detection_delays_s)) << "}";
}

void WriteFindingRef(std::ostream& out, const v1::Finding& f) {
  out << "{\"rule\": " << JsonString(f.rule()) << ", \"node\": " << JsonString(f.node())
      << ", \"device\": " << JsonString(f.device()) << ", \"link\": " << JsonString(f.link())
      << ", \"start\": " << JsonTime(f.start()) << "}";
}

}  // namespace

Expectations ParseExpectations(const std::string& yaml_text, const std::string& name_for_errors) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::ParserException& e) {
    throw ScoreError(name_for_errors + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
  try {
    return Read(root, name_for_errors);
  } catch (const YAML::Exception& e) {
    throw ScoreError(name_for_errors + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
}

Expectations LoadExpectations(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw ScoreError(path + ":1: cannot be read");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw ScoreError(path + ":1: cannot be read");
  return ParseExpectations(text.str(), path);
}

std::optional<double> Median(std::vector<double> values) {
  if (values.empty()) return std::nullopt;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

std::optional<double> MedianAbs(std::vector<double> values) {
  for (double& v : values) v = std::fabs(v);
  return Median(std::move(values));
}

std::optional<double> WorstSigned(std::span<const double> values) {
  if (values.empty()) return std::nullopt;
  return *std::max_element(values.begin(), values.end(),
                           [](double a, double b) { return std::fabs(a) < std::fabs(b); });
}

Score ComputeScore(const Expectations& expectations, std::span<const v1::Finding> findings,
                   int64_t first_report_ns) {
  Score score;
  score.expectations_path = expectations.path;
  score.first_report_ns = first_report_ns;

  // Findings by start, so that "the earliest" is the first one not taken.
  std::vector<size_t> order(findings.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return ToNanos(findings[a].start()) < ToNanos(findings[b].start());
  });
  std::vector<bool> taken(findings.size(), false);

  // Expectations in onset order (the file's order among equal onsets).
  std::vector<size_t> by_onset(expectations.expect.size());
  for (size_t i = 0; i < by_onset.size(); ++i) by_onset[i] = i;
  std::stable_sort(by_onset.begin(), by_onset.end(), [&](size_t a, size_t b) {
    return expectations.expect[a].onset_s < expectations.expect[b].onset_s;
  });
  score.expectations.resize(expectations.expect.size());
  for (const size_t i : by_onset) {
    const Expectation& e = expectations.expect[i];
    ScoredExpectation& s = score.expectations[i];
    s.expectation = e;
    for (const size_t j : order) {
      if (taken[j] || KeyOf(findings[j]) != KeyOf(e)) continue;
      taken[j] = true;
      s.finding = findings[j];
      const auto onset_ns = first_report_ns + static_cast<int64_t>(std::llround(e.onset_s * 1e9));
      s.onset_error_s = Seconds(ToNanos(findings[j].start()) - onset_ns);
      if (findings[j].has_detected_at()) {
        s.detection_delay = Seconds(ToNanos(findings[j].detected_at()) - onset_ns);
      }
      break;
    }
  }

  std::map<std::string, RuleScore> rules;
  auto rule = [&rules](const std::string& id) -> RuleScore& {
    RuleScore& r = rules[id];
    r.rule = id;
    return r;
  };
  for (const ScoredExpectation& s : score.expectations) {
    RuleScore& r = rule(s.expectation.rule);
    if (s.finding) {
      ++r.expected;
      ++r.found;
      if (s.onset_error_s) r.onset_errors_s.push_back(*s.onset_error_s);
      if (s.detection_delay) r.detection_delays_s.push_back(*s.detection_delay);
    } else if (!s.expectation.optional) {
      ++r.expected;
      ++r.missed;
    }
  }

  std::vector<std::string> allowed = expectations.allow;
  for (const Expectation& e : expectations.expect) {
    allowed.insert(allowed.end(), e.allow.begin(), e.allow.end());
  }
  for (const size_t j : order) {
    if (taken[j]) continue;
    const v1::Finding& f = findings[j];
    if (std::find(allowed.begin(), allowed.end(), f.rule()) != allowed.end()) {
      ++rule(f.rule()).allowed;
      score.allowed.push_back(f);
    } else {
      ++rule(f.rule()).false_findings;
      score.false_findings.push_back(f);
    }
  }

  score.total.rule = "total";
  for (auto& [id, r] : rules) {
    score.total.expected += r.expected;
    score.total.found += r.found;
    score.total.missed += r.missed;
    score.total.false_findings += r.false_findings;
    score.total.allowed += r.allowed;
    score.total.onset_errors_s.insert(score.total.onset_errors_s.end(), r.onset_errors_s.begin(),
                                      r.onset_errors_s.end());
    score.total.detection_delays_s.insert(score.total.detection_delays_s.end(),
                                          r.detection_delays_s.begin(), r.detection_delays_s.end());
    score.rules.push_back(std::move(r));
  }
  return score;
}

void WriteScoreText(std::ostream& out, const Score& score, const std::string& input) {
  out << input << " against " << score.expectations_path << " (onsets after the first report, "
      << FormatRfc3339(score.first_report_ns) << "):\n";
  char line[256];
  const char* kHeader = "%-24s %8s %6s %6s %6s %8s %12s %12s %12s\n";
  std::snprintf(line, sizeof line, kHeader, "rule", "expected", "found", "missed", "false",
                "allowed", "onset |err|", "onset worst", "delay median");
  out << line;
  auto row = [&](const RuleScore& r) {
    std::snprintf(line, sizeof line, "%-24s %8d %6d %6d %6d %8d %12s %12s %12s\n", r.rule.c_str(),
                  r.expected, r.found, r.missed, r.false_findings, r.allowed,
                  FormatSeconds(MedianAbs(r.onset_errors_s), false).c_str(),
                  FormatSeconds(WorstSigned(r.onset_errors_s), true).c_str(),
                  FormatSeconds(Median(r.detection_delays_s), false).c_str());
    out << line;
  };
  for (const RuleScore& r : score.rules) row(r);
  row(score.total);
  const RuleScore& t = score.total;
  out << "recall "
      << (t.expected == 0 ? std::string("-")
                          : std::to_string(t.found) + "/" + std::to_string(t.expected))
      << ", " << t.false_findings << " false finding" << (t.false_findings == 1 ? "" : "s") << "\n";
  for (const ScoredExpectation& s : score.expectations) {
    if (s.finding || s.expectation.optional) continue;
    const Expectation& e = s.expectation;
    out << "missed: " << e.rule << " on " << Where(e.node, e.device, e.link) << ", onset "
        << FormatDuration(std::chrono::duration<double>(e.onset_s)) << " ("
        << score.expectations_path << ":" << e.line << ")\n";
  }
  for (const v1::Finding& f : score.false_findings) {
    out << "false: " << f.rule() << " on " << Where(f.node(), f.device(), f.link()) << ", start "
        << FormatRfc3339(ToNanos(f.start())) << "\n";
  }
}

void WriteScoreJson(std::ostream& out, const Score& score, const std::string& input) {
  out << "{\"input\": " << JsonString(input)
      << ", \"expectations\": " << JsonString(score.expectations_path)
      << ", \"first_report\": " << JsonString(FormatRfc3339(score.first_report_ns))
      << ", \"rules\": [";
  for (size_t i = 0; i < score.rules.size(); ++i) {
    out << (i == 0 ? "" : ", ") << "{\"rule\": " << JsonString(score.rules[i].rule) << ", ";
    WriteCounts(out, score.rules[i]);
    out << "}";
  }
  out << "], \"total\": {";
  WriteCounts(out, score.total);
  out << "}, \"matches\": [";
  for (size_t i = 0; i < score.expectations.size(); ++i) {
    const ScoredExpectation& s = score.expectations[i];
    const Expectation& e = s.expectation;
    out << (i == 0 ? "" : ", ") << "{\"rule\": " << JsonString(e.rule)
        << ", \"node\": " << JsonString(e.node) << ", \"device\": " << JsonString(e.device)
        << ", \"link\": " << JsonString(e.link) << ", \"line\": " << e.line << ", \"onset\": "
        << JsonString(FormatRfc3339(score.first_report_ns +
                                    static_cast<int64_t>(std::llround(e.onset_s * 1e9))))
        << ", \"optional\": " << (e.optional ? "true" : "false")
        << ", \"found\": " << (s.finding ? "true" : "false")
        << ", \"start\": " << (s.finding ? JsonTime(s.finding->start()) : std::string("null"))
        << ", \"detected_at\": "
        << (s.finding && s.finding->has_detected_at() ? JsonTime(s.finding->detected_at())
                                                      : std::string("null"))
        << ", \"onset_error_s\": " << JsonNumber(s.onset_error_s)
        << ", \"detection_delay_s\": " << JsonNumber(s.detection_delay) << "}";
  }
  out << "], \"false_findings\": [";
  for (size_t i = 0; i < score.false_findings.size(); ++i) {
    out << (i == 0 ? "" : ", ");
    WriteFindingRef(out, score.false_findings[i]);
  }
  out << "], \"allowed\": [";
  for (size_t i = 0; i < score.allowed.size(); ++i) {
    out << (i == 0 ? "" : ", ");
    WriteFindingRef(out, score.allowed[i]);
  }
  out << "]}\n";
}

}  // namespace accelmon::diagnostics
