#include "diagnostics/config.h"

#include <yaml-cpp/yaml.h>

#include <charconv>
#include <cmath>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <variant>

#include "diagnostics/error_catalog.h"
#include "proto/time_format.h"

namespace accelmon::diagnostics {
namespace {

// One setting of one rule as the file spells it.
struct Field {
  std::string_view key;
  enum Kind {
    kBool,
    kRatio,
    kNumber,
    kDuration,
    kBytes,
    kCount,
    kStrings,
    kCodes,
    kMinimums,
    kXidOverrides
  } kind;
  void* target;
};

class Parser {
 public:
  explicit Parser(std::string name) : name_(std::move(name)) {}

  [[noreturn]] void Fail(const YAML::Node& at, const std::string& what) const {
    const int line = at.Mark().line >= 0 ? at.Mark().line + 1 : 1;
    throw ConfigError(name_ + ":" + std::to_string(line) + ": " + what);
  }

  void Parse(const YAML::Node& root, Config& config) const {
    if (!root || root.IsNull()) return;  // an empty file: every default
    if (!root.IsMap()) Fail(root, "the config must be a mapping with a `rules` key");
    for (const auto& kv : root) {
      const std::string key = kv.first.as<std::string>();
      if (key == "first_fault") {
        ParseSection(kv.second, "first_fault",
                     {{"enabled", Field::kBool, &config.first_fault.enabled},
                      {"window", Field::kDuration, &config.first_fault.window_seconds}});
        continue;
      }
      if (key != "rules") {
        Fail(kv.first, "unknown key " + key + " (expected `rules` or `first_fault`)");
      }
      if (kv.second.IsNull()) continue;
      if (!kv.second.IsMap()) Fail(kv.second, "rules must be a mapping of rule id to settings");
      for (const auto& rule : kv.second) ParseRule(rule.first, rule.second, config);
    }
  }

 private:
  void ParseRule(const YAML::Node& id_node, const YAML::Node& settings, Config& c) const {
    const std::string id = id_node.as<std::string>();
    const std::vector<Field> fields = FieldsOf(id, c);
    if (fields.empty()) Fail(id_node, "unknown rule " + id + " (see docs/diagnostics.md)");
    ParseSection(settings, "rules." + id, fields);
  }

  // A mapping of settings, each one of `fields`.
  void ParseSection(const YAML::Node& settings, const std::string& name,
                    const std::vector<Field>& fields) const {
    if (settings.IsNull()) return;
    if (!settings.IsMap()) Fail(settings, name + " must be a mapping");
    for (const auto& kv : settings) {
      const std::string key = kv.first.as<std::string>();
      const Field* field = nullptr;
      for (const Field& f : fields) {
        if (f.key == key) field = &f;
      }
      if (field == nullptr) {
        std::string known;
        for (const Field& f : fields) known += (known.empty() ? "" : ", ") + std::string(f.key);
        Fail(kv.first, "unknown setting " + name + "." + key + " (known: " + known + ")");
      }
      Set(*field, kv.second, name + "." + key);
    }
  }

