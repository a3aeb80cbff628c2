#include "daemon/exporter/report_validator.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor.pb.h>
#include <google/protobuf/dynamic_message.h>
#include <spdlog/spdlog.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>

#include "daemon/common/log_limiter.h"

namespace accelmon {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

// Keeps the first problem found; later checks are no-ops once there is one.
class Checker {
 public:
  explicit Checker(const ValidationLimits& limits) : limits_(limits) {}

  // A string that becomes a label value (or a map key in the state).
  void Label(std::string_view s) { Label(s, limits_.max_label_bytes); }
  void Label(std::string_view s, size_t max_bytes) {
    if (!reason_.empty()) return;
    if (s.size() > max_bytes) {
      reason_ = "label_too_long";
    } else if (!IsValidUtf8(s)) {
      reason_ = "invalid_utf8";
    }
  }
  // Free text: any length (the message size cap bounds it), but valid UTF-8.
  void Text(std::string_view s) {
    if (reason_.empty() && !IsValidUtf8(s)) reason_ = "invalid_utf8";
  }
  void Value(double v, double lo, double hi) {
    if (!reason_.empty()) return;
    if (!std::isfinite(v)) {
      reason_ = "non_finite_value";
    } else if (v < lo || v > hi) {
      reason_ = "value_out_of_range";
    }
  }
  void Ratio(double v) { Value(v, 0, 1); }
  void Celsius(double v) { Value(v, -273.15, 1000); }
  void NonNegative(double v) { Value(v, 0, kInfinity); }
  void Fail(const char* reason) {
    if (reason_.empty()) reason_ = reason;
  }

  std::string Take() && { return std::move(reason_); }
  const ValidationLimits& limits() const { return limits_; }

