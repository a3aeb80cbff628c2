#include "collectors/sim_scenario.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <utility>

#include "proto/time_format.h"

namespace accelmon::collectors {
namespace {

constexpr std::array<std::pair<FaultKind, std::string_view>, 20> kFaultNames{{
    {FaultKind::kFragmentationCreep, "fragmentation_creep"},
    {FaultKind::kThermalRamp, "thermal_ramp"},
    {FaultKind::kThermalSpike, "thermal_spike"},
    {FaultKind::kPowerThrottle, "power_throttle"},
    {FaultKind::kLinkDown, "link_down"},
    {FaultKind::kLinkFlap, "link_flap"},
    {FaultKind::kLinkDegrade, "link_degrade"},
    {FaultKind::kLinkBurst, "link_burst"},
    {FaultKind::kStall, "stall"},
    {FaultKind::kPause, "pause"},
    {FaultKind::kJobEnd, "job_end"},
    {FaultKind::kThroughputDrop, "throughput_drop"},
    {FaultKind::kLeak, "leak"},
    {FaultKind::kEccBurst, "ecc_burst"},
    {FaultKind::kXid, "xid"},
    {FaultKind::kDeviceLost, "device_lost"},
    {FaultKind::kFirmware, "firmware"},
    {FaultKind::kOomKill, "oom_kill"},
    {FaultKind::kStraggler, "straggler"},
    {FaultKind::kRankHang, "rank_hang"},
}};

// The parameters each fault takes, besides at, fault, device, node and duration.
std::set<std::string> ParameterKeys(FaultKind kind) {
  switch (kind) {
    case FaultKind::kFragmentationCreep:
    case FaultKind::kThermalRamp:
      return {"to", "over"};
    case FaultKind::kThermalSpike:
      return {"to"};
    case FaultKind::kLinkDown:
      return {"link"};
    case FaultKind::kLinkFlap:
    case FaultKind::kLinkBurst:
      return {"link", "period"};
    case FaultKind::kLinkDegrade:
      return {"link", "capacity", "traffic"};
    case FaultKind::kThroughputDrop:
    case FaultKind::kStraggler:
      return {"factor"};
    case FaultKind::kLeak:
      return {"rate"};
    case FaultKind::kEccBurst:
      return {"corrected", "uncorrected"};
    case FaultKind::kXid:
      return {"code"};
    case FaultKind::kFirmware:
      return {"version"};
    case FaultKind::kOomKill:
      return {"count"};
    case FaultKind::kPowerThrottle:
    case FaultKind::kStall:
    case FaultKind::kPause:
    case FaultKind::kJobEnd:
    case FaultKind::kDeviceLost:
    case FaultKind::kRankHang:
      return {};
  }
  return {};
}

// Defaults that differ by fault.
void ApplyDefaults(Fault& f) {
  switch (f.kind) {
    case FaultKind::kFragmentationCreep:
      f.to = 0.85;
      break;
    case FaultKind::kThermalRamp:
      f.to = 92;
      break;
    case FaultKind::kThermalSpike:
      f.to = 86;
      f.duration_s = 20;
      break;
    case FaultKind::kPause:
      f.duration_s = 60;
      break;
    case FaultKind::kLinkBurst:
      f.period_s = 20;
      break;
    case FaultKind::kLinkDegrade:
      f.capacity = 0.5;
      f.traffic = 1;
      break;
    case FaultKind::kStraggler:
      f.factor = 0.6;
      break;
    default:
      break;
  }
}

// "64MiB", "1GiB", "1000" (bytes); nullopt when malformed.
std::optional<double> ParseBytes(std::string_view text) {
  static const std::map<std::string_view, double> kUnits{
      {"", 1},          {"B", 1},    {"KiB", 1024.0}, {"MiB", 1024.0 * 1024},
      {"GiB", 1 << 30}, {"KB", 1e3}, {"MB", 1e6},     {"GB", 1e9}};
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) {
    ++i;
  }
  if (i == 0) return std::nullopt;
  const auto unit = kUnits.find(text.substr(i));
  if (unit == kUnits.end()) return std::nullopt;
  try {
    size_t used = 0;
    const std::string number(text.substr(0, i));
    const double value = std::stod(number, &used);
    if (used != number.size()) return std::nullopt;
    return value * unit->second;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

class Reader {
 public:
  explicit Reader(std::string name) : name_(std::move(name)) {}

  [[noreturn]] void Fail(const YAML::Node& at, const std::string& what) const {
    const int line = at.Mark().line >= 0 ? at.Mark().line + 1 : 1;
    throw ScenarioError(name_ + ":" + std::to_string(line) + ": " + what);
  }

  std::string String(const YAML::Node& node, const std::string& name) const {
    if (!node.IsScalar()) Fail(node, name + " must be a string");
    return node.as<std::string>();
  }

  double Number(const YAML::Node& node, const std::string& name, double min, double max) const {
    if (!node.IsScalar()) Fail(node, name + " must be a number");
    double value = 0;
    try {
      value = node.as<double>();
    } catch (const YAML::Exception&) {
      Fail(node, name + ": \"" + node.as<std::string>() + "\" is not a number");
    }
    if (!std::isfinite(value) || value < min || value > max) {
      std::ostringstream range;
      range << name << " must be from " << min << " to " << max;
      Fail(node, range.str());
    }
    return value;
  }

  uint64_t Count(const YAML::Node& node, const std::string& name) const {
    if (!node.IsScalar()) Fail(node, name + " must be a whole number");
    try {
      const auto value = node.as<int64_t>();
      if (value >= 0) return static_cast<uint64_t>(value);
    } catch (const YAML::Exception&) {
    }
    Fail(node, name + ": \"" + node.as<std::string>() + "\" is not a whole number >= 0");
  }

  double Duration(const YAML::Node& node, const std::string& name) const {
    const std::string text = String(node, name);
    const auto seconds = ParseSecondsDuration(text);
    if (!seconds) {
      Fail(node, name + ": \"" + text + "\" is not a duration (examples: 500ms, 30s, 10m, 2h, 1d)");
    }
    return *seconds;
  }

 private:
  std::string name_;
};

Fault ReadFault(const Reader& r, const YAML::Node& node) {
  if (!node.IsMap()) r.Fail(node, "a fault must be a mapping (at:, fault:, ...)");
  if (!node["fault"]) r.Fail(node, "fault is missing (e.g. fault: thermal_ramp)");
  if (!node["at"]) r.Fail(node, "at is missing (e.g. at: 10m)");
  Fault f;
  f.line = node.Mark().line + 1;
  const std::string name = r.String(node["fault"], "fault");
  const auto* known = std::find_if(kFaultNames.begin(), kFaultNames.end(),
                                   [&](const auto& entry) { return entry.second == name; });
  if (known == kFaultNames.end()) {
    std::string names;
    for (const auto& [kind, n] : kFaultNames) names += (names.empty() ? "" : ", ") + std::string(n);
    r.Fail(node["fault"], "unknown fault \"" + name + "\" (one of " + names + ")");
  }
  f.kind = known->first;
  ApplyDefaults(f);
  const std::set<std::string> parameters = ParameterKeys(f.kind);
  for (const auto& kv : node) {
    const std::string key = r.String(kv.first, "a key");
    const YAML::Node& value = kv.second;
    if (key == "fault") continue;
    if (key == "at") {
      f.at_s = r.Duration(value, "at");
    } else if (key == "duration") {
      f.duration_s = r.Duration(value, "duration");
      if (f.duration_s <= 0) r.Fail(value, "duration must be more than 0");
    } else if (key == "device") {
      const std::string text = r.String(value, "device");
      if (text == "all") {
        f.device = -1;
      } else {
        f.device = static_cast<int>(r.Number(value, "device (an index or \"all\")", 0, 1023));
        if (static_cast<double>(f.device) != value.as<double>()) {
          r.Fail(value, "device must be a whole number or \"all\"");
        }
      }
    } else if (key == "node") {
      f.node = r.String(value, "node");
      if (f.node.empty()) r.Fail(value, "node is empty");
    } else if (parameters.count(key) == 0) {
      r.Fail(kv.first, "unknown key \"" + key + "\" for fault " + name);
    } else if (key == "to") {
      f.to = f.kind == FaultKind::kFragmentationCreep ? r.Number(value, "to", 0, 0.9)
                                                      : r.Number(value, "to", 20, 150);
    } else if (key == "over") {
      f.over_s = r.Duration(value, "over");
    } else if (key == "link") {
      f.link = r.String(value, "link");
    } else if (key == "period") {
      f.period_s = r.Duration(value, "period");
      if (f.period_s <= 0) r.Fail(value, "period must be more than 0");
    } else if (key == "capacity") {
      f.capacity = r.Number(value, "capacity", 0.01, 1);
    } else if (key == "traffic") {
      f.traffic = r.Number(value, "traffic", 0, 1);
    } else if (key == "factor") {
      f.factor = r.Number(value, "factor", 0, 1);
    } else if (key == "rate") {
      const std::string text = r.String(value, "rate");
      const auto bytes = ParseBytes(text);
      if (!bytes) r.Fail(value, "rate: \"" + text + "\" is not a size per second (e.g. 64MiB)");
      f.rate = *bytes;
    } else if (key == "corrected") {
      f.corrected = r.Count(value, "corrected");
    } else if (key == "uncorrected") {
      f.uncorrected = r.Count(value, "uncorrected");
    } else if (key == "code") {
      f.code = r.Count(value, "code");
    } else if (key == "version") {
      f.version = r.String(value, "version");
      if (f.version.empty()) r.Fail(value, "version is empty");
    } else if (key == "count") {
      f.count = r.Count(value, "count");
      if (f.count == 0 || f.count > 1000) r.Fail(value, "count must be from 1 to 1000");
    }
  }
  // The rank the job waits for: one device of one node.
  if (f.kind == FaultKind::kRankHang && (f.node.empty() || f.device < 0)) {
    r.Fail(node, "rank_hang names one rank: give node: and device: (an index, not \"all\")");
  }
  return f;
}

SimJob ReadJob(const Reader& r, const YAML::Node& node) {
  if (!node.IsMap()) r.Fail(node, "a job must be a mapping (id:, kind:, nodes:, devices:, ...)");
  if (!node["id"]) r.Fail(node, "id is missing (e.g. id: \"4711\")");
  SimJob job;
  job.line = node.Mark().line + 1;
  bool pod_fields = false;
  for (const auto& kv : node) {
    const std::string key = r.String(kv.first, "a key");
    const YAML::Node& value = kv.second;
    if (key == "id") {
      job.id = r.String(value, "id");
      if (job.id.empty()) r.Fail(value, "id is empty");
    } else if (key == "kind") {
      const std::string kind = r.String(value, "kind");
      if (kind != "slurm" && kind != "pod") {
        r.Fail(value, "kind: \"" + kind + "\" is not slurm or pod");
      }
      job.pod = kind == "pod";
    } else if (key == "nodes") {
      if (!value.IsSequence() || value.size() == 0) {
        r.Fail(value, "nodes must be a list of node names");
      }
      for (const auto& n : value) {
        job.nodes.push_back(r.String(n, "nodes[]"));
        if (job.nodes.back().empty()) r.Fail(n, "a node name is empty");
      }
    } else if (key == "devices") {
      if (value.IsScalar() && value.as<std::string>() == "all") continue;
      if (!value.IsSequence() || value.size() == 0) {
        r.Fail(value, "devices must be a list of indexes or \"all\"");
      }
      for (const auto& d : value) {
        const double index = r.Number(d, "devices[]", 0, 1023);
        if (index != std::floor(index)) r.Fail(d, "a device index must be a whole number");
        if (std::find(job.devices.begin(), job.devices.end(), static_cast<int>(index)) !=
            job.devices.end()) {
          r.Fail(d, "device " + std::to_string(static_cast<int>(index)) + " is listed twice");
        }
        job.devices.push_back(static_cast<int>(index));
      }
    } else if (key == "user") {
      job.user = r.String(value, "user");
      if (job.user.empty()) r.Fail(value, "user is empty");
    } else if (key == "pod") {
      job.pod_pattern = r.String(value, "pod");
      if (job.pod_pattern.empty()) r.Fail(value, "pod is empty");
      pod_fields = true;
    } else if (key == "namespace") {
      job.pod_namespace = r.String(value, "namespace");
      if (job.pod_namespace.empty()) r.Fail(value, "namespace is empty");
      pod_fields = true;
    } else {
      r.Fail(kv.first, "unknown key \"" + key +
                           "\" for a job (id, kind, nodes, devices, user, pod, namespace)");
    }
  }
  if (pod_fields && !job.pod) r.Fail(node, "pod and namespace are for kind: pod");
  return job;
}

Scenario Read(const YAML::Node& root, const std::string& name) {
  const Reader r(name);
  Scenario scenario;
  scenario.path = name;
  if (root.IsNull()) return scenario;
  if (!root.IsMap()) r.Fail(root, "a scenario must be a mapping with a faults: list");
  for (const auto& kv : root) {
    const std::string key = r.String(kv.first, "a key");
    // expect: and allow: are the findings the scenario should give (diagnostics/score.h reads
    // them for `diagnose --score`); the sim skips them.
    if (key != "faults" && key != "jobs" && key != "expect" && key != "allow") {
      r.Fail(kv.first, "unknown key \"" + key + "\" (faults:, jobs:, expect: or allow:)");
    }
  }
  const YAML::Node jobs = root["jobs"];
  if (jobs && !jobs.IsNull()) {
    if (!jobs.IsSequence()) r.Fail(jobs, "jobs must be a list");
    for (const auto& node : jobs) {
      SimJob job = ReadJob(r, node);
      for (const SimJob& other : scenario.jobs) {
        if (other.id == job.id) r.Fail(node, "job " + job.id + " is listed twice");
      }
      scenario.jobs.push_back(std::move(job));
    }
  }
  const YAML::Node faults = root["faults"];
  if (!faults || faults.IsNull()) return scenario;
  if (!faults.IsSequence()) r.Fail(faults, "faults must be a list");
  for (const auto& node : faults) scenario.faults.push_back(ReadFault(r, node));
  return scenario;
}

}  // namespace

std::string_view FaultKindName(FaultKind kind) {
  for (const auto& [k, name] : kFaultNames) {
    if (k == kind) return name;
  }
  return "unknown";
}

Scenario ParseScenario(const std::string& yaml_text, const std::string& name_for_errors) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::ParserException& e) {
    throw ScenarioError(name_for_errors + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
  try {
    return Read(root, name_for_errors);
  } catch (const YAML::Exception& e) {
    throw ScenarioError(name_for_errors + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
}

Scenario LoadScenario(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw ScenarioError(path + ":1: cannot be read");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw ScenarioError(path + ":1: cannot be read");
  return ParseScenario(text.str(), path);
}

}  // namespace accelmon::collectors