  static std::vector<Field> FieldsOf(const std::string& id, Config& c) {
    using F = Field;
    if (id == "memory_fragmentation") {
      auto& r = c.memory_fragmentation;
      return {{"enabled", F::kBool, &r.enabled},
              {"ratio", F::kRatio, &r.ratio},
              {"job_request", F::kBytes, &r.job_request_bytes},
              {"min_free_share", F::kRatio, &r.min_free_share},
              {"for", F::kDuration, &r.for_seconds}};
    }
    if (id == "host_oom_kill") {
      auto& r = c.host_oom_kill;
      return {{"enabled", F::kBool, &r.enabled}, {"hold", F::kDuration, &r.hold_seconds}};
    }
    if (id == "thermal_throttling") {
      auto& r = c.thermal_throttling;
      return {{"enabled", F::kBool, &r.enabled},
              {"reasons", F::kStrings, &r.reasons},
              {"for", F::kDuration, &r.for_seconds},
              {"margin_celsius", F::kNumber, &r.margin_celsius},
              {"margin_for", F::kDuration, &r.margin_for_seconds},
              {"violation_share", F::kRatio, &r.violation_share}};
    }
    if (id == "link_down") return {{"enabled", F::kBool, &c.link_down.enabled}};
    if (id == "link_degraded") {
      auto& r = c.link_degraded;
      return {{"enabled", F::kBool, &r.enabled},
              {"capacity_share", F::kRatio, &r.capacity_share},
              {"traffic_share", F::kRatio, &r.traffic_share},
              {"busy_share", F::kRatio, &r.busy_share},
              {"for", F::kDuration, &r.for_seconds}};
    }
    if (id == "link_flapping") {
      auto& r = c.link_flapping;
      return {{"enabled", F::kBool, &r.enabled},
              {"changes", F::kCount, &r.changes},
              {"window", F::kDuration, &r.window_seconds}};
    }
    if (id == "job_stall") {
      auto& r = c.job_stall;
      return {{"enabled", F::kBool, &r.enabled},
              {"idle_ratio", F::kRatio, &r.idle_ratio},
              {"busy_ratio", F::kRatio, &r.busy_ratio},
              {"silent_link_share", F::kRatio, &r.silent_link_share},
              {"memory_kept_share", F::kRatio, &r.memory_kept_share},
              {"for", F::kDuration, &r.for_seconds},
              {"collective_intervals", F::kCount, &r.collective_intervals}};
    }
    if (id == "job_straggler") {
      auto& r = c.job_straggler;
      return {{"enabled", F::kBool, &r.enabled},
              {"ratio", F::kRatio, &r.ratio},
              {"for", F::kDuration, &r.for_seconds},
              {"min_ranks", F::kCount, &r.min_ranks},
              {"min_busy_ratio", F::kRatio, &r.min_busy_ratio}};
    }
    if (id == "throughput_drop") {
      auto& r = c.throughput_drop;
      return {{"enabled", F::kBool, &r.enabled},
              {"share", F::kRatio, &r.share},
              {"baseline", F::kDuration, &r.baseline_seconds},
              {"for", F::kDuration, &r.for_seconds},
              {"min_baseline_ratio", F::kRatio, &r.min_baseline_ratio},
              {"memory_kept_share", F::kRatio, &r.memory_kept_share}};
    }
    if (id == "low_sm_activity") {
      auto& r = c.low_sm_activity;
      return {{"enabled", F::kBool, &r.enabled},
              {"share", F::kRatio, &r.share},
              {"baseline", F::kDuration, &r.baseline_seconds},
              {"for", F::kDuration, &r.for_seconds},
              {"min_median_ratio", F::kRatio, &r.min_median_ratio}};
    }
    if (id == "memory_leak") {
      auto& r = c.memory_leak;
      return {{"enabled", F::kBool, &r.enabled},
              {"window", F::kDuration, &r.window_seconds},
              {"min_r_squared", F::kRatio, &r.min_r_squared},
              {"horizon", F::kDuration, &r.horizon_seconds},
              {"min_bytes_per_second", F::kNumber, &r.min_bytes_per_second}};
    }
    if (id == "ecc_errors") {
      auto& r = c.ecc_errors;
      return {{"enabled", F::kBool, &r.enabled},
              {"corrected_per_hour", F::kNumber, &r.corrected_per_hour},
              {"hold", F::kDuration, &r.hold_seconds}};
    }
    if (id == "xid_error") {
      auto& r = c.xid_error;
      return {{"enabled", F::kBool, &r.enabled},
              {"overrides", F::kXidOverrides, &r.overrides},
              {"critical", F::kCodes, &r.critical},
              {"ignore", F::kCodes, &r.ignore},
              {"hold", F::kDuration, &r.hold_seconds}};
    }
    if (id == "firmware_below_minimum") {
      auto& r = c.firmware_below_minimum;
      return {{"enabled", F::kBool, &r.enabled}, {"minimums", F::kMinimums, &r.minimums}};
    }
    if (id == "device_lost") return {{"enabled", F::kBool, &c.device_lost.enabled}};
    return {};
  }

