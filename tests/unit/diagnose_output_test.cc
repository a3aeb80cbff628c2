// The offline diagnose outputs (diagnostics/timeline.h) on handcrafted findings, and the plot
// series read back out of reports (diagnostics/series.h).
#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>

#include <sstream>

#include "diagnostics/rule.h"
#include "diagnostics/series.h"
#include "diagnostics/timeline.h"

namespace accelmon::diagnostics {
namespace diagnose_output_test {
namespace {

constexpr int64_t kSecond = 1'000'000'000;
// 2026-12-02T03:00:00Z
constexpr int64_t kT0 = int64_t{1796180400} * kSecond;

void SetTime(int64_t ns, google::protobuf::Timestamp* t) {
  t->set_seconds(ns / kSecond);
  t->set_nanos(static_cast<int32_t>(ns % kSecond));
}

v1::Finding MakeFinding(std::string rule, std::string severity, std::string node,
                        std::string device, std::string link, int64_t start_ns,
                        std::optional<int64_t> end_ns, std::string summary, std::string plot) {
  v1::Finding f;
  f.set_rule(std::move(rule));
  f.set_severity(std::move(severity));
  f.set_node(std::move(node));
  f.set_device(std::move(device));
  f.set_link(std::move(link));
  SetTime(start_ns, f.mutable_start());
  if (end_ns) SetTime(*end_ns, f.mutable_end());
  f.set_summary(std::move(summary));
  f.set_plot(std::move(plot));
  return f;
}

// Two findings: a closed critical one on a link, an open warning one on a device.
std::vector<v1::Finding> Findings() {
  std::vector<v1::Finding> f;
  f.push_back(MakeFinding("job_stall", "critical", "sim-1", "3", "nvlink2",
                          kT0 + (14 * 60 + 7) * kSecond, kT0 + (20 * 60 + 11) * kSecond,
                          "all devices idle <5% \"stalled\"", "compute_ratio"));
  *f.back().add_evidence() = NumberEvidence("compute_ratio", 0.01, "ratio");
  *f.back().add_evidence() = TextEvidence("job", "llama");
  f.back().set_job("llama");
  f.back().set_consequence_of("xid_error on sim-1 device 3");
  f.back().set_caused_by("xid_error on sim-1 device 3");
  f.back().set_action("reset_device");
  SetTime(kT0 + (16 * 60 + 7) * kSecond, f.back().mutable_detected_at());
  SetTime(kT0 + (14 * 60 + 7) * kSecond, f.back().mutable_window_start());
  f.push_back(MakeFinding("memory_fragmentation", "warning", "sim-0", "0", "", kT0 + 600 * kSecond,
                          std::nullopt, "fragmentation 0.62 <with> 40% free",
                          "fragmentation_ratio"));
  *f.back().add_evidence() = NumberEvidence("fragmentation_ratio", 0.62, "ratio");
  SortFindings(f);
  return f;
}

InputSummary Input() {
  return InputSummary{.input = "rec/",
                      .reports = 480,
                      .nodes = 2,
                      .first_ns = kT0,
                      .last_ns = kT0 + 40 * 60 * kSecond,
                      .damaged_regions = 0,
                      .damaged_bytes = 0,
                      .out_of_order = 0};
}

TEST(DiagnoseText, TimelineByStartWithEvidenceEndAndCounts) {
  std::ostringstream out;
  WriteText(out, Findings(), Input());
  EXPECT_EQ(out.str(),
            "rec/: 480 reports from 2 nodes, 2026-12-02T03:00:00.000Z .. "
            "2026-12-02T03:40:00.000Z (40m00s)\n"
            "\n"
            "2026-12-02T03:10:00.000Z  WARNING   memory_fragmentation  node sim-0 device 0  "
            "fragmentation 0.62 <with> 40% free\n"
            "    fragmentation_ratio: 0.62 ratio\n"
            "    still open\n"
            "2026-12-02T03:14:07.000Z  CRITICAL  job_stall  node sim-1 device 3 link nvlink2  "
            "all devices idle <5% \"stalled\"\n"
            "    detected 03:16:07 (2m00s after it began)\n"
            "    caused by xid_error on sim-1 device 3\n"
            "    likely a consequence of xid_error on sim-1 device 3\n"
            "    action: reset_device\n"
            "    compute_ratio: 0.01 ratio\n"
            "    job: llama\n"
            "    ended 03:20:11 (6m04s)\n"
            "\n"
            "2 findings (1 still open): job_stall 1, memory_fragmentation 1; critical 1, "
            "warning 1\n");
}

TEST(DiagnoseText, ConsequencesArePrintedUnderTheirFirstFault) {
  std::vector<v1::Finding> f;
  f.push_back(MakeFinding("xid_error", "critical", "sim-1", "3", "", kT0 + 60 * kSecond,
                          std::nullopt, "XID 79", ""));
  f.push_back(MakeFinding("job_stall", "critical", "sim-0", "", "", kT0 + 90 * kSecond,
                          std::nullopt, "job llama stalled", ""));
  f.back().set_consequence_of("xid_error on sim-1 device 3");
  f.push_back(MakeFinding("memory_leak", "warning", "sim-2", "0", "", kT0 + 120 * kSecond,
                          std::nullopt, "leaking", ""));
  f.back().set_consequence_of("link_down on sim-9 device 1");  // its first fault is not listed
  SortFindings(f);
  std::ostringstream out;
  WriteText(out, f, Input());
  EXPECT_EQ(out.str().substr(out.str().find("\n\n") + 2),
            "2026-12-02T03:01:00.000Z  CRITICAL  xid_error  node sim-1 device 3  XID 79\n"
            "    still open\n"
            "    1 likely consequence of it:\n"
            "      2026-12-02T03:01:30.000Z  CRITICAL  job_stall  node sim-0  job llama stalled\n"
            "          likely a consequence of xid_error on sim-1 device 3\n"
            "          still open\n"
            "2026-12-02T03:02:00.000Z  WARNING   memory_leak  node sim-2 device 0  leaking\n"
            "    likely a consequence of link_down on sim-9 device 1\n"
            "    still open\n"
            "\n"
            "3 findings (3 still open): job_stall 1, memory_leak 1, xid_error 1; critical 2, "
            "warning 1\n");
}

TEST(DiagnoseText, JobLineNamesItsNodesAndDevices) {
  std::ostringstream out;
  InputSummary input = Input();
  input.job = "llama";
  input.job_nodes = {"sim-0", "sim-1"};
  input.job_devices = 16;
  WriteText(out, {}, input);
  EXPECT_NE(out.str().find("\njob llama: 16 devices on 2 nodes (sim-0, sim-1)\n"),
            std::string::npos)
      << out.str();
  std::ostringstream json;
  WriteJson(json, {}, input);
  google::protobuf::Struct root;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json.str(), &root).ok()) << json.str();
  const auto& job = root.fields().at("input").struct_value().fields().at("job").struct_value();
  EXPECT_EQ(job.fields().at("id").string_value(), "llama");
  EXPECT_EQ(job.fields().at("devices").number_value(), 16);
  EXPECT_EQ(job.fields().at("nodes").list_value().values_size(), 2);
}

TEST(DiagnoseText, NoFindingsStillReportsDamageAndSkippedReports) {
  std::ostringstream out;
  InputSummary input = Input();
  input.damaged_regions = 1;
  input.damaged_bytes = 4096;
  input.out_of_order = 3;
  WriteText(out, {}, input);
  EXPECT_NE(out.str().find("DAMAGED: 1 region, 4096 bytes lost"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("3 reports skipped"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("\nno findings\n"), std::string::npos) << out.str();
}

TEST(DiagnoseJson, ParsesBackWithTheDocumentedFields) {
  std::ostringstream out;
  WriteJson(out, Findings(), Input());
  google::protobuf::Struct root;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(out.str(), &root).ok()) << out.str();
  const auto& input = root.fields().at("input").struct_value().fields();
  EXPECT_EQ(input.at("reports").number_value(), 480);
  EXPECT_EQ(input.at("nodes").number_value(), 2);
  EXPECT_EQ(input.at("first").string_value(), "2026-12-02T03:00:00.000Z");
  EXPECT_EQ(input.at("damage").number_value(), 0);

  const auto& findings = root.fields().at("findings").list_value().values();
  ASSERT_EQ(findings.size(), 2);
  const auto& open = findings[0].struct_value().fields();
  EXPECT_EQ(open.size(), 15u);
  EXPECT_EQ(open.at("job").string_value(), "");  // always there, "" when unknown
  EXPECT_EQ(open.at("consequence_of").string_value(), "");
  EXPECT_EQ(open.at("caused_by").string_value(), "");
  EXPECT_EQ(open.at("action").string_value(), "");
  EXPECT_TRUE(open.at("detected_at").has_null_value());  // a finding from before the field
  EXPECT_TRUE(open.at("window_start").has_null_value());
  EXPECT_EQ(open.at("rule").string_value(), "memory_fragmentation");
  EXPECT_EQ(open.at("severity").string_value(), "warning");
  EXPECT_EQ(open.at("device").string_value(), "0");
  EXPECT_EQ(open.at("link").string_value(), "");  // always there, "" when not about a link
  EXPECT_EQ(open.at("start").string_value(), "2026-12-02T03:10:00.000Z");
  EXPECT_TRUE(open.at("end").has_null_value());
  EXPECT_EQ(open.at("summary").string_value(), "fragmentation 0.62 <with> 40% free");

  const auto& closed = findings[1].struct_value().fields();
  EXPECT_EQ(closed.at("job").string_value(), "llama");
  EXPECT_EQ(closed.at("consequence_of").string_value(), "xid_error on sim-1 device 3");
  EXPECT_EQ(closed.at("caused_by").string_value(), "xid_error on sim-1 device 3");
  EXPECT_EQ(closed.at("action").string_value(), "reset_device");
  EXPECT_EQ(closed.at("detected_at").string_value(), "2026-12-02T03:16:07.000Z");
  EXPECT_EQ(closed.at("window_start").string_value(), "2026-12-02T03:14:07.000Z");
  EXPECT_EQ(closed.at("end").string_value(), "2026-12-02T03:20:11.000Z");
  EXPECT_EQ(closed.at("summary").string_value(), "all devices idle <5% \"stalled\"");
  const auto& evidence = closed.at("evidence").list_value().values();
  ASSERT_EQ(evidence.size(), 2);
  const auto& number = evidence[0].struct_value().fields();
  EXPECT_EQ(number.at("name").string_value(), "compute_ratio");
  EXPECT_EQ(number.at("value").number_value(), 0.01);
  EXPECT_EQ(number.at("unit").string_value(), "ratio");
  const auto& text = evidence[1].struct_value().fields();
  EXPECT_EQ(text.size(), 2u);
  EXPECT_EQ(text.at("text").string_value(), "llama");
}

TEST(DiagnoseJson, EscapesAndEmptyList) {
  std::vector<v1::Finding> f = {MakeFinding("link_down", "critical", "n\"1\\", "", "eth0\n", kT0,
                                            kT0 + kSecond, "tab\there \x01", "link_up")};
  std::ostringstream out;
  WriteJson(out, f, Input());
  google::protobuf::Struct root;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(out.str(), &root).ok()) << out.str();
  const auto& finding = root.fields().at("findings").list_value().values(0).struct_value().fields();
  EXPECT_EQ(finding.at("node").string_value(), "n\"1\\");
  EXPECT_EQ(finding.at("link").string_value(), "eth0\n");
  EXPECT_EQ(finding.at("summary").string_value(), "tab\there \x01");

  std::ostringstream empty;
  WriteJson(empty, {}, InputSummary{.input = "-"});
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(empty.str(), &root).ok()) << empty.str();
  EXPECT_EQ(root.fields().at("findings").list_value().values_size(), 0);
  EXPECT_TRUE(root.fields().at("input").struct_value().fields().at("first").has_null_value());
}

