// The Query API's GetSummary trims each report to what `accelmon top` shows
// (daemon/exporter/node_summary.h): top must build the same view from the trimmed report as from
// the whole one, in a small part of its bytes, with absent values still absent.
#include "daemon/exporter/node_summary.h"

#include <gtest/gtest.h>

#include "daemon/clients/loadgen.h"
#include "daemon/clients/top_view.h"
#include "proto/time_format.h"

namespace accelmon {
namespace node_summary_test {
namespace {

using namespace std::chrono_literals;

const auto kNow = std::chrono::system_clock::time_point(1'800'000'000s);

// A simulated node's report as loadgen sends it (8 devices, their NVLinks and PCIe, holders and
// processes), stamped 1 s before kNow.
v1::NodeReport SimulatedReport(const std::string& node) {
  LoadgenOptions options;
  options.devices = 8;
  const std::vector<std::string> bodies = LoadgenReportBodies(node, options, 0);
  v1::NodeReport r;
  EXPECT_TRUE(r.ParseFromString(bodies.front()));
  r.set_agent_instance_id("instance-" + node);
  r.set_sequence(7);
  *r.mutable_timestamp() = TimestampFromTimePoint(kNow - 1s);
  return r;
}

std::string TopText(const std::vector<v1::NodeReport>& reports,
                    const std::vector<v1::Finding>& findings) {
  return top::FormatText(top::BuildView(reports, findings, kNow, {}), "test");
}

TEST(NodeSummary, TopShowsTheSameFromTheSummaryAsFromTheWholeReport) {
  std::vector<v1::NodeReport> full{SimulatedReport("gpu-1"), SimulatedReport("gpu-2")};
  // Holders of every kind, with the fields top does not show (pids, command, memory).
  v1::DeviceHolder* pod = full[0].mutable_devices(1)->add_holders();
  pod->set_kind(v1::HOLDER_KIND_POD);
  pod->set_pod("trainer-0");
  pod->set_namespace_("ml");
  pod->add_pids(4242);
  pod->set_command("python");
  full[1].mutable_devices(2)->clear_holders();
  full[1].mutable_devices(2)->add_holders()->set_user("alice");
  v1::Finding finding;
  finding.set_rule("link_down");
  finding.set_severity("critical");
  finding.set_node("gpu-1");
  finding.set_device("3");
  finding.set_summary("nvlink2 down");
  *finding.mutable_start() = TimestampFromTimePoint(kNow - 30s);
  finding.add_evidence()->set_name("link");

  std::vector<v1::NodeReport> trimmed(full.size());
  for (size_t i = 0; i < full.size(); ++i) SummarizeReport(full[i], &trimmed[i]);
  v1::Finding trimmed_finding;
  SummarizeFinding(finding, &trimmed_finding);

  ASSERT_GT(full[0].devices(0).links_size(), 0) << "the whole report has links to leave out";
  EXPECT_EQ(TopText(full, {finding}), TopText(trimmed, {trimmed_finding}));
  EXPECT_EQ(trimmed_finding.evidence_size(), 0);
  EXPECT_EQ(trimmed_finding.summary(), "nvlink2 down");
  // The point of it: a small part of the bytes.
  EXPECT_LT(trimmed[0].ByteSizeLong() * 6, full[0].ByteSizeLong())
      << trimmed[0].ByteSizeLong() << " of " << full[0].ByteSizeLong() << " bytes";
  EXPECT_EQ(trimmed[0].devices(0).links_size(), 0);
  EXPECT_EQ(trimmed[0].devices(1).holders(1).pids_size(), 0);
  EXPECT_EQ(trimmed[0].devices(1).holders(1).pod(), "trainer-0");
}

TEST(NodeSummary, WhatTheReportLacksStaysAbsent) {
  v1::NodeReport r;
  r.set_node("bare");
  v1::DeviceTelemetry* d = r.add_devices();
  d->mutable_identity()->set_index(0);
  d->mutable_memory()->set_used_bytes(0);  // reported, and zero
  v1::NodeReport s;
  SummarizeReport(r, &s);
  ASSERT_EQ(s.devices_size(), 1);
  EXPECT_FALSE(s.has_timestamp());
  EXPECT_FALSE(s.devices(0).has_up());
  EXPECT_TRUE(s.devices(0).memory().has_used_bytes());
  EXPECT_FALSE(s.devices(0).memory().has_total_bytes());
  EXPECT_FALSE(s.devices(0).utilization().has_compute_ratio());
  EXPECT_FALSE(s.devices(0).thermal().has_core_celsius());
  EXPECT_FALSE(s.devices(0).power().has_usage_watts());
}

}  // namespace
}  // namespace node_summary_test
}  // namespace accelmon