  std::string Scalar(const YAML::Node& node, const std::string& name, const char* what) const {
    if (!node.IsScalar()) Fail(node, name + " must be " + what);
    return node.as<std::string>();
  }

  double Number(const YAML::Node& node, const std::string& name) const {
    const std::string text = Scalar(node, name, "a number");
    double value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(value)) {
      Fail(node, name + " must be a number, not \"" + text + "\"");
    }
    return value;
  }

  // "30s", "5m", "2h", "1d", "500ms" (ParseSecondsDuration).
  double Duration(const YAML::Node& node, const std::string& name) const {
    const std::string text = Scalar(node, name, "a duration such as 30s, 5m or 2h");
    if (const auto seconds = ParseSecondsDuration(text)) return *seconds;
    Fail(node, name + " must be a duration such as 30s, 5m or 2h, not \"" + text + "\"");
  }

  // "4GiB", "512MiB", or plain bytes.
  uint64_t Bytes(const YAML::Node& node, const std::string& name) const {
    const std::string text = Scalar(node, name, "a size such as 4GiB");
    static const std::pair<std::string_view, uint64_t> kUnits[] = {{"TiB", 1ULL << 40},
                                                                   {"GiB", 1ULL << 30},
                                                                   {"MiB", 1ULL << 20},
                                                                   {"KiB", 1ULL << 10},
                                                                   {"B", 1},
                                                                   {"", 1}};
    for (const auto& [suffix, scale] : kUnits) {
      if (!text.ends_with(suffix)) continue;
      const std::string_view digits(text.data(), text.size() - suffix.size());
      uint64_t value = 0;
      const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
      if (ec == std::errc() && end == digits.data() + digits.size() && !digits.empty()) {
        return value * scale;
      }
      break;
    }
    Fail(node, name + " must be a size such as 4GiB or 512MiB, not \"" + text + "\"");
  }

  // [{xid: 13, severity: warning, action: restart_application}, ...]: each names an XID and
  // changes its severity, its action or both.
  std::vector<XidOverride> XidOverrides(const YAML::Node& node, const std::string& name) const {
    if (!node.IsSequence()) Fail(node, name + " must be a list of {xid, severity, action}");
    std::vector<XidOverride> out;
    for (const auto& item : node) {
      if (!item.IsMap()) Fail(item, name + " entries must be mappings {xid, severity, action}");
      XidOverride o;
      bool has_xid = false;
      for (const auto& kv : item) {
        const std::string key = kv.first.as<std::string>();
        if (key == "xid") {
          const double v = Number(kv.second, name + ".xid");
          if (v < 0 || v != std::floor(v)) Fail(kv.second, name + ".xid must be a whole number");
          o.xid = static_cast<uint64_t>(v);
          has_xid = true;
        } else if (key == "severity") {
          o.severity = Scalar(kv.second, name + ".severity", "warning or critical");
          if (o.severity != "warning" && o.severity != "critical") {
            Fail(kv.second,
                 name + ".severity must be warning or critical, not \"" + o.severity + "\"");
          }
        } else if (key == "action") {
          o.action = Scalar(kv.second, name + ".action", "an action");
          if (!IsAction(o.action)) {
            std::string known;
            for (std::string_view a : Actions()) {
              known += (known.empty() ? "" : ", ") + std::string(a);
            }
            Fail(kv.second,
                 name + ".action must be one of " + known + ", not \"" + o.action + "\"");
          }
        } else {
          Fail(kv.first, "unknown key " + key + " in " + name + " (known: xid, severity, action)");
        }
      }
      if (!has_xid) Fail(item, name + " entry needs an xid");
      if (o.severity.empty() && o.action.empty()) {
        Fail(item,
             name + " entry for XID " + std::to_string(o.xid) + " needs a severity or an action");
      }
      for (const XidOverride& before : out) {
        if (before.xid == o.xid) {
          Fail(item, name + " names XID " + std::to_string(o.xid) + " twice");
        }
      }
      out.push_back(std::move(o));
    }
    return out;
  }