 private:
  const ValidationLimits& limits_;
  std::string reason_;
};

void CheckActivity(Checker& c, const v1::DeviceActivity& a) {
  for (const auto& [has, value] :
       {std::pair{a.has_graphics_engine_ratio(), a.graphics_engine_ratio()},
        {a.has_sm_ratio(), a.sm_ratio()},
        {a.has_sm_occupancy_ratio(), a.sm_occupancy_ratio()},
        {a.has_tensor_ratio(), a.tensor_ratio()},
        {a.has_tensor_dfma_ratio(), a.tensor_dfma_ratio()},
        {a.has_tensor_hmma_ratio(), a.tensor_hmma_ratio()},
        {a.has_tensor_imma_ratio(), a.tensor_imma_ratio()},
        {a.has_fp64_ratio(), a.fp64_ratio()},
        {a.has_fp32_ratio(), a.fp32_ratio()},
        {a.has_fp16_ratio(), a.fp16_ratio()},
        {a.has_integer_ratio(), a.integer_ratio()},
        {a.has_dram_bandwidth_ratio(), a.dram_bandwidth_ratio()},
        {a.has_vector_ratio(), a.vector_ratio()}}) {
    if (has) c.Ratio(value);
  }
  for (const auto& [has, value] :
       {std::pair{a.has_pcie_transmit_bytes_per_second(), a.pcie_transmit_bytes_per_second()},
        {a.has_pcie_receive_bytes_per_second(), a.pcie_receive_bytes_per_second()},
        {a.has_nvlink_transmit_bytes_per_second(), a.nvlink_transmit_bytes_per_second()},
        {a.has_nvlink_receive_bytes_per_second(), a.nvlink_receive_bytes_per_second()}}) {
    if (has) c.NonNegative(value);
  }
  // 8 partitions of 8 dies is the most the AMD table can hold; more is a runaway series count.
  if (a.compute_die_ratios_size() > 64) c.Fail("too_many_compute_dies");
  for (const double ratio : a.compute_die_ratios()) c.Ratio(ratio);
}

// Each location once and a known one: two entries for a location would be two samples of one
// series, and Prometheus refuses the whole scrape for that.
void CheckEccLocations(Checker& c, const v1::DeviceErrors& e) {
  static_assert(v1::MemoryLocation_MAX < 32, "`seen` holds one bit per location");
  uint32_t seen = 0;
  for (const v1::EccLocationCounts& l : e.ecc_by_location()) {
    const int location = l.location();
    if (location == v1::MEMORY_LOCATION_UNSPECIFIED || !v1::MemoryLocation_IsValid(location) ||
        (seen & (1u << location)) != 0) {
      c.Fail("invalid_memory_location");
      return;
    }
    seen |= 1u << location;
  }
}

void CheckLink(Checker& c, const v1::Link& l) {
  c.Label(l.name());
  c.Label(l.peer());
  for (const auto& [type, count] : l.errors_total()) c.Label(type);
  if (l.has_max_bandwidth_bytes_per_second()) c.NonNegative(l.max_bandwidth_bytes_per_second());
}

// Every string of a holder is a label of accelmon_device_job_info (command is not, but it is
// /proc/PID/comm, 15 bytes, so a longer one is not what the agent reads).
void CheckHolder(Checker& c, const v1::DeviceHolder& h) {
  c.Label(h.job());
  c.Label(h.pod(), c.limits().max_pod_bytes);
  c.Label(h.namespace_());
  c.Label(h.container());
  c.Label(h.step());
  c.Label(h.user());
  c.Label(h.rank());
  c.Label(h.command());
  c.Label(h.claim(), c.limits().max_pod_bytes);
  c.Label(h.claim_namespace());
  c.Label(h.pod_uid());
}

void CheckDevice(Checker& c, const v1::DeviceTelemetry& d) {
  const v1::DeviceIdentity& id = d.identity();
  c.Label(id.vendor());
  c.Label(id.model());
  c.Label(id.uuid());
  c.Label(id.pci_bus_id());
  c.Label(id.firmware_version());
  c.Label(id.driver_version());
  c.Label(id.serial());
  c.Label(id.mig().parent_uuid());
  c.Label(id.mig().profile());

  if (d.memory().has_fragmentation_ratio()) c.Ratio(d.memory().fragmentation_ratio());

  const v1::DeviceThermal& t = d.thermal();
  if (t.has_core_celsius()) c.Celsius(t.core_celsius());
  if (t.has_memory_celsius()) c.Celsius(t.memory_celsius());
  if (t.has_slowdown_threshold_celsius()) c.Celsius(t.slowdown_threshold_celsius());
  if (t.has_shutdown_threshold_celsius()) c.Celsius(t.shutdown_threshold_celsius());
  for (const auto& [reason, active] : t.throttle_reasons()) c.Label(reason);
  if (t.has_fan_speed_ratio()) c.NonNegative(t.fan_speed_ratio());

  const v1::DevicePower& p = d.power();
  if (p.has_usage_watts()) c.NonNegative(p.usage_watts());
  if (p.has_limit_watts()) c.NonNegative(p.limit_watts());
  if (p.has_energy_joules_total()) c.NonNegative(p.energy_joules_total());

  const v1::DeviceUtilization& u = d.utilization();
  if (u.has_compute_ratio()) c.Ratio(u.compute_ratio());
  if (u.has_memory_bandwidth_ratio()) c.Ratio(u.memory_bandwidth_ratio());

  if (d.clocks().has_compute_hz()) c.NonNegative(d.clocks().compute_hz());
  if (d.clocks().has_memory_hz()) c.NonNegative(d.clocks().memory_hz());
  const v1::DeviceClocks& k = d.clocks();
  if (k.has_power_violation_seconds_total()) c.NonNegative(k.power_violation_seconds_total());
  if (k.has_thermal_violation_seconds_total()) c.NonNegative(k.thermal_violation_seconds_total());
  if (k.has_sync_boost_violation_seconds_total()) {
    c.NonNegative(k.sync_boost_violation_seconds_total());
  }
  if (k.has_board_limit_violation_seconds_total()) {
    c.NonNegative(k.board_limit_violation_seconds_total());
  }
  if (k.has_low_utilization_violation_seconds_total()) {
    c.NonNegative(k.low_utilization_violation_seconds_total());
  }
  if (k.has_reliability_violation_seconds_total()) {
    c.NonNegative(k.reliability_violation_seconds_total());
  }
  if (d.state().has_performance_state()) c.Value(d.state().performance_state(), 0, 15);
  CheckActivity(c, d.activity());
  CheckEccLocations(c, d.errors());

  for (const v1::Link& l : d.links()) CheckLink(c, l);

  for (const v1::ProcessMemory& pm : d.processes()) {
    c.Label(pm.job());
    c.Label(pm.rank());
    c.Label(pm.user());
    c.Label(pm.command());
  }
  for (const v1::DeviceHolder& h : d.holders()) CheckHolder(c, h);
}

void CheckHost(Checker& c, const v1::HostTelemetry& h) {
  for (const v1::BuddyZone& z : h.buddyinfo()) c.Label(z.zone());
  for (const v1::Link& l : h.links()) CheckLink(c, l);
  for (const v1::TemperatureSensor& t : h.temperatures()) {
    c.Label(t.sensor());
    c.Label(t.chip());
    if (t.has_celsius()) c.Celsius(t.celsius());
  }
  for (const v1::PowerSensor& p : h.power_sensors()) {
    c.Label(p.sensor());
    c.Label(p.chip());
    if (p.has_watts()) c.NonNegative(p.watts());
  }
}

// True when `ts` is later than `now` + `ahead`, compared in (seconds, nanos) so that no
// timestamp a client can send overflows.
bool IsAfter(const google::protobuf::Timestamp& ts, Clock::time_point now,
             std::chrono::milliseconds ahead) {
  const auto limit =
      std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()) + ahead;
  const int64_t limit_seconds = std::chrono::floor<std::chrono::seconds>(limit).count();
  const int64_t limit_nanos = (limit - std::chrono::seconds(limit_seconds)).count();
  return ts.seconds() > limit_seconds ||
         (ts.seconds() == limit_seconds && ts.nanos() > limit_nanos);
}

