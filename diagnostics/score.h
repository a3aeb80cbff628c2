// How well the rules did on a recording whose truth is known: `accelmon diagnose RECORDING
// --score EXPECTATIONS` compares the findings with the findings expected (a scenario file's
// `expect:` list, or a file with only that) and counts, per rule, what was found, missed and
// found falsely, and how far each finding's start is from the expected onset.
//
//   expect:                # [] for a near miss: nothing may open
//     - rule: memory_leak
//       node: sim-0
//       device: 0          # index; left out: the node itself
//       link: nvlink0      # left out: not about a link
//       onset: 35m         # offset from the recording's first report (as a fault's `at:`)
//       optional: false    # true: neither missed nor counted when it does not open
//       allow: [job_straggler]  # companion rules this fault may rightly open
//   allow: [throughput_drop]    # the same for the whole file
//
// Matching: each expectation (in onset order) takes the earliest finding not taken yet with the
// same rule, node, device and link; none is a miss. Every finding left over is a false finding,
// unless its rule is allowed (top level, or by any expectation): those are counted apart, in
// neither recall nor false findings.
//
// Onset error: the finding's start minus the expected onset (first report + onset), in seconds;
// positive is late. Detection delay: the finding's detected_at minus the expected onset.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "accelmon/v1/diagnostics.pb.h"

namespace accelmon::diagnostics {

// "FILE:LINE: what is wrong".
class ScoreError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Expectation {
  int line = 0;  // in the file, to name it in the report
  std::string rule;
  std::string node;
  std::string device;  // index as the finding has it; empty: the node
  std::string link;    // empty: not about a link
  double onset_s = 0;  // after the first report
  bool optional = false;
  std::vector<std::string> allow;  // companion rules
};

struct Expectations {
  std::string path;  // names the file in errors and in the report
  std::vector<Expectation> expect;
  std::vector<std::string> allow;  // companion rules for every expectation
};

// Reads the `expect:` (and top-level `allow:`) of a scenario file or of a file with only those;
// a scenario's `faults:` and `jobs:` are skipped. Throws ScoreError on any error, a missing
// `expect:` included.
Expectations LoadExpectations(const std::string& path);
Expectations ParseExpectations(const std::string& yaml_text, const std::string& name_for_errors);

// One expectation and what it was matched with.
struct ScoredExpectation {
  Expectation expectation;
  std::optional<v1::Finding> finding;     // none: missed
  std::optional<double> onset_error_s;    // finding.start - expected onset
  std::optional<double> detection_delay;  // finding.detected_at - expected onset (seconds)
};

struct RuleScore {
  std::string rule;
  int expected = 0;  // optional expectations count only when found
  int found = 0;
  int missed = 0;
  int false_findings = 0;
  int allowed = 0;                     // companion findings, not counted either way
  std::vector<double> onset_errors_s;  // signed, one per found expectation
  std::vector<double> detection_delays_s;
};

struct Score {
  std::string expectations_path;
  int64_t first_report_ns = 0;
  std::vector<ScoredExpectation> expectations;  // in the file's order
  std::vector<v1::Finding> false_findings;
  std::vector<v1::Finding> allowed;
  std::vector<RuleScore> rules;  // by rule id
  RuleScore total;               // rule "total"
};

// `findings` as `diagnose` prints them (closed and still open); `first_report_ns` is the time of
// the recording's first report.
Score ComputeScore(const Expectations& expectations, std::span<const v1::Finding> findings,
                   int64_t first_report_ns);

// The median of the absolute values; the signed value of the largest absolute value. Nothing
// for an empty list.
std::optional<double> MedianAbs(std::vector<double> values);
std::optional<double> WorstSigned(std::span<const double> values);
std::optional<double> Median(std::vector<double> values);

// The table for a person: a row per rule, the total, then each miss and false finding.
void WriteScoreText(std::ostream& out, const Score& score, const std::string& input);
// {"input", "expectations", "first_report", "rules": [{"rule", "expected", "found", "missed",
// "false", "allowed", "recall", "onset_error_s": {"median_abs", "worst"},
// "detection_delay_s": {"median", "worst"}}], "total": {same}, "matches": [{"rule", "node",
// "device", "link", "line", "onset", "optional", "found", "start", "detected_at",
// "onset_error_s", "detection_delay_s"}], "false_findings": [{"rule", "node", "device", "link",
// "start"}], "allowed": [same]}. Times are RFC 3339; an unknown number is null.
void WriteScoreJson(std::ostream& out, const Score& score, const std::string& input);

}  // namespace accelmon::diagnostics
