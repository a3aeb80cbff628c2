// What the exporter accepts from an agent. Every report is checked before it touches the state,
// so that a buggy or hostile agent can neither corrupt /metrics nor blow up its cardinality.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

#include "accelmon/v1/telemetry.pb.h"
#include "daemon/exporter/series_budget.h"

namespace accelmon {

using Clock = std::chrono::system_clock;

struct ValidationLimits {
  // Label values (node, uuid, link, sensor names, ...) longer than this are refused.
  size_t max_label_bytes = 128;
  size_t max_devices = 64;
  // Device links and host links together.
  size_t max_links = 512;
  size_t max_events = 1024;
  // Processes per device, listed by the driver or pushing allocator statistics (the agent keeps
  // at most 256 pushing ones, see --push.max-processes-per-device).
  size_t max_processes_per_device = 256;
  // Holders per device (pods, Slurm steps, users): each is an accelmon_device_job_info series.
  size_t max_holders_per_device = 64;
  // Pids one holder lists (the holder's processes on the device).
  size_t max_pids_per_holder = 256;
  // A Kubernetes pod name may be a DNS subdomain of up to 253 bytes; the holder's other strings
  // are held to max_label_bytes.
  size_t max_pod_bytes = 253;
  // NCCL communicators per report, and ranks per communicator (the agent keeps its own node's
  // and at most 64 of the others', collectors/nccl_ras.h; a node holds at most max_devices).
  size_t max_communicators = 64;
  size_t max_ranks_per_communicator = 128;
  // How far a report's timestamp may be ahead of the exporter's clock (node clock skew).
  std::chrono::milliseconds max_future = std::chrono::minutes(5);
  // What is trimmed rather than refused (series_budget.h).
  TrimLimits trim{};
};

// Why `report`, received at `now`, cannot be applied: a short lower snake case reason (the
// `reason` label of accelmon_exporter_reports_rejected_total), or empty when it is acceptable.
// Reasons: missing_node, missing_instance, missing_sequence, missing_timestamp,
// timestamp_in_future, too_many_devices, too_many_links, too_many_events, too_many_processes,
// too_many_holders, too_many_holder_pids, too_many_communicators, too_many_ranks, label_too_long,
// invalid_utf8, non_finite_value, value_out_of_range.
std::string ValidateReport(const v1::NodeReport& report, const ValidationLimits& limits,
                           Clock::time_point now);

// Parses a report from the wire into `report`. Returns empty on success; "invalid_utf8" when the
// only problem is a string field that is not UTF-8 (protobuf refuses those in proto3 `string`
// fields; `report` then holds just its sequence, for the ack); "malformed_report" otherwise.
std::string ParseReport(std::string_view wire, v1::NodeReport* report);

// protobuf logs every invalid UTF-8 string it parses, which a client could use to flood the log:
// route its log lines to spdlog, at most one a minute per message.
void RouteProtobufLogsToSpdlog();

// True when `s` is well-formed UTF-8 (no overlong forms, surrogates or code points > U+10FFFF).
bool IsValidUtf8(std::string_view s);

}  // namespace accelmon
