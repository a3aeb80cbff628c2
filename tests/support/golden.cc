#include "support/golden.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "daemon/exporter/metrics_renderer.h"
#include "daemon/exporter/text_exposition.h"

namespace accelmon::testing {
namespace {

// Passes on only the families whose names start with a prefix, to the text sink /metrics uses.
class PrefixSink final : public MetricSink {
 public:
  PrefixSink(TextExpositionSink& text, std::string_view prefix) : text_(text), prefix_(prefix) {}
  size_t Family(std::string_view name, std::string_view help, MetricKind kind) override {
    ids_.push_back(name.starts_with(prefix_) ? text_.Family(name, help, kind) : kSkipped);
    return ids_.size() - 1;
  }
  void Sample(size_t family, std::span<const Label> labels, double value) override {
    if (ids_[family] != kSkipped) text_.Sample(ids_[family], labels, value);
  }

 private:
  static constexpr size_t kSkipped = ~size_t{0};
  TextExpositionSink& text_;
  std::string_view prefix_;
  std::vector<size_t> ids_;
};

}  // namespace

std::string RenderFamilies(std::shared_ptr<const v1::NodeReport> report, std::string_view prefix) {
  TextExpositionSink text;
  PrefixSink sink(text, prefix);
  const auto now = Clock::now();
  EmitNodes({{std::move(report), now}}, now, sink);
  std::string out;
  text.AppendTo(out);
  return out;
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
