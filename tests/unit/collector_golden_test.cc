// Per host collector: run it over the shared fixture root, render what it reported exactly as
// /metrics does, and compare with tests/golden/collectors/<name>.prom. To accept an intended
// change: ACCELMON_UPDATE_GOLDEN=1 ./build/tests/unit_tests --gtest_filter='CollectorGolden*'
// and review the diff.
#include <gtest/gtest.h>

#include "collectors/registry.h"
#include "support/golden.h"

namespace accelmon {
namespace collector_golden_test {
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
  const std::string exposition = testing::RenderFamilies(report, "accelmon_host_");
  ASSERT_FALSE(exposition.empty()) << name << " reported nothing over the fixture root";
  EXPECT_TRUE(testing::MatchesGolden(exposition, "collectors/" + name + ".prom"));
}

std::vector<std::string_view> HostCollectorNames() {
  std::vector<std::string_view> names;
  for (const auto& info : collectors::HostCollectors()) names.push_back(info.name);
  return names;
}

INSTANTIATE_TEST_SUITE_P(HostCollectors, CollectorGolden, ::testing::ValuesIn(HostCollectorNames()),
                         [](const auto& param_info) { return std::string(param_info.param); });

}  // namespace
}  // namespace collector_golden_test
}  // namespace accelmon