size_t Count(const std::string& haystack, const std::string& needle) {
  size_t n = 0;
  for (size_t at = haystack.find(needle); at != std::string::npos;
       at = haystack.find(needle, at + 1)) {
    ++n;
  }
  return n;
}

TEST(DiagnoseHtml, SelfContainedWithAPlotPerFinding) {
  const std::vector<v1::Finding> findings = Findings();
  std::vector<std::vector<SeriesPoint>> series(2);
  for (int i = 0; i <= 40; ++i) {
    series[0].push_back({kT0 + i * 30 * kSecond, 0.3 + 0.01 * i});  // fragmentation, open
    if (i >= 8) series[1].push_back({kT0 + i * 30 * kSecond, i < 28 ? 0.9 : 0.01});
  }
  std::ostringstream out;
  WriteHtml(out, findings, Input(), series);
  const std::string html = out.str();
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_EQ(Count(html, "<svg"), 2u);
  EXPECT_EQ(Count(html, "<polyline class=\"line\" points=\""), 2u);
  EXPECT_NE(html.find("class=\"span warning\""), std::string::npos);
  EXPECT_NE(html.find("class=\"span critical\""), std::string::npos);
  // Axis labels in the plot's unit.
  EXPECT_NE(html.find(">100%</text>"), std::string::npos);
  EXPECT_NE(html.find(">03:15</text>"), std::string::npos);
  // Escaped text, and nothing fetched from anywhere.
  EXPECT_NE(html.find("fragmentation 0.62 &lt;with&gt; 40% free"), std::string::npos);
  EXPECT_NE(html.find("idle &lt;5% &quot;stalled&quot;"), std::string::npos);
  EXPECT_EQ(html.find("<with>"), std::string::npos);
  EXPECT_EQ(Count(html, "http"), Count(html, "xmlns=\"http://www.w3.org/2000/svg\""));
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("<link"), std::string::npos);
}

