// What identifies a report for exactly-once delivery, and where each node's reports stand: shared
// by the segment writer, its tail index and the agent's spool.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

namespace accelmon::recording {

// Where one node's reports stand: the agent instance last applied and its highest sequence.
struct Watermark {
  std::string agent_instance_id;
  uint64_t sequence = 0;
  bool operator==(const Watermark&) const = default;
};
// By node name.
using Watermarks = std::map<std::string, Watermark, std::less<>>;

// What identifies a report for exactly-once delivery.
struct ReportKey {
  std::string node;
  std::string agent_instance_id;
  uint64_t sequence = 0;
  int64_t time_ns = 0;  // the report's timestamp (for the tail index); 0 when it has none
};

// Reads node, agent_instance_id, sequence and timestamp (fields 1-4 of NodeReport) from one
// report's wire bytes, skipping everything else: for readers that need only a report's key
// (recovery, the agent's spool). False when the bytes are malformed.
bool ParseReportKey(std::string_view wire, ReportKey* key);

// Moves `watermarks` past one report, as the exporter's dedup does: the same instance keeps its
// highest sequence, a new instance replaces the old one.
void AdvanceWatermark(Watermarks& watermarks, const ReportKey& key);

}  // namespace accelmon::recording