// NodeReport with every string field turned into bytes: the same wire format, parsed without
// UTF-8 checks. Tells a report with bad UTF-8 from one that is not a report at all.
const google::protobuf::Message& LenientReportPrototype() {
  static const google::protobuf::Message* prototype = [] {
    using google::protobuf::DescriptorProto;
    using google::protobuf::FieldDescriptorProto;
    auto* pool = new google::protobuf::DescriptorPool();  // lives as long as the process
    std::function<void(google::protobuf::RepeatedPtrField<DescriptorProto>*)> loosen =
        [&](google::protobuf::RepeatedPtrField<DescriptorProto>* messages) {
          for (DescriptorProto& m : *messages) {
            // Maps may not have bytes keys; a plain repeated entry is the same on the wire.
            m.mutable_options()->clear_map_entry();
            for (FieldDescriptorProto& f : *m.mutable_field()) {
              if (f.type() == FieldDescriptorProto::TYPE_STRING) {
                f.set_type(FieldDescriptorProto::TYPE_BYTES);
              }
            }
            loosen(m.mutable_nested_type());
          }
        };
    std::function<void(const google::protobuf::FileDescriptor*)> build =
        [&](const google::protobuf::FileDescriptor* file) {
          if (pool->FindFileByName(file->name()) != nullptr) return;
          for (int i = 0; i < file->dependency_count(); ++i) build(file->dependency(i));
          google::protobuf::FileDescriptorProto proto;
          file->CopyTo(&proto);
          loosen(proto.mutable_message_type());
          pool->BuildFile(proto);
        };
    build(v1::NodeReport::descriptor()->file());
    auto* factory = new google::protobuf::DynamicMessageFactory(pool);
    return factory->GetPrototype(
        pool->FindMessageTypeByName(v1::NodeReport::descriptor()->full_name()));
  }();
  return *prototype;
}

}  // namespace

std::string ParseReport(std::string_view wire, v1::NodeReport* report) {
  if (report->ParseFromArray(wire.data(), static_cast<int>(wire.size()))) return {};
  report->Clear();
  std::unique_ptr<google::protobuf::Message> lenient(LenientReportPrototype().New());
  if (!lenient->ParseFromArray(wire.data(), static_cast<int>(wire.size()))) {
    return "malformed_report";
  }
  const auto* descriptor = lenient->GetDescriptor();
  const auto* reflection = lenient->GetReflection();
  report->set_sequence(reflection->GetUInt64(*lenient, descriptor->FindFieldByName("sequence")));
  // For the log line (escaped there), even when the node name is what is broken.
  report->set_node(reflection->GetString(*lenient, descriptor->FindFieldByName("node")));
  return "invalid_utf8";
}

void RouteProtobufLogsToSpdlog() {
  google::protobuf::SetLogHandler(
      [](google::protobuf::LogLevel level, const char* file, int line, const std::string& message) {
        static LogLimiter limiter;
        const auto suppressed = limiter.Admit(message, std::chrono::steady_clock::now());
        if (!suppressed) return;
        const std::string more =
            *suppressed == 0 ? "" : fmt::format(" ({} more like it not logged)", *suppressed);
        if (level >= google::protobuf::LOGLEVEL_ERROR) {
          spdlog::warn("protobuf ({}:{}): {}{}", file, line, message, more);
        } else {
          spdlog::debug("protobuf ({}:{}): {}{}", file, line, message, more);
        }
      });
}