  void Set(const Field& field, const YAML::Node& node, const std::string& name) const {
    switch (field.kind) {
      case Field::kBool: {
        const std::string text = Scalar(node, name, "true or false");
        if (text != "true" && text != "false") Fail(node, name + " must be true or false");
        *static_cast<bool*>(field.target) = text == "true";
        return;
      }
      case Field::kRatio: {
        const double v = Number(node, name);
        if (v < 0 || v > 1) Fail(node, name + " must be between 0 and 1");
        *static_cast<double*>(field.target) = v;
        return;
      }
      case Field::kNumber: {
        const double v = Number(node, name);
        if (v < 0) Fail(node, name + " must not be negative");
        *static_cast<double*>(field.target) = v;
        return;
      }
      case Field::kDuration:
        *static_cast<double*>(field.target) = Duration(node, name);
        return;
      case Field::kBytes:
        *static_cast<uint64_t*>(field.target) = Bytes(node, name);
        return;
      case Field::kCount: {
        const double v = Number(node, name);
        if (v < 1 || v != std::floor(v) || v > 1e6)
          Fail(node, name + " must be a whole number >= 1");
        *static_cast<uint32_t*>(field.target) = static_cast<uint32_t>(v);
        return;
      }
      case Field::kStrings: {
        if (!node.IsSequence()) Fail(node, name + " must be a list of strings");
        std::vector<std::string> out;
        for (const auto& item : node) out.push_back(Scalar(item, name + "[]", "a string"));
        *static_cast<std::vector<std::string>*>(field.target) = std::move(out);
        return;
      }
      case Field::kCodes: {
        if (!node.IsSequence()) Fail(node, name + " must be a list of numbers");
        std::vector<uint64_t> out;
        for (const auto& item : node) {
          const double v = Number(item, name + "[]");
          if (v < 0 || v != std::floor(v)) Fail(item, name + " must hold whole numbers");
          out.push_back(static_cast<uint64_t>(v));
        }
        *static_cast<std::vector<uint64_t>*>(field.target) = std::move(out);
        return;
      }
      case Field::kMinimums: {
        if (!node.IsSequence()) {
          Fail(node, name + " must be a list of {vendor, model, firmware, driver}");
        }
        std::vector<FirmwareMinimum> out;
        for (const auto& item : node) {
          if (!item.IsMap()) Fail(item, name + " entries must be mappings");
          FirmwareMinimum m;
          for (const auto& kv : item) {
            const std::string key = kv.first.as<std::string>();
            std::string* target = key == "vendor"     ? &m.vendor
                                  : key == "model"    ? &m.model
                                  : key == "firmware" ? &m.firmware
                                  : key == "driver"   ? &m.driver
                                                      : nullptr;
            if (target == nullptr) {
              Fail(kv.first, "unknown key " + key + " in " + name +
                                 " (known: vendor, model, firmware, driver)");
            }
            *target = Scalar(kv.second, name + "." + key, "a string");
          }
          if (m.vendor.empty()) Fail(item, name + " entry needs a vendor");
          if (m.firmware.empty() && m.driver.empty()) {
            Fail(item, name + " entry needs a firmware or a driver minimum");
          }
          out.push_back(std::move(m));
        }
        *static_cast<std::vector<FirmwareMinimum>*>(field.target) = std::move(out);
        return;
      }
      case Field::kXidOverrides:
        *static_cast<std::vector<XidOverride>*>(field.target) = XidOverrides(node, name);
        return;
    }
  }

  std::string name_;
};

}  // namespace

Config ParseConfig(const std::string& yaml, const std::string& name) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml);
  } catch (const YAML::Exception& e) {
    throw ConfigError(name + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
  Config config;
  Parser(name).Parse(root, config);
  return config;
}

Config LoadConfig(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw ConfigError(path + ": cannot be read");
  std::stringstream text;
  text << in.rdbuf();
  return ParseConfig(text.str(), path);
}

}  // namespace accelmon::diagnostics
