// The contract between the diagnostics engine and its rules.
//
// A node rule instance belongs to one node and sees that node's reports in time order. On every
// report it Raises each finding that holds now; the engine opens what was not open and closes what
// was open but not raised again (unless the finding's device is missing from the report: a device
// collector that failed one tick must not close and reopen everything). Rules are deterministic:
// they read only the reports (never the wall clock), so the exporter online and `accelmon
// diagnose` offline find the same things in the same reports.
//
// A rule keeps a reference to its section of the engine's config, never a copy: a reload
// (Engine::Reconfigure) changes its thresholds from the next report on while its state stays.
// What a rule derives from a threshold it must derive again when the threshold changes.
//
// A job rule instance belongs to one job (a device's job: its first holder with a non-empty job)
// and sees, report by report and whichever node they come from, that job's devices in each
// node's report (JobSlice). It keeps its own state per node and raises every finding of the job
// that holds now, on whichever node; the engine closes the job's findings not raised again. Its
// view of the job is the latest report of each of its nodes: the same reports in the same order
// give the same findings, however the nodes interleave.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "accelmon/v1/diagnostics.pb.h"
#include "accelmon/v1/telemetry.pb.h"
#include "diagnostics/config.h"
#include "proto/time_format.h"

namespace accelmon::diagnostics {

inline constexpr std::string_view kWarning = "warning";
inline constexpr std::string_view kCritical = "critical";

// What a finding is about on its node.
struct Subject {
  std::string device;       // device index as the `device` label; empty: the node itself
  std::string device_uuid;  // empty when unknown or about the node
  std::string link;         // link name; empty unless about one link
};

// The subject for a device (and optionally one of its links).
Subject DeviceSubject(const v1::DeviceTelemetry& device, std::string_view link = {});

// How rules key per-device state across reports: the UUID, or "#index" without one.
std::string DeviceKey(const v1::DeviceTelemetry& device);

// Nanoseconds since the epoch: the one ToNanos (proto/time_format.h), also by this name.
using accelmon::ToNanos;

// Evidence constructors.
v1::Evidence NumberEvidence(std::string_view name, double value, std::string_view unit);
v1::Evidence TextEvidence(std::string_view name, std::string_view text);

// What a finding says when raised.
struct Raised {
  std::string_view severity = kWarning;  // kWarning or kCritical
  std::string summary;                   // one line: what, where, how bad
  std::vector<v1::Evidence> evidence;    // the values that made it fire
  std::string_view plot;  // the metric to plot around it offline (diagnostics/series.h names)
  std::optional<int64_t> start_ns;  // when the condition began; default: this report's time
  // The first report the rule judged for it (Finding.window_start); none for a one-report rule.
  std::optional<int64_t> window_start_ns{};
  std::string action{};  // Finding.action: what to do, from a vendor catalogue; empty: not said
};

// The engine, as a rule sees it while observing one report.
class RuleContext {
 public:
  virtual ~RuleContext() = default;
  virtual const Config& config() const = 0;
  // This report's timestamp, nanoseconds since the epoch.
  virtual int64_t now_ns() const = 0;
  // Seconds since this node's previous report (0 for its first).
  virtual double interval_seconds() const = 0;
  // This rule's finding on `subject` holds now. Opens it if it was not open; an open finding
  // keeps its start, summary and evidence, but its severity may rise from warning to critical.
  virtual void Raise(const Subject& subject, Raised raised) = 0;
  // Whether this rule's finding on `subject` is open (from an earlier report).
  virtual bool IsOpen(const Subject& subject) const = 0;
};

class Rule {
 public:
  virtual ~Rule() = default;
  // Observes the node's next report and raises every finding that holds now.
  virtual void Observe(const v1::NodeReport& report, RuleContext& context) = 0;

  // Across an exporter restart (Engine::Save, Engine::Restore), an open finding survives with
  // its rule's latch: what the rule needs, besides the finding, to go on judging it (when the
  // event that raised it happened, say). Empty when it needs nothing.
  virtual std::string Latch(const Subject& /*subject*/) const { return {}; }
  // Takes back an open finding saved before a restart, with its latch, before the rule's first
  // report. True when the rule now raises it again for as long as its condition holds (and no
  // longer). False leaves it to the engine: it stays open until the rule raises it again, or
  // until SettleSeconds() of reports have passed without (the rule judged afresh and it no
  // longer holds).
  virtual bool Restore(const v1::Finding& /*finding*/, std::string_view /*latch*/) { return false; }
  // How long a fresh instance of the rule must watch a node before it can judge a condition
  // again (its longest `for` or trend window); 0: from the first report.
  virtual double SettleSeconds() const { return 0; }
};

// The job of a device: its first holder with a non-empty job; empty when none has one.
std::string_view DeviceJob(const v1::DeviceTelemetry& device);

// One job's devices in one node's report.
struct JobSlice {
  std::string_view job;
  std::string_view node;
  int64_t now_ns = 0;  // the report's timestamp
  // The job's devices in the report; empty when the job left the node (no device holds it any
  // more, or the node went away).
  std::vector<const v1::DeviceTelemetry*> devices;
  // The NCCL communicators of the report whose local ranks are on the job's devices.
  std::vector<const v1::Communicator*> communicators;
  int64_t interval_ns = 0;  // the report's interval; 0 when it has none
};

// The engine, as a job rule sees it while observing one slice.
class JobRuleContext {
 public:
  virtual ~JobRuleContext() = default;
  virtual const Config& config() const = 0;
  // This rule's finding of this job on `subject` of `node` holds now (as RuleContext::Raise).
  virtual void Raise(std::string_view node, const Subject& subject, Raised raised) = 0;
};

class JobRule {
 public:
  virtual ~JobRule() = default;
  // Observes the job's devices in one node's report, and raises every finding of the job that
  // holds now, on any of its nodes.
  virtual void Observe(const JobSlice& slice, JobRuleContext& context) = 0;
  // As Rule::SettleSeconds: a job finding restored after a restart stays open this long (in the
  // job's report time) unless raised again.
  virtual double SettleSeconds() const { return 0; }
};

// Subject of a finding (Engine::Restore): what Raise was given when it opened.
Subject SubjectOf(const v1::Finding& finding);

// "RULE on NODE device D" ("RULE on NODE" without a device): how consequence_of and caused_by
// name another finding.
std::string FindingName(const v1::Finding& finding);
// The key rules and the engine keep per-device state by: the UUID, else "#index"; "" for the
// node itself (DeviceKey of the device the finding is about).
std::string SubjectKey(const Subject& subject);

struct RuleDefinition {
  std::string_view id;                           // lower snake case, the `rule` label
  std::unique_ptr<Rule> (*make)(const Config&);  // per node; null: the rule is a job rule only
  bool (*enabled)(const Config&);
  std::unique_ptr<JobRule> (*make_job)(const Config&) = nullptr;  // per job; null: none
};

// Every rule, in the order of docs/diagnostics.md.
std::span<const RuleDefinition> AllRules();

}  // namespace accelmon::diagnostics
