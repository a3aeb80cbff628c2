// Thresholds of the diagnostics rules. Every field has a default (the values below, documented in
// docs/diagnostics.md and shipped as diagnostics/defaults.yaml); a YAML file given with
// --diagnostics.config overrides any of them. Durations are seconds here, written "30s", "5m" in
// the file.
#pragma once

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace accelmon::diagnostics {

// A config file that cannot be used: "FILE:LINE: what is wrong" (start-up exits 2 on it).
class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct MemoryFragmentationConfig {
  bool enabled = true;
  // Fires at this fragmentation ratio (1 - largest free block / free memory) ...
  double ratio = 0.5;
  // ... or when the largest free block is below this many bytes (the job's typical request;
  // 0: not checked) ...
  uint64_t job_request_bytes = 0;
  // ... while at least this share of device memory is free (free on the device plus what the
  // processes' allocators cache): fragmentation only matters when memory is not simply full.
  double min_free_share = 0.2;
  // The condition must hold this long (smooths a single noisy sample).
  double for_seconds = 0;

  bool operator==(const MemoryFragmentationConfig&) const = default;
};

struct HostOomKillConfig {
  bool enabled = true;
  // A finding stays open this long after the last OOM kill.
  double hold_seconds = 600;

  bool operator==(const HostOomKillConfig&) const = default;
};

struct ThermalThrottlingConfig {
  bool enabled = true;
  // Throttle reasons that count (lower snake case as the collectors report them).
  std::vector<std::string> reasons = {"sw_thermal", "hw_thermal", "hw_slowdown", "sw_power_cap",
                                      "hw_power_brake"};
  // A reason must be active this long.
  double for_seconds = 30;
  // Or the core or memory temperature within this many degrees of the slowdown threshold.
  double margin_celsius = 5;
  // ... for this long (a brief spike is not throttling).
  double margin_for_seconds = 30;
  // Or the driver's thermal or power violation counter (time held below the application
  // clocks) grew by at least this share of the time between two reports, for `for`: throttling
  // that the sampled reasons miss between two collections. 0 turns this off.
  double violation_share = 0.5;

  bool operator==(const ThermalThrottlingConfig&) const = default;
};

struct LinkDownConfig {
  bool enabled = true;

  bool operator==(const LinkDownConfig&) const = default;
};

struct LinkDegradedConfig {
  bool enabled = true;
  // Capacity (max bandwidth, or PCIe generation x width) below this share of the best the link
  // has reported.
  double capacity_share = 0.9;
  // Or traffic under this share of the median of its busy siblings (same device, same kind) ...
  double traffic_share = 0.3;
  // ... where a sibling is busy above this share of its capacity ...
  double busy_share = 0.1;
  // ... for this long.
  double for_seconds = 60;

  bool operator==(const LinkDegradedConfig&) const = default;
};

struct LinkFlappingConfig {
  bool enabled = true;
  // This many up/down changes ...
  uint32_t changes = 3;
  // ... within this window.
  double window_seconds = 300;

  bool operator==(const LinkFlappingConfig&) const = default;
};

struct JobStallConfig {
  bool enabled = true;
  // Every device of the node (or of one pushed job) idle below this compute ratio ...
  double idle_ratio = 0.05;
  // ... after being busy above this one ...
  double busy_ratio = 0.5;
  // ... with link traffic below this share of link capacity ...
  double silent_link_share = 0.01;
  // ... while memory stays at or above this share of what it was while busy ...
  double memory_kept_share = 0.8;
  // ... for this long.
  double for_seconds = 120;
  // NCCL RAS, where the job's nodes report it: stalled once no rank has launched a collective for
  // this many report intervals while some rank lags behind the others or is missing.
  uint32_t collective_intervals = 2;

  bool operator==(const JobStallConfig&) const = default;
};

struct JobStragglerConfig {
  bool enabled = true;
  // A rank (device, or every device of a node) below this share of the job's median ...
  double ratio = 0.7;
  // ... for this long ...
  double for_seconds = 180;
  // ... in a job of at least this many ranks (devices) ...
  uint32_t min_ranks = 4;
  // ... whose median compute ratio is at least this (an idle or hung job has no straggler).
  double min_busy_ratio = 0.2;

  bool operator==(const JobStragglerConfig&) const = default;
};

// Which finding of a job came first: a finding of a job that starts within `window` after
// another finding of the same job started is marked as its likely consequence.
struct FirstFaultConfig {
  bool enabled = true;
  double window_seconds = 300;

  bool operator==(const FirstFaultConfig&) const = default;
};

struct ThroughputDropConfig {
  bool enabled = true;
  // Utilization (or link traffic) under this share of the device's own baseline ...
  double share = 0.5;
  // ... the trailing mean over this long ...
  double baseline_seconds = 1800;
  // ... for this long, while memory stays allocated.
  double for_seconds = 300;
  // A device whose baseline compute ratio is below this is not busy enough to judge.
  double min_baseline_ratio = 0.2;
  // Memory counts as still allocated at this share of its baseline.
  double memory_kept_share = 0.8;

  bool operator==(const ThroughputDropConfig&) const = default;
};

struct LowSmActivityConfig {
  bool enabled = true;
  // SM activity under this share of the device's own median for its job ...
  double share = 0.5;
  // ... (the median of per-minute means over this long) ...
  double baseline_seconds = 1800;
  // ... for this long.
  double for_seconds = 300;
  // A device whose median SM activity is below this is not busy enough to judge.
  double min_median_ratio = 0.2;

  bool operator==(const LowSmActivityConfig&) const = default;
};

struct MemoryLeakConfig {
  bool enabled = true;
  // Fit memory used over this trailing window ...
  double window_seconds = 1800;
  // ... with at least this goodness of fit (R^2) ...
  double min_r_squared = 0.9;
  // ... and fire when the fitted slope exhausts device memory within this horizon.
  double horizon_seconds = 7200;
  // Slopes below this are noise, whatever the horizon.
  double min_bytes_per_second = 1 << 20;

  bool operator==(const MemoryLeakConfig&) const = default;
};

struct EccErrorsConfig {
  bool enabled = true;
  // Corrected errors per hour above this are a warning (uncorrected ones are always critical).
  double corrected_per_hour = 100;
  // A finding stays open this long after the last new error.
  double hold_seconds = 600;

  bool operator==(const EccErrorsConfig&) const = default;
};

// One XID graded otherwise than the error catalogue (diagnostics/error_catalog.h) grades it.
struct XidOverride {
  uint64_t xid = 0;
  std::string severity;  // "warning" or "critical"; empty: the catalogue's
  std::string action;    // one of the catalogue's actions; empty: the catalogue's

  bool operator==(const XidOverride&) const = default;
};

struct XidErrorConfig {
  bool enabled = true;
  // Severity and action come from the error catalogue (docs/diagnostics.md, "xid_error"); an XID
  // it does not have is a warning with action contact_support. Then, in this order:
  // per-XID replacements of the catalogue's severity and/or action ...
  std::vector<XidOverride> overrides = {};
  // ... XIDs that are critical whatever the catalogue and the overrides say ...
  std::vector<uint64_t> critical = {};
  // ... and XIDs ignored altogether (e.g. 13/31/43 application faults, when they are the jobs'
  // business).
  std::vector<uint64_t> ignore = {};
  double hold_seconds = 600;

  bool operator==(const XidErrorConfig&) const = default;
};

struct FirmwareMinimum {
  std::string vendor;    // "nvidia", "amd", "huawei", "sim"
  std::string model;     // empty: every model of the vendor
  std::string firmware;  // minimum firmware version; empty: not checked
  std::string driver;    // minimum driver version; empty: not checked

  bool operator==(const FirmwareMinimum&) const = default;
};

struct FirmwareBelowMinimumConfig {
  bool enabled = true;
  std::vector<FirmwareMinimum> minimums = {
      {.vendor = "sim", .model = "", .firmware = "1.0.0", .driver = ""}};

  bool operator==(const FirmwareBelowMinimumConfig&) const = default;
};

struct DeviceLostConfig {
  bool enabled = true;

  bool operator==(const DeviceLostConfig&) const = default;
};

struct Config {
  MemoryFragmentationConfig memory_fragmentation;
  HostOomKillConfig host_oom_kill;
  ThermalThrottlingConfig thermal_throttling;
  LinkDownConfig link_down;
  LinkDegradedConfig link_degraded;
  LinkFlappingConfig link_flapping;
  JobStallConfig job_stall;
  JobStragglerConfig job_straggler;
  ThroughputDropConfig throughput_drop;
  LowSmActivityConfig low_sm_activity;
  MemoryLeakConfig memory_leak;
  EccErrorsConfig ecc_errors;
  XidErrorConfig xid_error;
  FirmwareBelowMinimumConfig firmware_below_minimum;
  DeviceLostConfig device_lost;
  FirstFaultConfig first_fault;  // not a rule: `first_fault:` beside `rules:` in the file

  bool operator==(const Config&) const = default;
};

// Parses a config file; what it does not name keeps its default. Throws ConfigError.
Config LoadConfig(const std::string& path);
// The same from text; `name` stands for the file in errors.
Config ParseConfig(const std::string& yaml, const std::string& name);

}  // namespace accelmon::diagnostics
