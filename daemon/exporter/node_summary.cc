#include "daemon/exporter/node_summary.h"

namespace accelmon {

void SummarizeReport(const v1::NodeReport& report, v1::NodeReport* out) {
  out->Clear();
  out->set_node(report.node());
  out->set_agent_instance_id(report.agent_instance_id());
  out->set_sequence(report.sequence());
  if (report.has_timestamp()) *out->mutable_timestamp() = report.timestamp();
  if (report.has_interval()) *out->mutable_interval() = report.interval();
  out->mutable_devices()->Reserve(report.devices_size());
  for (const v1::DeviceTelemetry& d : report.devices()) {
    v1::DeviceTelemetry* s = out->add_devices();
    s->mutable_identity()->set_index(d.identity().index());
    s->mutable_identity()->set_model(d.identity().model());
    if (d.has_up()) s->set_up(d.up());
    const v1::DeviceMemory& m = d.memory();
    if (m.has_used_bytes()) s->mutable_memory()->set_used_bytes(m.used_bytes());
    if (m.has_total_bytes()) s->mutable_memory()->set_total_bytes(m.total_bytes());
    if (m.has_fragmentation_ratio()) {
      s->mutable_memory()->set_fragmentation_ratio(m.fragmentation_ratio());
    }
    if (d.utilization().has_compute_ratio()) {
      s->mutable_utilization()->set_compute_ratio(d.utilization().compute_ratio());
    }
    if (d.thermal().has_core_celsius()) {
      s->mutable_thermal()->set_core_celsius(d.thermal().core_celsius());
    }
    if (d.power().has_usage_watts()) s->mutable_power()->set_usage_watts(d.power().usage_watts());
    for (const v1::DeviceHolder& h : d.holders()) {
      v1::DeviceHolder* t = s->add_holders();
      t->set_kind(h.kind());
      t->set_job(h.job());
      t->set_pod(h.pod());
      t->set_namespace_(h.namespace_());
      t->set_user(h.user());
      t->set_rank(h.rank());
    }
  }
}

void SummarizeFinding(const v1::Finding& finding, v1::Finding* out) {
  *out = finding;
  out->clear_evidence();
}

}  // namespace accelmon
