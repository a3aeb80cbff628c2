// Per host collector: run it over the shared fixture root, render what it reported exactly as
// /metrics does, and compare with tests/golden/collectors/<name>.prom. To accept an intended
// change: ACCELMON_UPDATE_GOLDEN=1 ./build/tests/unit_tests --gtest_filter='CollectorGolden*'
// and review the diff.
#include <gtest/gtest.h>
#include <prometheus/text_serializer.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "collectors/registry.h"
#include "daemon/metrics_renderer.h"

namespace accelmon {
namespace {

const std::string kRoot = std::string(ACCELMON_FIXTURES_DIR) + "/host";

class CollectorGolden : public ::testing::TestWithParam<std::string_view> {};

TEST_P(CollectorGolden, MatchesGoldenExposition) {
  const std::string name(GetParam());
  std::vector<std::unique_ptr<collectors::Collector>> list;
  list.push_back(collectors::CreateHostCollector(
      name, collectors::PathResolver(kRoot + "/proc", kRoot + "/sys")));
  collectors::CollectorSet set(std::move(list));
  auto report = std::make_shared<v1::NodeReport>();
  report->set_node("fixture");
  report->mutable_timestamp()->set_seconds(1'700'000'000);
  set.CollectAll(*report);
  ASSERT_TRUE(report->collectors(0).success()) << report->collectors(0).error();

  // Only the host series: node_up and collector durations are not the collector's output.
  std::vector<prometheus::MetricFamily> host;
  const auto now = Clock::now();
  for (auto& family : RenderNodes({{report, now}}, now)) {
    if (family.name.starts_with("accelmon_host_")) host.push_back(std::move(family));
  }
  ASSERT_FALSE(host.empty()) << name << " reported nothing over the fixture root";
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, host);

  const std::string path = std::string(ACCELMON_GOLDEN_DIR) + "/collectors/" + name + ".prom";
  if (std::getenv("ACCELMON_UPDATE_GOLDEN") != nullptr) {
    std::ofstream(path) << out.str();
    GTEST_SKIP() << "rewrote " << path;
  }
  std::ifstream in(path);
  ASSERT_TRUE(in) << "missing " << path << "; run with ACCELMON_UPDATE_GOLDEN=1";
  std::stringstream expected;
  expected << in.rdbuf();
  EXPECT_EQ(out.str(), expected.str()) << "rerun with ACCELMON_UPDATE_GOLDEN=1 if intended";
}

INSTANTIATE_TEST_SUITE_P(HostCollectors, CollectorGolden,
                         ::testing::ValuesIn(collectors::kHostCollectors),
                         [](const auto& param_info) { return std::string(param_info.param); });

}  // namespace
}  // namespace accelmon
