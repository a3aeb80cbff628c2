// Reports -> OpenMetricsWriter -> the real `promtool tsdb create-blocks-from openmetrics` ->
// `promtool tsdb dump`: every sample written comes back with its name, labels, millisecond
// timestamp and exact value, and nothing else does.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "collectors/sim.h"
#include "daemon/exporter/metrics_renderer.h"
#include "daemon/tools/openmetrics_writer.h"

namespace accelmon {
namespace openmetrics_promtool_test {
namespace {

namespace fs = std::filesystem;

struct CommandResult {
  int status = -1;
  std::string output;
};

// Runs `command` through the shell with stderr folded into stdout.
CommandResult RunShell(const std::string& command) {
  CommandResult result;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return result;
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), pipe)) > 0) result.output.append(buf, n);
  result.status = ::pclose(pipe);
  return result;
}

bool PromtoolOnPath() { return RunShell("command -v promtool").status == 0; }

// One series' identity as promtool prints it: name and labels sorted by name.
using SeriesKey = std::map<std::string, std::string>;
using Samples = std::map<SeriesKey, std::map<int64_t, double>>;

// Parses one line of `promtool tsdb dump`: {__name__="x", a="b"} VALUE TIMESTAMP_MS.
bool ParseDumpLine(const std::string& line, SeriesKey* key, double* value, int64_t* ts) {
  if (line.empty() || line[0] != '{') return false;
  size_t i = 1;
  while (i < line.size() && line[i] != '}') {
    const size_t eq = line.find("=\"", i);
    if (eq == std::string::npos) return false;
    const std::string name = line.substr(i, eq - i);
    std::string v;
    size_t j = eq + 2;
    for (; j < line.size() && line[j] != '"'; ++j) {
      if (line[j] == '\\' && j + 1 < line.size()) {
        ++j;
        v.push_back(line[j] == 'n' ? '\n' : line[j]);
      } else {
        v.push_back(line[j]);
      }
    }
    (*key)[name] = v;
    i = j + 1;
    if (line.compare(i, 2, ", ") == 0) i += 2;
  }
  std::istringstream rest(line.substr(i + 1));
  std::string value_text;
  rest >> value_text >> *ts;
  *value = std::strtod(value_text.c_str(), nullptr);
  return static_cast<bool>(rest);
}

// What a report renders to, exactly as the writer must have written it.
void Expect(const v1::NodeReport& r, Samples* expected) {
  const int64_t ts_ms = r.timestamp().seconds() * 1000 + r.timestamp().nanos() / 1000000;
  const Clock::time_point at{
      std::chrono::duration_cast<Clock::duration>(std::chrono::seconds(r.timestamp().seconds()) +
                                                  std::chrono::nanoseconds(r.timestamp().nanos()))};
  const auto report = std::make_shared<const v1::NodeReport>(r);
  for (const auto& family : RenderNodes({NodeEntry{report, at}}, at)) {
    for (const auto& metric : family.metric) {
      SeriesKey key{{"__name__", family.name}};
      for (const auto& label : metric.label) key[label.name] = label.value;
      const double v = family.type == prometheus::MetricType::Counter ? metric.counter.value
                                                                      : metric.gauge.value;
      (*expected)[key][ts_ms] = v;
    }
  }
}

TEST(OpenMetricsPromtoolTest, EverySampleComesBackFromPrometheusTsdb) {
  if (!PromtoolOnPath()) GTEST_SKIP() << "promtool is not on PATH";
  const fs::path dir = fs::path(::testing::TempDir()) / "openmetrics_promtool_test";
  fs::remove_all(dir);
  const fs::path om_dir = dir / "om";
  const fs::path tsdb = dir / "tsdb";

  // Two simulated nodes over five hours (three two-hour windows), one report every ten minutes
  // at odd milliseconds. Node b's reports come after all of a's, like an agent's spool catching
  // up: with two open windows, its first window is written a second time as a late part.
  constexpr int64_t kStart = 1764680000;  // 2025-12-02T12:53:20Z
  std::vector<v1::NodeReport> reports;
  for (const std::string node : {"a", "b"}) {
    collectors::SimCollector sim({.devices = 2, .seed = collectors::SimSeedForNode(node)});
    for (int i = 0; i < 30; ++i) {
      v1::NodeReport r;
      r.set_node(node);
      r.set_agent_instance_id("test");
      r.set_sequence(static_cast<uint64_t>(i) + 1);
      r.mutable_timestamp()->set_seconds(kStart + i * 600);
      r.mutable_timestamp()->set_nanos((i * 7 % 1000) * 1000000 + 456789);
      r.mutable_interval()->set_seconds(600);
      r.mutable_host()->mutable_memory()->set_total_bytes(uint64_t{1} << 40);
      r.mutable_host()->mutable_memory()->set_available_bytes((uint64_t{1} << 39) + i);
      r.mutable_host()->mutable_memory_pressure()->set_some_total_us(1234567 * (i + 1));
      sim.Collect(r);
      reports.push_back(std::move(r));
    }
  }

  Samples expected;
  OpenMetricsWriter writer(om_dir.string(), {.max_open_windows = 2});
  for (const auto& r : reports) {
    writer.Add(r);
    Expect(r, &expected);
  }
  const OpenMetricsWriter::Summary summary = writer.Finish();
  size_t expected_samples = 0;
  for (const auto& [key, samples] : expected) expected_samples += samples.size();
  EXPECT_EQ(summary.samples, expected_samples);
  EXPECT_EQ(summary.series, expected.size());
  ASSERT_GE(summary.files.size(), 4u) << "expected three windows and a late part";

  for (const std::string& file : summary.files) {
    const CommandResult created = RunShell("promtool tsdb create-blocks-from openmetrics '" + file +
                                           "' '" + tsdb.string() + "'");
    ASSERT_EQ(created.status, 0) << file << ":\n" << created.output;
  }
  // promtool 2.42's dump opens the TSDB like a server would, WAL directory included.
  fs::create_directories(tsdb / "wal");
  const CommandResult dump = RunShell("promtool tsdb dump '" + tsdb.string() + "'");
  ASSERT_EQ(dump.status, 0) << dump.output.substr(0, 2000);

  Samples got;
  size_t lines = 0;
  std::istringstream in(dump.output);
  for (std::string line; std::getline(in, line);) {
    SeriesKey key;
    double value = 0;
    int64_t ts = 0;
    ASSERT_TRUE(ParseDumpLine(line, &key, &value, &ts)) << line;
    ++lines;
    const auto [it, inserted] = got[key].try_emplace(ts, value);
    EXPECT_TRUE(inserted) << "sample twice: " << line;
  }
  EXPECT_EQ(lines, expected_samples);

  size_t checked = 0;
  for (const auto& [key, samples] : expected) {
    const auto it = got.find(key);
    ASSERT_NE(it, got.end()) << "series missing: " << key.at("__name__");
    for (const auto& [ts, value] : samples) {
      const auto s = it->second.find(ts);
      ASSERT_NE(s, it->second.end()) << key.at("__name__") << " at " << ts;
      EXPECT_EQ(s->second, value) << key.at("__name__") << " at " << ts;
      ++checked;
    }
    EXPECT_EQ(it->second.size(), samples.size()) << key.at("__name__");
  }
  EXPECT_EQ(checked, expected_samples);
  EXPECT_EQ(got.size(), expected.size());
  fs::remove_all(dir);
}

}  // namespace
}  // namespace openmetrics_promtool_test
}  // namespace accelmon
