// The status page over real HTTP on loopback: its JSON shows what /metrics shows for the same
// state (values a report lacks are absent in both), its files are the embedded ones, and basic
// auth guards the page as it guards /metrics. The page in a real browser: e2e/status_page_test.sh.
#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>

#include "daemon/exporter/exporter.h"
#include "daemon/exporter/status_json.h"
#include "support/http_get.h"
#include "support/loopback_exporter.h"
#include "support/prom_text.h"

namespace accelmon {
namespace status_page_test {
namespace {

using google::protobuf::Struct;
using google::protobuf::Value;
using testing::FindValue;
using testing::Gunzip;
using testing::HttpGet;
using testing::LoopbackExporter;
using testing::ParseExposition;

// bcrypt of "s3cret", as in metrics_http_test.cc.
const char* const kHash = "$2b$10$NnsHlhQwajJo/X76XOb1.OV0p7Xe0eWlXNdxMX2HNxKEvAqt.yeAq";

// Node "n1" with two devices: device 0 reports memory, temperature and a link; device 1 only
// its memory (no temperature, no utilization, no power).
std::shared_ptr<v1::NodeReport> TwoDevices() {
  auto report = std::make_shared<v1::NodeReport>();
  report->set_node("n1");
  report->set_agent_instance_id("instance");
  report->set_sequence(1);
  report->mutable_timestamp()->set_seconds(1'700'000'000);
  report->mutable_interval()->set_seconds(1);
  v1::DeviceTelemetry* d0 = report->add_devices();
  d0->mutable_identity()->set_index(0);
  d0->mutable_identity()->set_model("H200");
  d0->mutable_memory()->set_total_bytes(1000);
  d0->mutable_memory()->set_used_bytes(250);
  d0->mutable_thermal()->set_core_celsius(61.5);
  (*d0->mutable_thermal()->mutable_throttle_reasons())["sw_power_cap"] = true;
  (*d0->mutable_thermal()->mutable_throttle_reasons())["hw_slowdown"] = false;
  d0->mutable_utilization()->set_compute_ratio(0.5);
  v1::Link* link = d0->add_links();
  link->set_name("nvlink0");
  link->set_up(true);
  link->set_transmit_bytes_total(123);
  v1::DeviceHolder* holder = d0->add_holders();
  holder->set_job("4711");
  holder->set_kind(v1::HOLDER_KIND_SLURM);
  v1::DeviceTelemetry* d1 = report->add_devices();
  d1->mutable_identity()->set_index(1);
  d1->mutable_memory()->set_total_bytes(1000);
  d1->mutable_memory()->set_used_bytes(100);
  return report;
}

Struct ParseJson(const std::string& text) {
  Struct s;
  const auto status = google::protobuf::util::JsonStringToMessage(text, &s);
  EXPECT_TRUE(status.ok()) << status.ToString() << "\n" << text;
  return s;
}

const Value& Field(const Struct& s, const std::string& key) {
  static const Value kMissing;
  const auto it = s.fields().find(key);
  return it == s.fields().end() ? kMissing : it->second;
}
bool Has(const Struct& s, const std::string& key) { return s.fields().contains(key); }

TEST(StatusPage, JsonShowsWhatMetricsShowsAndLeavesOutWhatTheReportLacks) {
  LoopbackExporter exporter;
  ASSERT_EQ(exporter.store().Apply(TwoDevices(), Clock::now()).outcome, ApplyOutcome::kApplied);
  const int port = exporter.web_port();

  const auto status = HttpGet("127.0.0.1", port, "/api/v1/status?node=n1");
  ASSERT_EQ(status.status, 200);
  EXPECT_NE(status.headers.find("Content-Type: application/json"), std::string::npos);
  const auto samples = ParseExposition(HttpGet("127.0.0.1", port, "/metrics").body);
  const Struct json = ParseJson(status.body);

  const Struct& summary = Field(json, "summary").struct_value();
  EXPECT_EQ(Field(summary, "nodes").number_value(), 1);
  EXPECT_EQ(Field(summary, "nodes_live").number_value(), 1);
  EXPECT_EQ(Field(summary, "devices").number_value(), 2);

  ASSERT_EQ(Field(json, "nodes").list_value().values_size(), 1);
  const Struct& row = Field(json, "nodes").list_value().values(0).struct_value();
  EXPECT_EQ(Field(row, "node").string_value(), "n1");
  EXPECT_TRUE(Field(row, "up").bool_value());
  EXPECT_EQ(Field(row, "memory_used_bytes").number_value(), 350);
  EXPECT_EQ(Field(row, "utilization_ratio").number_value(), 0.5);  // the one device reporting it
  EXPECT_EQ(Field(row, "temperature_max_celsius").number_value(), 61.5);
  EXPECT_FALSE(Has(row, "power_watts")) << "no device reports power: absent, not 0";
  ASSERT_EQ(Field(row, "jobs").list_value().values_size(), 1);
  EXPECT_EQ(Field(row, "jobs").list_value().values(0).string_value(), "4711");

  const auto& devices = Field(Field(json, "node").struct_value(), "devices").list_value();
  ASSERT_EQ(devices.values_size(), 2);
  const Struct& d0 = devices.values(0).struct_value();
  const Struct& d1 = devices.values(1).struct_value();
  for (const auto& [index, device] : {std::pair{"0", &d0}, std::pair{"1", &d1}}) {
    EXPECT_EQ(Field(*device, "memory_used_bytes").number_value(),
              FindValue(samples, "accelmon_device_memory_used_bytes", {{"device", index}}))
        << "device " << index;
  }
  EXPECT_EQ(Field(d0, "temperature_celsius").number_value(), 61.5);
  ASSERT_EQ(Field(d0, "throttling").list_value().values_size(), 1);
  EXPECT_EQ(Field(d0, "throttling").list_value().values(0).string_value(), "sw_power_cap");
  const Struct& link = Field(d0, "links").list_value().values(0).struct_value();
  EXPECT_EQ(Field(link, "transmit_bytes_total").number_value(), 123);
  EXPECT_FALSE(Has(link, "receive_bytes_total"));
  for (const char* absent : {"temperature_celsius", "utilization_ratio", "power_watts",
                             "memory_fragmentation_ratio", "up"}) {
    EXPECT_FALSE(Has(d1, absent)) << absent << " is not reported by device 1";
  }
  EXPECT_FALSE(FindValue(samples, "accelmon_device_temperature_celsius", {{"device", "1"}}));

  // Without ?node= (or for a node the exporter does not have) no devices are sent.
  EXPECT_FALSE(Has(ParseJson(HttpGet("127.0.0.1", port, "/api/v1/status").body), "node"));
  const Struct unknown = ParseJson(HttpGet("127.0.0.1", port, "/api/v1/status?node=nope").body);
  EXPECT_EQ(Field(unknown, "node").kind_case(), Value::kNullValue);
}

TEST(StatusPage, ServesItsEmbeddedFilesAndGzipsTheJsonWhenAsked) {
  LoopbackExporter exporter;
  ASSERT_EQ(exporter.store().Apply(TwoDevices(), Clock::now()).outcome, ApplyOutcome::kApplied);
  const int port = exporter.web_port();

  const auto page = HttpGet("127.0.0.1", port, "/");
  ASSERT_EQ(page.status, 200);
  EXPECT_NE(page.headers.find("Content-Type: text/html"), std::string::npos);
  EXPECT_NE(page.body.find("<script src=\"status.js\">"), std::string::npos);
  EXPECT_NE(page.body.find("<link rel=\"stylesheet\" href=\"status.css\">"), std::string::npos);
  EXPECT_EQ(HttpGet("127.0.0.1", port, "/index.html").body, page.body);
  const auto script = HttpGet("127.0.0.1", port, "/status.js");
  EXPECT_EQ(script.status, 200);
  EXPECT_NE(script.headers.find("Content-Type: text/javascript"), std::string::npos);
  EXPECT_NE(script.body.find("api/v1/status"), std::string::npos);
  EXPECT_EQ(HttpGet("127.0.0.1", port, "/status.css").status, 200);
  EXPECT_EQ(HttpGet("127.0.0.1", port, "/status.missing").status, 404);

  const auto plain = HttpGet("127.0.0.1", port, "/api/v1/status");
  const auto gzipped = HttpGet("127.0.0.1", port, "/api/v1/status", {"Accept-Encoding: gzip"});
  ASSERT_EQ(gzipped.status, 200);
  EXPECT_NE(gzipped.headers.find("Content-Encoding: gzip"), std::string::npos);
  const Struct a = ParseJson(plain.body), b = ParseJson(Gunzip(gzipped.body));
  EXPECT_EQ(Field(a, "summary").DebugString(), Field(b, "summary").DebugString());
  const Struct& row = Field(b, "nodes").list_value().values(0).struct_value();
  EXPECT_EQ(Field(row, "memory_used_bytes").number_value(), 350);
}

TEST(StatusPage, BasicAuthGuardsThePageAsItGuardsMetrics) {
  WebConfig web;
  web.basic_auth_users["prom"] = kHash;
  LoopbackExporter exporter({.web_config = web});
  const int port = exporter.web_port();
  for (const char* path : {"/", "/index.html", "/status.js", "/status.css", "/api/v1/status"}) {
    const auto refused = HttpGet("127.0.0.1", port, path);
    EXPECT_EQ(refused.status, 401) << path;
    EXPECT_NE(refused.headers.find("WWW-Authenticate: Basic"), std::string::npos) << path;
    EXPECT_EQ(HttpGet("127.0.0.1", port, path, {"Authorization: Basic cHJvbTp3cm9uZw=="}).status,
              401)
        << path;  // prom:wrong
    EXPECT_EQ(HttpGet("127.0.0.1", port, path, {"Authorization: Basic cHJvbTpzM2NyZXQ="}).status,
              200)
        << path;  // prom:s3cret
  }
  EXPECT_EQ(HttpGet("127.0.0.1", port, "/healthz").status, 200);  // probes need no password
}

TEST(StatusPage, RunbookLinksPointAtTheRulesAlertSection) {
  EXPECT_EQ(RunbookUrl("link_down"),
            "https://github.com/accelmon/accelmon/blob/main/docs/runbooks.md#accelmonlinkdown");
  EXPECT_TRUE(RunbookUrl("job_idle_with_memory_held").ends_with("#accelmonjobidlewithmemoryheld"));
}

}  // namespace
}  // namespace status_page_test
}  // namespace accelmon
