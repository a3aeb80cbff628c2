#include "support/golden.h"

#include <prometheus/text_serializer.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "daemon/metrics_renderer.h"

namespace accelmon::testing {

std::string RenderFamilies(std::shared_ptr<const v1::NodeReport> report, std::string_view prefix) {
  std::vector<prometheus::MetricFamily> selected;
  const auto now = Clock::now();
  for (auto& family : RenderNodes({{std::move(report), now}}, now)) {
    if (family.name.starts_with(prefix)) selected.push_back(std::move(family));
  }
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, selected);
  return out.str();
}

::testing::AssertionResult MatchesGolden(const std::string& actual,
                                         const std::string& relative_path) {
  const std::filesystem::path path = std::filesystem::path(ACCELMON_GOLDEN_DIR) / relative_path;
  if (std::getenv("ACCELMON_UPDATE_GOLDEN") != nullptr) {
    std::filesystem::create_directories(path.parent_path());
    std::ofstream(path) << actual;
    return ::testing::AssertionSuccess() << "rewrote " << path;
  }
  std::ifstream in(path);
  if (!in) {
    return ::testing::AssertionFailure()
           << "missing " << path << "; run with ACCELMON_UPDATE_GOLDEN=1";
  }
  std::stringstream expected;
  expected << in.rdbuf();
  if (actual == expected.str()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << path << " differs; rerun with ACCELMON_UPDATE_GOLDEN=1 if the change is intended and "
         << "review the diff.\nactual:\n"
         << actual;
}

}  // namespace accelmon::testing
