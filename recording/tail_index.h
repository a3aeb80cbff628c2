// Where each node's latest recorded report is, so that a restarted exporter gets every node's
// last state back without reading the recording (docs/recording-format.md, "Tail index").
//
// The exporter's segment writer keeps the location (segment, record offset) of every node's
// latest report and, after a sync, rewrites the small file `tail.index` at most once a second.
// On start it reads that file and the records written after the point it covers, and the
// exporter then reads just the records those locations name.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "recording/report_key.h"

namespace accelmon::recording {

// The record of one node's latest report.
struct ReportLocation {
  uint64_t segment = 0;  // the segment's index (its file name)
  uint64_t offset = 0;   // of the record's first fragment
  int64_t time_ns = 0;   // the report's own timestamp
  bool operator==(const ReportLocation&) const = default;
};
// By node name.
using ReportLocations = std::map<std::string, ReportLocation, std::less<>>;

inline constexpr std::string_view kTailIndexFile = "tail.index";

// What start-up found about the latest reports (SegmentWriter::recovered_locations()).
struct RecoveredLocations {
  ReportLocations nodes;
  // "" when `tail.index` was read; else why not (missing, damaged), in which case `nodes` come
  // from the newest two segments that hold reports, and `watermarks` is empty.
  std::string index_problem;
  // From the index, advanced by every report after it: the exporter's dedup state.
  std::optional<Watermarks> watermarks;
  uint64_t records_scanned = 0;  // records read after the point the index covered
  uint64_t reports_scanned = 0;
  std::vector<std::string> damage;  // in the records read
};

// Writes `tail.index` in `dir` (to a temporary file, renamed over the old one; not synced: a
// lost index costs only a slower, partial start). `segment` and `end_offset`: how far the
// synced records go; `watermarks` as of there. False with errno set on failure.
bool WriteTailIndex(const std::string& dir, const ReportLocations& nodes,
                    const Watermarks& watermarks, uint64_t segment, uint64_t end_offset);

// Reads `tail.index` of `dir` and brings it up to date from the records after it in
// `segments` (index, path; oldest first). Damaged records are skipped and said in `damage`.
RecoveredLocations RecoverLocations(const std::string& dir,
                                    const std::vector<std::pair<uint64_t, std::string>>& segments);

// The latest reports at `locations` (their wire bytes, in node order), leaving out nodes whose
// report is older than `oldest_ns` and those whose record is gone or damaged (each said in
// `problems`).
struct LatestReports {
  std::vector<std::string> reports;
  uint64_t records_read = 0;
  uint64_t too_old = 0;
  std::vector<std::string> problems;
};
LatestReports ReadLatestReports(const std::string& dir, const ReportLocations& locations,
                                int64_t oldest_ns);

}  // namespace accelmon::recording
