// `diagnose --score`: the expectations file (a scenario's expect:) and the scoring of findings
// against it (diagnostics/score.h).
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

#include "collectors/sim_scenario.h"
#include "diagnostics/score.h"
#include "proto/time_format.h"

namespace accelmon::diagnostics {
namespace diagnostics_score_test {
namespace {

constexpr int64_t kFirstNs = 1'764'633'600LL * 1'000'000'000;  // 2025-12-02T00:00:00Z

std::string ErrorOf(const std::string& yaml) {
  try {
    ParseExpectations(yaml, "test.yaml");
  } catch (const ScoreError& e) {
    return e.what();
  }
  return "(no error)";
}

v1::Finding MakeFinding(const std::string& rule, const std::string& node, const std::string& device,
                        const std::string& link, double start_s, double detected_s) {
  v1::Finding f;
  f.set_rule(rule);
  f.set_severity("warning");
  f.set_node(node);
  f.set_device(device);
  f.set_link(link);
  *f.mutable_start() = TimestampFromNanos(kFirstNs + static_cast<int64_t>(start_s * 1e9));
  *f.mutable_detected_at() = TimestampFromNanos(kFirstNs + static_cast<int64_t>(detected_s * 1e9));
  return f;
}

TEST(ExpectationsParse, ReadsAScenarioFilesExpectations) {
  const Expectations e = ParseExpectations(
      "# a scenario\n"
      "jobs:\n"
      "  - id: \"4711\"\n"
      "faults:\n"
      "  - at: 35m\n"
      "    fault: link_flap\n"
      "expect:\n"
      "  - {rule: link_flapping, node: sim-0, device: 0, link: nvlink0, onset: 35m,\n"
      "     allow: [link_down]}\n"
      "  - rule: job_stall\n"
      "    node: sim-2\n"
      "    onset: 2130s\n"
      "    optional: true\n"
      "allow: [throughput_drop]\n",
      "test.yaml");
  ASSERT_EQ(e.expect.size(), 2u);
  EXPECT_EQ(e.path, "test.yaml");
  EXPECT_EQ(e.expect[0].line, 8);
  EXPECT_EQ(e.expect[0].rule, "link_flapping");
  EXPECT_EQ(e.expect[0].node, "sim-0");
  EXPECT_EQ(e.expect[0].device, "0");
  EXPECT_EQ(e.expect[0].link, "nvlink0");
  EXPECT_DOUBLE_EQ(e.expect[0].onset_s, 35 * 60);
  EXPECT_FALSE(e.expect[0].optional);
  EXPECT_EQ(e.expect[0].allow, (std::vector<std::string>{"link_down"}));
  EXPECT_EQ(e.expect[1].line, 10);
  EXPECT_EQ(e.expect[1].device, "");
  EXPECT_EQ(e.expect[1].link, "");
  EXPECT_DOUBLE_EQ(e.expect[1].onset_s, 2130);
  EXPECT_TRUE(e.expect[1].optional);
  EXPECT_EQ(e.allow, (std::vector<std::string>{"throughput_drop"}));
}

TEST(ExpectationsParse, EmptyListExpectsNothing) {
  EXPECT_TRUE(ParseExpectations("expect: []\n", "test.yaml").expect.empty());
  EXPECT_TRUE(ParseExpectations("faults: []\nexpect:\n", "test.yaml").expect.empty());
}

TEST(ExpectationsParse, ErrorsNameFileAndLine) {
  EXPECT_EQ(ErrorOf("faults: []\n"),
            "test.yaml:1: no expect: list (expect: [] when nothing should open)");
  EXPECT_EQ(ErrorOf("expect:\n  - {rule: link_dwn, node: sim-0, onset: 1m}\n")
                .rfind("test.yaml:2: rule: unknown rule \"link_dwn\" (one of ", 0),
            0u);
  EXPECT_EQ(ErrorOf("expect:\n  - rule: link_down\n    node: sim-0\n    onset: soon\n"),
            "test.yaml:4: onset: \"soon\" is not a duration (examples: 30s, 35m, 2130s)");
  EXPECT_EQ(ErrorOf("expect:\n  - rule: link_down\n    node: sim-0\n"),
            "test.yaml:2: onset is missing (e.g. onset: 35m)");
  EXPECT_EQ(ErrorOf("expect:\n  - {rule: xid_error, node: sim-0, onset: 1m, devcie: 0}\n"),
            "test.yaml:2: unknown key \"devcie\" for an expectation (rule, node, device, link, "
            "onset, optional, allow)");
  EXPECT_EQ(ErrorOf("expect: []\nexpected: []\n"),
            "test.yaml:2: unknown key \"expected\" (expect:, allow:, faults: or jobs:)");
  EXPECT_EQ(ErrorOf("expect:\n  - {rule: xid_error, node: sim-0, onset: 1m, device: all}\n"),
            "test.yaml:2: device: \"all\" is not a device index (0, 1, ...)");
  EXPECT_EQ(ErrorOf("expect: {rule: xid_error}\n"),
            "test.yaml:1: expect must be a list ([] when nothing should open)");
  EXPECT_EQ(ErrorOf("expect: [\n").rfind("test.yaml:", 0), 0u);
}

TEST(ExpectationsParse, MissingFileIsAnError) {
  try {
    LoadExpectations("/nonexistent/expect.yaml");
    FAIL() << "no error";
  } catch (const ScoreError& e) {
    EXPECT_STREQ(e.what(), "/nonexistent/expect.yaml:1: cannot be read");
  }
}

// The sim skips what the scorer reads, and the scorer what the sim reads.
TEST(ExpectationsParse, TheSimAcceptsAScenarioWithExpectations) {
  const std::string yaml =
      "faults:\n  - at: 35m\n    fault: xid\n    device: 0\n"
      "expect:\n  - {rule: xid_error, node: sim-0, device: 0, onset: 35m}\nallow: [job_stall]\n";
  EXPECT_EQ(collectors::ParseScenario(yaml, "test.yaml").faults.size(), 1u);
  EXPECT_EQ(ParseExpectations(yaml, "test.yaml").expect.size(), 1u);
}

// Every shipped scenario has expectations the scorer reads.
TEST(ExpectationsParse, EveryShippedScenarioHasExpectations) {
  int files = 0;
  for (const auto& entry :
       std::filesystem::directory_iterator(std::string(ACCELMON_FIXTURES_DIR) + "/scenarios")) {
    if (entry.path().extension() != ".yaml") continue;
    ++files;
    EXPECT_NO_THROW(LoadExpectations(entry.path().string())) << entry.path();
    EXPECT_NO_THROW(collectors::LoadScenario(entry.path().string())) << entry.path();
  }
  EXPECT_GT(files, 10);
}

Expectations TwoExpected() {
  return ParseExpectations(
      "expect:\n"
      "  - {rule: link_flapping, node: sim-0, device: 0, link: nvlink0, onset: 35m,"
      " allow: [link_down]}\n"
      "  - {rule: xid_error, node: sim-0, device: 3, onset: 10m}\n",
      "expect.yaml");
}

const RuleScore& RuleOf(const Score& s, const std::string& rule) {
  for (const RuleScore& r : s.rules) {
    if (r.rule == rule) return r;
  }
  static const RuleScore kNone;
  ADD_FAILURE() << "no row for " << rule;
  return kNone;
}

TEST(Score, MatchesTheEarliestFindingOnTheSameSubject) {
  const Expectations e = TwoExpected();
  const std::vector<v1::Finding> findings = {
      // Later than the first one on the same subject: not the match, a false finding.
      MakeFinding("link_flapping", "sim-0", "0", "nvlink0", 50 * 60, 51 * 60),
      MakeFinding("link_flapping", "sim-0", "0", "nvlink0", 35 * 60 + 30, 36 * 60),
      // Same rule, another link: no match.
      MakeFinding("link_flapping", "sim-0", "0", "nvlink1", 35 * 60, 36 * 60),
  };
  const Score s = ComputeScore(e, findings, kFirstNs);
  ASSERT_EQ(s.expectations.size(), 2u);
  ASSERT_TRUE(s.expectations[0].finding);
  EXPECT_EQ(ToNanos(s.expectations[0].finding->start()),
            kFirstNs + (35 * 60 + 30) * 1'000'000'000LL);
  EXPECT_DOUBLE_EQ(*s.expectations[0].onset_error_s, 30);
  EXPECT_DOUBLE_EQ(*s.expectations[0].detection_delay, 60);
  const RuleScore& flap = RuleOf(s, "link_flapping");
  EXPECT_EQ(flap.expected, 1);
  EXPECT_EQ(flap.found, 1);
  EXPECT_EQ(flap.missed, 0);
  EXPECT_EQ(flap.false_findings, 2);
  EXPECT_EQ(s.false_findings.size(), 2u);
}

TEST(Score, UnmatchedExpectationIsMissed) {
  const Score s = ComputeScore(TwoExpected(), {}, kFirstNs);
  EXPECT_FALSE(s.expectations[1].finding);
  EXPECT_FALSE(s.expectations[1].onset_error_s);
  const RuleScore& xid = RuleOf(s, "xid_error");
  EXPECT_EQ(xid.expected, 1);
  EXPECT_EQ(xid.found, 0);
  EXPECT_EQ(xid.missed, 1);
  EXPECT_TRUE(xid.onset_errors_s.empty());
  EXPECT_EQ(s.total.expected, 2);
  EXPECT_EQ(s.total.missed, 2);
  std::ostringstream text;
  WriteScoreText(text, s, "rec");
  EXPECT_NE(text.str().find("missed: xid_error on sim-0 device 3, onset 10m00s (expect.yaml:3)"),
            std::string::npos)
      << text.str();
}

TEST(Score, AllowedCompanionIsNeitherFalseNorFound) {
  const std::vector<v1::Finding> findings = {
      MakeFinding("link_down", "sim-0", "0", "nvlink0", 35 * 60, 35 * 60),
      MakeFinding("job_stall", "sim-0", "", "", 36 * 60, 38 * 60),
  };
  const Score s = ComputeScore(TwoExpected(), findings, kFirstNs);
  EXPECT_EQ(RuleOf(s, "link_down").allowed, 1);
  EXPECT_EQ(RuleOf(s, "link_down").false_findings, 0);
  EXPECT_EQ(RuleOf(s, "link_down").expected, 0);
  EXPECT_EQ(RuleOf(s, "job_stall").false_findings, 1) << "not allowed";
  EXPECT_EQ(s.total.false_findings, 1);
  EXPECT_EQ(s.total.allowed, 1);
  ASSERT_EQ(s.false_findings.size(), 1u);
  EXPECT_EQ(s.false_findings[0].rule(), "job_stall");
}

TEST(Score, NearMissCountsEveryFindingAsFalse) {
  const Expectations none = ParseExpectations("expect: []\n", "near_miss.yaml");
  const Score s =
      ComputeScore(none, std::vector{MakeFinding("job_stall", "sim-0", "", "", 60, 180)}, kFirstNs);
  EXPECT_EQ(s.total.expected, 0);
  EXPECT_EQ(s.total.false_findings, 1);
  EXPECT_EQ(RuleOf(s, "job_stall").false_findings, 1);
}

TEST(Score, OnsetErrorIsNegativeWhenTheStartIsEarly) {
  const std::vector<v1::Finding> findings = {
      MakeFinding("xid_error", "sim-0", "3", "", 10 * 60 - 20, 10 * 60),
  };
  const Score s = ComputeScore(TwoExpected(), findings, kFirstNs);
  ASSERT_TRUE(s.expectations[1].onset_error_s);
  EXPECT_DOUBLE_EQ(*s.expectations[1].onset_error_s, -20);
  EXPECT_DOUBLE_EQ(*s.expectations[1].detection_delay, 0);
  EXPECT_DOUBLE_EQ(*WorstSigned(RuleOf(s, "xid_error").onset_errors_s), -20);
}

TEST(Score, OptionalExpectationCountsOnlyWhenFound) {
  const Expectations e = ParseExpectations(
      "expect:\n  - {rule: throughput_drop, node: sim-0, device: 0, onset: 1m, optional: true}\n",
      "e.yaml");
  EXPECT_EQ(ComputeScore(e, {}, kFirstNs).total.expected, 0);
  EXPECT_EQ(ComputeScore(e, {}, kFirstNs).total.missed, 0);
  const Score s = ComputeScore(
      e, std::vector{MakeFinding("throughput_drop", "sim-0", "0", "", 70, 90)}, kFirstNs);
  EXPECT_EQ(s.total.expected, 1);
  EXPECT_EQ(s.total.found, 1);
}

TEST(Score, MedianAndWorst) {
  EXPECT_FALSE(MedianAbs({}));
  EXPECT_DOUBLE_EQ(*MedianAbs({-10, 2, 4}), 4);
  EXPECT_DOUBLE_EQ(*MedianAbs({-10, 2, 4, 6}), 5);
  const std::vector<double> errors = {3, -10, 8};
  EXPECT_DOUBLE_EQ(*WorstSigned(errors), -10);
  EXPECT_DOUBLE_EQ(*Median({1, 9, 5}), 5);
}

TEST(Score, JsonHasTheCountsAndEachMatch) {
  const std::vector<v1::Finding> findings = {
      MakeFinding("xid_error", "sim-0", "3", "", 10 * 60, 10 * 60),
  };
  std::ostringstream json;
  WriteScoreJson(json, ComputeScore(TwoExpected(), findings, kFirstNs), "rec");
  const std::string s = json.str();
  EXPECT_NE(s.find("{\"rule\": \"xid_error\", \"expected\": 1, \"found\": 1, \"missed\": 0, "
                   "\"false\": 0, \"allowed\": 0, \"recall\": 1, \"onset_error_s\": "
                   "{\"median_abs\": 0, \"worst\": 0}"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("\"total\": {\"expected\": 2, \"found\": 1, \"missed\": 1, \"false\": 0"),
            std::string::npos)
      << s;
  EXPECT_NE(
      s.find("\"onset\": \"2025-12-02T00:35:00.000Z\", \"optional\": false, \"found\": false"),
      std::string::npos)
      << s;
}

}  // namespace
}  // namespace diagnostics_score_test
}  // namespace accelmon::diagnostics