TEST(DiagnoseHtml, BytesInGibAndNoteWithoutData) {
  std::vector<v1::Finding> findings = {MakeFinding("memory_leak", "warning", "n", "1", "", kT0,
                                                   kT0 + 60 * kSecond, "leak", "memory_used_bytes"),
                                       MakeFinding("host_oom_kill", "critical", "n", "", "", kT0,
                                                   std::nullopt, "oom", "host_oom_kill_total")};
  std::vector<std::vector<SeriesPoint>> series(2);
  series[0] = {{kT0, 8.0 * (1 << 30)}, {kT0 + 10 * kSecond, 16.0 * (1 << 30)}};
  std::ostringstream out;
  WriteHtml(out, findings, Input(), series);
  EXPECT_NE(out.str().find("16.00 GiB</text>"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("No values of <code>host_oom_kill_total</code>"), std::string::npos);
  EXPECT_EQ(Count(out.str(), "<svg"), 1u);
}

TEST(DiagnoseHtml, AnArrowLinksAFindingToItsCause) {
  std::vector<v1::Finding> findings = {
      MakeFinding("thermal_throttling", "warning", "sim-0", "0", "", kT0, std::nullopt, "hot",
                  "core_celsius"),
      MakeFinding("throughput_drop", "warning", "sim-0", "0", "", kT0 + 60 * kSecond, std::nullopt,
                  "slow", "compute_ratio")};
  findings[1].set_caused_by("thermal_throttling on sim-0 device 0");
  SetTime(kT0 + 360 * kSecond, findings[1].mutable_detected_at());
  std::ostringstream out;
  WriteHtml(out, findings, Input(), {});
  const std::string html = out.str();
  // In the timeline table and in the finding's own section: an arrow to the cause's section.
  EXPECT_EQ(Count(html,
                  "&#8592; caused by <a href=\"#f0\">thermal_throttling on sim-0 device "
                  "0</a>"),
            2u)
      << html;
  EXPECT_NE(html.find("detected 03:06:00 (5m00s after it began)"), std::string::npos) << html;
}

TEST(DiagnoseHtml, ConsequencesSitUnderTheirFirstFaultAndLinkToIt) {
  std::vector<v1::Finding> findings = {
      MakeFinding("xid_error", "critical", "sim-2", "3", "", kT0, std::nullopt, "XID 79", ""),
      MakeFinding("link_down", "critical", "sim-0", "1", "nvlink0", kT0 + 10 * kSecond,
                  std::nullopt, "down", ""),
      MakeFinding("job_stall", "critical", "sim-2", "", "", kT0 + 30 * kSecond, std::nullopt,
                  "stalled", "")};
  findings[2].set_consequence_of("xid_error on sim-2 device 3");
  std::ostringstream out;
  WriteHtml(out, findings, Input(), {});
  const std::string html = out.str();
  // The table: the stall's row right after the XID's, before the link's, marked.
  const size_t xid = html.find("<a href=\"#f0\">");
  const size_t stall = html.find("<tr class=\"consequence\"><td>&#8627; <a href=\"#f2\">");
  const size_t link = html.find("<a href=\"#f1\">");
  ASSERT_NE(stall, std::string::npos) << html;
  EXPECT_LT(xid, stall);
  EXPECT_LT(stall, link);
  // The sections link both ways.
  EXPECT_NE(html.find("likely a consequence of <a href=\"#f0\">xid_error on sim-2 device 3</a>"),
            std::string::npos);
  EXPECT_NE(html.find("<p>Likely consequences: <a href=\"#f2\">job_stall on sim-2</a></p>"),
            std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// Series

v1::NodeReport Report(int64_t ns, const std::string& node = "sim-0") {
  v1::NodeReport r;
  r.set_node(node);
  SetTime(ns, r.mutable_timestamp());
  return r;
}

v1::DeviceTelemetry* AddDevice(v1::NodeReport& r, uint32_t index, const std::string& uuid) {
  v1::DeviceTelemetry* d = r.add_devices();
  d->mutable_identity()->set_index(index);
  d->mutable_identity()->set_uuid(uuid);
  return d;
}

TEST(DiagnoseSeries, DeviceValuesByUuidElseIndexAbsentStaysAbsent) {
  v1::NodeReport r = Report(kT0);
  v1::DeviceTelemetry* d0 = AddDevice(r, 0, "GPU-a");
  d0->mutable_memory()->set_fragmentation_ratio(0.6);
  d0->mutable_memory()->set_used_bytes(1234);
  d0->mutable_thermal()->set_core_celsius(71.5);
  d0->set_up(false);
  v1::DeviceTelemetry* d1 = AddDevice(r, 1, "GPU-b");
  d1->mutable_utilization()->set_compute_ratio(0.25);
  d1->mutable_errors()->set_ecc_corrected_total(7);
  r.mutable_host()->mutable_vmstat()->set_oom_kill_total(3);

  v1::Finding by_uuid = MakeFinding("r", "warning", "sim-0", "9", "", kT0, {}, "", "");
  by_uuid.set_device_uuid("GPU-a");  // the UUID wins over a stale index
  EXPECT_EQ(ExtractPlotValue(r, "fragmentation_ratio", by_uuid), 0.6);
  EXPECT_EQ(ExtractPlotValue(r, "memory_used_bytes", by_uuid), 1234.0);
  EXPECT_EQ(ExtractPlotValue(r, "core_celsius", by_uuid), 71.5);
  EXPECT_EQ(ExtractPlotValue(r, "device_up", by_uuid), 0.0);
  EXPECT_EQ(ExtractPlotValue(r, "compute_ratio", by_uuid), std::nullopt);

  const v1::Finding by_index = MakeFinding("r", "warning", "sim-0", "1", "", kT0, {}, "", "");
  EXPECT_EQ(ExtractPlotValue(r, "compute_ratio", by_index), 0.25);
  EXPECT_EQ(ExtractPlotValue(r, "ecc_corrected_total", by_index), 7.0);
  EXPECT_EQ(ExtractPlotValue(r, "ecc_uncorrected_total", by_index), std::nullopt);
  EXPECT_EQ(ExtractPlotValue(r, "device_up", by_index), std::nullopt);
  EXPECT_EQ(ExtractPlotValue(r, "fragmentation_ratio", by_index), std::nullopt);

  const v1::Finding missing = MakeFinding("r", "warning", "sim-0", "5", "", kT0, {}, "", "");
  EXPECT_EQ(ExtractPlotValue(r, "core_celsius", missing), std::nullopt);
  const v1::Finding node = MakeFinding("r", "warning", "sim-0", "", "", kT0, {}, "", "");
  EXPECT_EQ(ExtractPlotValue(r, "host_oom_kill_total", node), 3.0);
  EXPECT_EQ(ExtractPlotValue(Report(kT0), "host_oom_kill_total", node), std::nullopt);
  EXPECT_EQ(ExtractPlotValue(r, "no_such_metric", node), std::nullopt);
}

TEST(DiagnoseSeries, LinksOfTheDeviceOrTheHost) {
  v1::NodeReport r = Report(kT0);
  v1::Link* nv = AddDevice(r, 2, "")->add_links();
  nv->set_name("nvlink1");
  nv->set_up(true);
  v1::Link* eth = r.mutable_host()->add_links();
  eth->set_name("nvlink1");  // same name on the host: must not be confused with the device's
  eth->set_up(false);
  EXPECT_EQ(ExtractPlotValue(r, "link_up",
                             MakeFinding("r", "w", "sim-0", "2", "nvlink1", kT0, {}, "", "")),
            1.0);
  EXPECT_EQ(ExtractPlotValue(r, "link_up",
                             MakeFinding("r", "w", "sim-0", "", "nvlink1", kT0, {}, "", "")),
            0.0);
  EXPECT_EQ(ExtractPlotValue(r, "link_up",
                             MakeFinding("r", "w", "sim-0", "2", "nvlink9", kT0, {}, "", "")),
            std::nullopt);
}

TEST(DiagnoseSeries, CollectorWindowsRatesResetsAndOtherNodes) {
  // Reports every 60 s over 40 minutes; a finding from 15m to 20m: the window is 5m..30m.
  std::vector<v1::Finding> findings = {
      MakeFinding("link_degraded", "warning", "sim-0", "0", "nvlink0", kT0 + 15 * 60 * kSecond,
                  kT0 + 20 * 60 * kSecond, "", "link_bytes_per_second"),
      MakeFinding("thermal_throttling", "warning", "sim-0", "0", "", kT0 + 15 * 60 * kSecond,
                  std::nullopt, "", "core_celsius")};
  SeriesCollector collector(findings);
  uint64_t counter = 0;
  for (int minute = 0; minute <= 40; ++minute) {
    v1::NodeReport r = Report(kT0 + minute * 60 * kSecond);
    v1::DeviceTelemetry* d = AddDevice(r, 0, "GPU-a");
    if (minute != 10) d->mutable_thermal()->set_core_celsius(60 + minute);  // 10: absent
    v1::Link* link = d->add_links();
    link->set_name("nvlink0");
    counter = minute == 12 ? 0 : counter + 6000;  // 100 B/s in total; reset at 12
    link->set_transmit_bytes_total(counter / 2);
    link->set_receive_bytes_total(counter / 2);
    collector.Add(r);
    collector.Add(Report(kT0 + minute * 60 * kSecond, "sim-1"));  // another node: ignored
    collector.Add(r);  // not newer: skipped, as the engine does
  }
  const auto& rate = collector.points(0);
  // 5m..30m is 26 reports; the one after the reset (12) has no rate.
  ASSERT_EQ(rate.size(), 25u);
  EXPECT_EQ(rate.front().time_ns, kT0 + 5 * 60 * kSecond);
  EXPECT_DOUBLE_EQ(rate.front().value, 100.0);
  EXPECT_EQ(rate.back().time_ns, kT0 + 30 * 60 * kSecond);
  for (const SeriesPoint& p : rate) EXPECT_NE(p.time_ns, kT0 + 12 * 60 * kSecond);

  const auto& celsius = collector.points(1);  // open: 5m to the end, minus the absent one
  ASSERT_EQ(celsius.size(), 35u);
  EXPECT_EQ(celsius.front().value, 65.0);
  EXPECT_EQ(celsius.back().value, 100.0);
  for (const SeriesPoint& p : celsius) EXPECT_NE(p.time_ns, kT0 + 10 * 60 * kSecond);
}

}  // namespace
}  // namespace diagnose_output_test
}  // namespace accelmon::diagnostics