bool IsValidUtf8(std::string_view s) {
  size_t i = 0;
  const size_t n = s.size();
  while (i < n) {
    const auto b = static_cast<unsigned char>(s[i]);
    if (b < 0x80) {
      ++i;
      continue;
    }
    size_t len = 0;
    uint32_t cp = 0;
    if ((b & 0xE0) == 0xC0) {
      len = 2;
      cp = b & 0x1F;
    } else if ((b & 0xF0) == 0xE0) {
      len = 3;
      cp = b & 0x0F;
    } else if ((b & 0xF8) == 0xF0) {
      len = 4;
      cp = b & 0x07;
    } else {
      return false;
    }
    if (n - i < len) return false;
    for (size_t k = 1; k < len; ++k) {
      const auto cont = static_cast<unsigned char>(s[i + k]);
      if ((cont & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cont & 0x3F);
    }
    constexpr uint32_t kMinForLength[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMinForLength[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += len;
  }
  return true;
}

std::string ValidateReport(const v1::NodeReport& report, const ValidationLimits& limits,
                           Clock::time_point now) {
  if (report.node().empty()) return "missing_node";
  if (report.agent_instance_id().empty()) return "missing_instance";
  if (report.sequence() == 0) return "missing_sequence";
  if (!report.has_timestamp()) return "missing_timestamp";
  if (IsAfter(report.timestamp(), now, limits.max_future)) return "timestamp_in_future";

  // Counts first: they are cheap and bound the work below.
  if (static_cast<size_t>(report.devices_size()) > limits.max_devices) return "too_many_devices";
  size_t links = static_cast<size_t>(report.host().links_size());
  for (const v1::DeviceTelemetry& d : report.devices()) {
    links += static_cast<size_t>(d.links_size());
  }
  if (links > limits.max_links) return "too_many_links";
  for (const v1::DeviceTelemetry& d : report.devices()) {
    if (static_cast<size_t>(d.processes_size()) > limits.max_processes_per_device) {
      return "too_many_processes";
    }
    if (static_cast<size_t>(d.holders_size()) > limits.max_holders_per_device) {
      return "too_many_holders";
    }
    for (const v1::DeviceHolder& h : d.holders()) {
      if (static_cast<size_t>(h.pids_size()) > limits.max_pids_per_holder) {
        return "too_many_holder_pids";
      }
    }
  }
  if (static_cast<size_t>(report.events_size()) > limits.max_events) return "too_many_events";
  if (static_cast<size_t>(report.communicators_size()) > limits.max_communicators) {
    return "too_many_communicators";
  }
  for (const v1::Communicator& comm : report.communicators()) {
    if (static_cast<size_t>(comm.ranks_size()) > limits.max_ranks_per_communicator) {
      return "too_many_ranks";
    }
  }

  Checker c(limits);
  c.Label(report.node());
  c.Label(report.agent_instance_id());
  c.Label(report.agent_version());
  for (const auto& [reason, count] : report.agent().push_rejected_total()) c.Label(reason);
  const auto& ts = report.timestamp();
  if (ts.nanos() < 0 || ts.nanos() > 999'999'999) c.Fail("value_out_of_range");
  if (report.has_interval()) {
    // A negative interval would keep a silent node "up" forever.
    const auto& iv = report.interval();
    if (iv.seconds() < 0 || iv.nanos() < 0 || iv.nanos() > 999'999'999) {
      c.Fail("value_out_of_range");
    }
  }
  for (const v1::CollectorStatus& s : report.collectors()) {
    c.Label(s.name());
    c.Text(s.error());
    c.NonNegative(s.duration_seconds());
  }
  for (const v1::DeviceTelemetry& d : report.devices()) CheckDevice(c, d);
  CheckHost(c, report.host());
  // The hash and a rank's host are labels; kinds are map keys; the rest is free text.
  for (const v1::Communicator& comm : report.communicators()) {
    c.Label(comm.hash());
    c.Text(comm.source());
    c.Text(comm.nccl_version());
    for (const v1::CommunicatorRank& r : comm.ranks()) {
      c.Label(r.host());
      for (const auto& [kind, count] : r.collectives_by_kind()) c.Label(kind);
      c.Text(r.error());
    }
  }
  for (const v1::Event& e : report.events()) {
    c.Label(e.device_uuid());
    c.Label(e.link());
    c.Text(e.message());
  }
  return std::move(c).Take();
}

}  // namespace accelmon
