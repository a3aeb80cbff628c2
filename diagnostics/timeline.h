// What `accelmon diagnose` prints: the findings over an input as an incident timeline (text),
// JSON, or one self-contained HTML page with a plot around each finding.
//
// The writers print findings in the order given: SortFindings first for a timeline (by start,
// then node, rule, device and link). Times are RFC 3339 in UTC with milliseconds
// ("2026-12-02T03:14:07.000Z").
//
// JSON: {"input": {...}, "findings": [{"rule", "severity", "node", "device", "link", "job",
// "consequence_of", "start", "end", "summary", "evidence"}]}. "device", "link", "job" and
// "consequence_of" are always there, "" when the finding is not about a device, a link or a job,
// or is no likely consequence of an earlier finding of its job; with --job, "input" has
// "job": {"id", "nodes": [...], "devices"}; "end" is null while the finding is open; each evidence
// is
// {"name", "value", "unit"} when numeric (plus "text" when it carries a note) or
// {"name", "text"}. A value that is not finite is null.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "accelmon/v1/diagnostics.pb.h"
#include "diagnostics/series.h"
#include "proto/json_string.h"

namespace accelmon::diagnostics {

// What the findings were found in.
struct InputSummary {
  std::string input{};      // as given on the command line ("a b" for several recordings)
  uint64_t recordings = 1;  // inputs read as one
  uint64_t reports = 0;     // read, duplicates included
  uint64_t duplicates = 0;  // several recordings: reports two of them held, read once
  uint64_t nodes = 0;
  std::optional<int64_t> first_ns{};  // oldest report
  std::optional<int64_t> last_ns{};   // newest report
  uint64_t damaged_regions = 0;
  uint64_t damaged_bytes = 0;
  uint64_t out_of_order = 0;  // reports the engine skipped
  // `diagnose --job`: the job, the nodes where a device held it, and how many devices did.
  std::string job{};
  std::vector<std::string> job_nodes{};
  uint64_t job_devices = 0;
};

void WriteText(std::ostream& out, std::span<const v1::Finding> findings, const InputSummary& input);
void WriteJson(std::ostream& out, std::span<const v1::Finding> findings, const InputSummary& input);
// `series[i]` is the plot of findings[i] (SeriesCollector over the same findings, in the same
// order); a finding without points gets a note instead of a plot.
void WriteHtml(std::ostream& out, std::span<const v1::Finding> findings, const InputSummary& input,
               std::span<const std::vector<SeriesPoint>> series);

// The order the writers print in: by start, node, rule, device, link.
void SortFindings(std::vector<v1::Finding>& findings);

}  // namespace accelmon::diagnostics
