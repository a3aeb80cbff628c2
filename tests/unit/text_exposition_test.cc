#include "daemon/exporter/text_exposition.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>

namespace accelmon {
namespace text_exposition_test {
namespace {

std::string Value(double v) {
  std::string out;
  AppendSampleValue(out, v);
  return out;
}

TEST(TextExposition, SpecialValuesAsPrometheusSpellsThem) {
  EXPECT_EQ(Value(std::numeric_limits<double>::quiet_NaN()), "NaN");
  EXPECT_EQ(Value(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(Value(-std::numeric_limits<double>::infinity()), "-Inf");
}

TEST(TextExposition, IntegersWithoutFractionOrExponent) {
  EXPECT_EQ(Value(0), "0");
  EXPECT_EQ(Value(1e12), "1000000000000");
  EXPECT_EQ(Value(-42), "-42");
  EXPECT_EQ(Value(9007199254740991.0), "9007199254740991");  // 2^53 - 1
}

TEST(TextExposition, ShortestTextThatRoundTrips) {
  EXPECT_EQ(Value(0.93), "0.93");
  EXPECT_EQ(Value(1700000000.5), "1700000000.5");
  // prometheus-cpp wrote 16 digits, "0.3": a different double.
  EXPECT_EQ(Value(0.1 + 0.2), "0.30000000000000004");
  for (const double v : {0.1, 0.1 + 0.2, 1.0 / 3, 2.5e-7, 5e-324, 1.7976931348623157e308, 1e16,
                         -123456.789, 0.7122302158273381, 9007199254740993.0}) {
    const std::string text = Value(v);
    EXPECT_EQ(std::strtod(text.c_str(), nullptr), v) << text;
  }
}

TEST(TextExposition, LabelValuesEscaped) {
  std::string out;
  AppendLabelValue(out, "a\\b\"c\nd");
  EXPECT_EQ(out, R"(a\\b\"c\nd)");
  out.clear();
  AppendHelp(out, "quote \" stays, \\ and\nnewline do not");
  EXPECT_EQ(out, R"(quote " stays, \\ and\nnewline do not)");
}

TEST(TextExposition, FamiliesGroupedWithHelpAndTypeOnce) {
  TextExpositionSink sink;
  std::string first;
  for (int scrape = 0; scrape < 2; ++scrape) {  // the second reuses the buffers of the first
    sink.Clear();
    const size_t up = sink.Family("x_up", "Up.", MetricKind::kGauge);
    const size_t empty = sink.Family("x_empty", "Never sampled.", MetricKind::kGauge);
    const size_t bytes = sink.Family("x_bytes_total", "Bytes.", MetricKind::kCounter);
    const Label a[] = {{"node", "a"}};
    const Label b[] = {{"node", "b"}, {"dev", "0"}};
    sink.Sample(up, a, 1);
    sink.Sample(bytes, a, 10);
    sink.Sample(up, b, 0);
    sink.Sample(bytes, {}, 2.5);
    (void)empty;
    std::string out = "# previous\n";
    sink.AppendTo(out);
    EXPECT_EQ(out,
              "# previous\n"
              "# HELP x_up Up.\n"
              "# TYPE x_up gauge\n"
              "x_up{node=\"a\"} 1\n"
              "x_up{node=\"b\",dev=\"0\"} 0\n"
              "# HELP x_bytes_total Bytes.\n"
              "# TYPE x_bytes_total counter\n"
              "x_bytes_total{node=\"a\"} 10\n"
              "x_bytes_total 2.5\n");
  }
}

TEST(TextExposition, LabelsSharedWithThePreviousSampleAreComparedByContentNotAddress) {
  TextExpositionSink sink;
  const size_t used = sink.Family("x_used", "Used.", MetricKind::kGauge);
  const size_t link = sink.Family("x_link", "Link.", MetricKind::kGauge);
  // The device label lives in one reused buffer, as a renderer formatting an index would keep
  // it: the same address, the same size, another value.
  char device[2] = "0";
  const std::string_view index(device, 1);
  const Label first[] = {{"node", "n\"1"}, {"device", index}};
  sink.Sample(used, first, 1);
  const Label with_link[] = {{"node", "n\"1"}, {"device", index}, {"link", "nv\n0"}};
  sink.Sample(link, with_link, 2);
  device[0] = '1';
  sink.Sample(used, first, 3);
  const Label fewer[] = {{"node", "n\"1"}};
  sink.Sample(used, fewer, 4);
  sink.Sample(link, {}, 5);
  sink.Sample(link, with_link, 6);
  std::vector<std::string_view> pieces;
  sink.Pieces(pieces);
  std::string out;
  for (const auto piece : pieces) out += piece;
  EXPECT_EQ(out,
            "# HELP x_used Used.\n"
            "# TYPE x_used gauge\n"
            "x_used{node=\"n\\\"1\",device=\"0\"} 1\n"
            "x_used{node=\"n\\\"1\",device=\"1\"} 3\n"
            "x_used{node=\"n\\\"1\"} 4\n"
            "# HELP x_link Link.\n"
            "# TYPE x_link gauge\n"
            "x_link{node=\"n\\\"1\",device=\"0\",link=\"nv\\n0\"} 2\n"
            "x_link 5\n"
            "x_link{node=\"n\\\"1\",device=\"1\",link=\"nv\\n0\"} 6\n");
  std::string appended;
  sink.AppendTo(appended);
  EXPECT_EQ(appended, out);
}

}  // namespace
}  // namespace text_exposition_test
}  // namespace accelmon
