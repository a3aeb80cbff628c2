// /metrics from a real exporter over real HTTP on loopback: gzip when asked (the same exposition
// once inflated), basic auth from the web config.
#include <gtest/gtest.h>
#include <zstd.h>

#include <sstream>

#include "collectors/sim.h"
#include "daemon/exporter/exporter.h"
#include "support/http_get.h"
#include "support/loopback_exporter.h"
#include "support/prom_text.h"

namespace accelmon {
namespace metrics_http_test {
namespace {

using testing::CountSamples;
using testing::Gunzip;
using testing::HttpGet;
using testing::LoopbackExporter;
using testing::ParseExposition;

// bcrypt of "s3cret" (htpasswd -nbBC 10 prom s3cret), as in tests/e2e/web_config_test.sh.
const char* const kHash = "$2b$10$NnsHlhQwajJo/X76XOb1.OV0p7Xe0eWlXNdxMX2HNxKEvAqt.yeAq";

// Three simulated nodes of 8 devices with links, applied straight to the store.
void AddSimulatedNodes(Exporter& exporter) {
  for (int i = 0; i < 3; ++i) {
    const std::string node = "sim-" + std::to_string(i);
    auto report = std::make_shared<v1::NodeReport>();
    report->set_node(node);
    report->set_agent_instance_id("instance-" + node);
    report->set_sequence(1);
    report->mutable_timestamp()->set_seconds(1'700'000'000);
    collectors::SimCollector sim({.devices = 8, .seed = collectors::SimSeedForNode(node)});
    sim.Collect(*report);
    ASSERT_EQ(exporter.store().Apply(report, Clock::now()).outcome, ApplyOutcome::kApplied);
  }
}

// The exposition without the one line that changes from scrape to scrape.
std::string WithoutScrapeDuration(const std::string& text) {
  std::istringstream in(text);
  std::string out, line;
  while (std::getline(in, line)) {
    if (!line.starts_with("accelmon_exporter_scrape_duration_seconds ")) out += line + "\n";
  }
  return out;
}

TEST(MetricsHttp, GzipWhenAskedIsTheSameExposition) {
  LoopbackExporter exporter;
  AddSimulatedNodes(exporter);

  const auto plain = HttpGet("127.0.0.1", exporter.web_port(), "/metrics");
  ASSERT_EQ(plain.status, 200);
  EXPECT_NE(plain.headers.find("Content-Type: text/plain; version=0.0.4"), std::string::npos);
  EXPECT_EQ(plain.headers.find("Content-Encoding"), std::string::npos);
  const auto samples = ParseExposition(plain.body);
  EXPECT_EQ(CountSamples(samples, "accelmon_node_up"), 3u);
  EXPECT_EQ(CountSamples(samples, "accelmon_device_info"), 24u);
  EXPECT_GT(CountSamples(samples, "accelmon_device_link_transmit_bytes_total"), 0u);
  EXPECT_EQ(CountSamples(samples, "accelmon_exporter_nodes"), 1u);

  const auto gzipped =
      HttpGet("127.0.0.1", exporter.web_port(), "/metrics", {"Accept-Encoding: gzip, deflate"});
  ASSERT_EQ(gzipped.status, 200);
  EXPECT_NE(gzipped.headers.find("Content-Encoding: gzip"), std::string::npos);
  EXPECT_LT(gzipped.body.size() * 4, plain.body.size());
  const std::string inflated = Gunzip(gzipped.body);
  EXPECT_EQ(ParseExposition(inflated).size(), samples.size());
  EXPECT_EQ(WithoutScrapeDuration(inflated), WithoutScrapeDuration(plain.body));

  // Other paths are not found.
  EXPECT_EQ(HttpGet("127.0.0.1", exporter.web_port(), "/nothing").status, 404);
}

std::string Unzstd(const std::string& in) {
  const unsigned long long size = ZSTD_getFrameContentSize(in.data(), in.size());
  EXPECT_NE(size, ZSTD_CONTENTSIZE_ERROR);
  EXPECT_NE(size, ZSTD_CONTENTSIZE_UNKNOWN);
  std::string out(size, '\0');
  const size_t n = ZSTD_decompress(out.data(), out.size(), in.data(), in.size());
  EXPECT_FALSE(ZSTD_isError(n)) << ZSTD_getErrorName(n);
  out.resize(n);
  return out;
}

TEST(MetricsHttp, ZstdWhenAskedIsTheSameExpositionAndWinsOverGzip) {
  LoopbackExporter exporter;
  AddSimulatedNodes(exporter);
  const int port = exporter.web_port();
  const auto plain = HttpGet("127.0.0.1", port, "/metrics");
  ASSERT_EQ(plain.status, 200);

  // curl --compressed sends every coding it reads; zstd is the smaller and faster one.
  const auto zstd =
      HttpGet("127.0.0.1", port, "/metrics", {"Accept-Encoding: deflate, gzip, zstd"});
  ASSERT_EQ(zstd.status, 200);
  EXPECT_NE(zstd.headers.find("Content-Encoding: zstd"), std::string::npos);
  EXPECT_LT(zstd.body.size() * 4, plain.body.size());
  EXPECT_EQ(WithoutScrapeDuration(Unzstd(zstd.body)), WithoutScrapeDuration(plain.body));

  // A coding refused with q=0 is not used.
  const auto gzip = HttpGet("127.0.0.1", port, "/metrics", {"Accept-Encoding: zstd;q=0, gzip"});
  EXPECT_NE(gzip.headers.find("Content-Encoding: gzip"), std::string::npos);
  EXPECT_EQ(WithoutScrapeDuration(Gunzip(gzip.body)), WithoutScrapeDuration(plain.body));
  const auto none = HttpGet("127.0.0.1", port, "/metrics", {"Accept-Encoding: br"});
  EXPECT_EQ(none.headers.find("Content-Encoding"), std::string::npos);
  EXPECT_EQ(ParseExposition(none.body).size(), ParseExposition(plain.body).size());
}

TEST(MetricsHttp, BasicAuthRefusesWithoutCredentials) {
  WebConfig web;
  web.basic_auth_users["prom"] = kHash;
  LoopbackExporter exporter({.web_config = web});
  const int port = exporter.web_port();

  const auto refused = HttpGet("127.0.0.1", port, "/metrics");
  EXPECT_EQ(refused.status, 401);
  EXPECT_NE(refused.headers.find("WWW-Authenticate: Basic"), std::string::npos);
  EXPECT_EQ(refused.body, "");
  // "prom:wrong", "nobody:s3cret", "prom:s3cret".
  EXPECT_EQ(
      HttpGet("127.0.0.1", port, "/metrics", {"Authorization: Basic cHJvbTp3cm9uZw=="}).status,
      401);
  EXPECT_EQ(
      HttpGet("127.0.0.1", port, "/metrics", {"Authorization: Basic bm9ib2R5OnMzY3JldA=="}).status,
      401);
  EXPECT_EQ(HttpGet("127.0.0.1", port, "/metrics", {"Authorization: Basic !!!"}).status, 401);
  // "prom:s3cret\0junk" and "prom:s3cret\0": the right password up to a NUL is not the password.
  EXPECT_EQ(
      HttpGet("127.0.0.1", port, "/metrics", {"Authorization: Basic cHJvbTpzM2NyZXQAanVuaw=="})
          .status,
      401);
  EXPECT_EQ(
      HttpGet("127.0.0.1", port, "/metrics", {"Authorization: Basic cHJvbTpzM2NyZXQA"}).status,
      401);
  const auto ok = HttpGet("127.0.0.1", port, "/metrics",
                          {"Authorization: Basic cHJvbTpzM2NyZXQ=", "Accept-Encoding: gzip"});
  EXPECT_EQ(ok.status, 200);
  EXPECT_EQ(CountSamples(ParseExposition(Gunzip(ok.body)), "accelmon_build_info"), 1u);
  EXPECT_EQ(HttpGet("127.0.0.1", port, "/healthz").status, 200);
}

}  // namespace
}  // namespace metrics_http_test
}  // namespace accelmon
