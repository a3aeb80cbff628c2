#include "daemon/tools/openmetrics_writer.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

namespace accelmon {
namespace openmetrics_writer_test {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kT0 = 1764680000;  // 2025-12-02T12:53:20Z, in the window from 1764676800
constexpr int64_t kWindowStart = 1764676800;

class OpenMetricsWriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           ("openmetrics_writer_test_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  static std::string Read(const std::string& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

  std::vector<std::string> FileNames() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir_)) names.push_back(e.path().filename());
    std::sort(names.begin(), names.end());
    return names;
  }

  fs::path dir_;
};

v1::NodeReport Report(const std::string& node, int64_t seconds, int32_t nanos = 0) {
  v1::NodeReport r;
  r.set_node(node);
  r.set_agent_instance_id("i");
  r.set_sequence(1);
  r.mutable_timestamp()->set_seconds(seconds);
  r.mutable_timestamp()->set_nanos(nanos);
  r.mutable_interval()->set_seconds(10);
  return r;
}

TEST_F(OpenMetricsWriterTest, ExactTextOfATinyReport) {
  v1::NodeReport r = Report("n1", kT0, 123000000);
  r.mutable_host()->mutable_memory()->set_total_bytes(1024);
  r.mutable_host()->mutable_vmstat()->set_oom_kill_total(3);
  auto* c = r.add_collectors();
  c->set_name("meminfo");
  c->set_success(true);
  c->set_duration_seconds(0.25);

  OpenMetricsWriter writer(dir_.string());
  writer.Add(r);
  const OpenMetricsWriter::Summary summary = writer.Finish();

  const std::string path = (dir_ / "accelmon-1764676800.om").string();
  ASSERT_EQ(summary.files, std::vector<std::string>{path});
  EXPECT_EQ(
      Read(path),
      R"(# HELP accelmon_node_up 1 while the node's agent reports, 0 after three missed intervals.
# TYPE accelmon_node_up gauge
accelmon_node_up{node="n1"} 1 1764680000.123
# HELP accelmon_node_last_report_timestamp_seconds Node clock time of the node's latest report.
# TYPE accelmon_node_last_report_timestamp_seconds gauge
# UNIT accelmon_node_last_report_timestamp_seconds seconds
accelmon_node_last_report_timestamp_seconds{node="n1"} 1764680000.123 1764680000.123
# HELP accelmon_agent_collector_success 1 when the collector read its source in the latest report.
# TYPE accelmon_agent_collector_success gauge
accelmon_agent_collector_success{node="n1",collector="meminfo"} 1 1764680000.123
# HELP accelmon_agent_collector_duration_seconds Time the collector took in the latest report.
# TYPE accelmon_agent_collector_duration_seconds gauge
# UNIT accelmon_agent_collector_duration_seconds seconds
accelmon_agent_collector_duration_seconds{node="n1",collector="meminfo"} 0.25 1764680000.123
# HELP accelmon_host_memory_total_bytes Physical memory of the host (MemTotal).
# TYPE accelmon_host_memory_total_bytes gauge
# UNIT accelmon_host_memory_total_bytes bytes
accelmon_host_memory_total_bytes{node="n1"} 1024 1764680000.123
# HELP accelmon_host_oom_kills Processes killed by the kernel's OOM killer since boot.
# TYPE accelmon_host_oom_kills counter
accelmon_host_oom_kills_total{node="n1"} 3 1764680000.123
# EOF
)");
  EXPECT_EQ(summary.reports, 1u);
  EXPECT_EQ(summary.samples, 6u);
  EXPECT_EQ(summary.series, 6u);
  EXPECT_EQ(summary.first_timestamp_ms, kT0 * 1000 + 123);
  EXPECT_EQ(summary.last_timestamp_ms, kT0 * 1000 + 123);
}

TEST_F(OpenMetricsWriterTest, CountersAreTypedWithoutTotalAndKeepTheirSampleName) {
  v1::NodeReport r = Report("n1", kT0);
  auto* d = r.add_devices();
  d->mutable_identity()->set_vendor("sim");
  d->mutable_power()->set_energy_joules_total(5.5);
  d->mutable_power()->set_usage_watts(300);
  auto* l = d->add_links();
  l->set_name("nvlink0");
  l->set_kind(v1::LINK_KIND_NVLINK);
  l->set_transmit_bytes_total(7);
  l->set_max_bandwidth_bytes_per_second(5e10);

  OpenMetricsWriter writer(dir_.string());
  writer.Add(r);
  const std::string text = Read(writer.Finish().files.at(0));
  for (const char* expected : {
           "# TYPE accelmon_device_energy_joules counter\n# UNIT accelmon_device_energy_joules "
           "joules\naccelmon_device_energy_joules_total{",
           "# TYPE accelmon_device_power_watts gauge\n# UNIT accelmon_device_power_watts "
           "watts\naccelmon_device_power_watts{",
           "# TYPE accelmon_device_link_transmit_bytes counter\n# UNIT "
           "accelmon_device_link_transmit_bytes bytes\naccelmon_device_link_transmit_bytes_total{",
           "# TYPE accelmon_device_link_max_bandwidth_bytes_per_second gauge\n# UNIT "
           "accelmon_device_link_max_bandwidth_bytes_per_second bytes_per_second\n",
           "# HELP accelmon_device_info ",
           "# TYPE accelmon_device_info gauge\naccelmon_device_info{node=\"n1\",device=\"0\","
           "uuid=\"\",vendor=\"sim\",model=\"\",firmware=\"\",driver=\"\",pci_bus_id=\"\"} 1 "
           "1764680000.000\n",
           "} 5e+10 1764680000.000\n",
       }) {
    EXPECT_NE(text.find(expected), std::string::npos) << expected << "\nin:\n" << text;
  }
  EXPECT_EQ(text.find("_total counter"), std::string::npos) << text;
}

TEST_F(OpenMetricsWriterTest, OneFilePerTwoHourWindowAlignedLikePrometheusBlocks) {
  OpenMetricsWriter writer(dir_.string());
  // The window boundary is at kWindowStart + 7200.
  for (int64_t t : {kT0, kWindowStart + 7199, kWindowStart + 7200, kWindowStart + 7200 * 3 + 5}) {
    writer.Add(Report("n1", t));
  }
  const auto summary = writer.Finish();
  EXPECT_EQ(FileNames(),
            (std::vector<std::string>{"accelmon-1764676800.om", "accelmon-1764684000.om",
                                      "accelmon-1764698400.om"}));
  EXPECT_EQ(summary.files.size(), 3u);
  const std::string first = Read((dir_ / "accelmon-1764676800.om").string());
  EXPECT_NE(first.find(" 1764680000.000\n"), std::string::npos);
  EXPECT_NE(first.find(" 1764683999.000\n"), std::string::npos);
  EXPECT_EQ(first.find(" 1764684000.000\n"), std::string::npos);
  EXPECT_NE(Read((dir_ / "accelmon-1764684000.om").string()).find(" 1764684000.000\n"),
            std::string::npos);
  for (const auto& name : FileNames()) {
    const std::string text = Read((dir_ / name).string());
    EXPECT_TRUE(text.ends_with("\n# EOF\n")) << name;
    EXPECT_EQ(text.find("# EOF"), text.size() - 6) << name;
  }
  EXPECT_EQ(summary.first_timestamp_ms, kT0 * 1000);
  EXPECT_EQ(summary.last_timestamp_ms, (kWindowStart + 7200 * 3 + 5) * 1000);
}

// Families are never interleaved, and each series is in time order, whatever the input order.
TEST_F(OpenMetricsWriterTest, FamiliesContiguousAndSeriesInTimeOrder) {
  OpenMetricsWriter writer(dir_.string());
  writer.Add(Report("a", kT0 + 20));
  writer.Add(Report("b", kT0 + 10));
  writer.Add(Report("a", kT0 + 10));  // older than the first report of "a"
  writer.Add(Report("b", kT0 + 30));
  writer.Add(Report("a", kT0 + 30));
  const std::string text = Read(writer.Finish().files.at(0));

  std::map<std::string, int> type_lines;
  std::string family;
  std::map<std::string, double> last_ts;  // by series
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("# TYPE ")) {
      family = line.substr(7, line.find(' ', 7) - 7);
      ++type_lines[family];
      continue;
    }
    if (line.starts_with("#")) continue;
    EXPECT_TRUE(line.starts_with(family)) << line << " after family " << family;
    const std::string series = line.substr(0, line.find(' '));
    const double ts = std::stod(line.substr(line.rfind(' ') + 1));
    if (last_ts.count(series)) {
      EXPECT_LT(last_ts[series], ts) << line;
    }
    last_ts[series] = ts;
  }
  for (const auto& [name, n] : type_lines) EXPECT_EQ(n, 1) << name;
  EXPECT_EQ(last_ts.count("accelmon_node_up{node=\"a\"}"), 1u);
}

// Time-ordered input keeps two windows in memory: reaching a new window writes those before the
// previous one.
TEST_F(OpenMetricsWriterTest, TimeOrderedInputBuffersTwoWindows) {
  OpenMetricsWriter writer(dir_.string());
  writer.Add(Report("a", kT0));
  writer.Add(Report("a", kT0 + 7200));
  EXPECT_TRUE(FileNames().empty());
  writer.Add(Report("a", kT0 + 2 * 7200));
  EXPECT_EQ(FileNames(), std::vector<std::string>{"accelmon-1764676800.om"});
  writer.Add(Report("b", kT0 + 7200 + 1));  // a skewed clock: still open
  writer.Add(Report("a", kT0 + 3 * 7200));
  EXPECT_EQ(FileNames(),
            (std::vector<std::string>{"accelmon-1764676800.om", "accelmon-1764684000.om"}));
  EXPECT_NE(Read((dir_ / "accelmon-1764684000.om").string()).find("node=\"b\""), std::string::npos);
  EXPECT_EQ(writer.Finish().files.size(), 4u);
}

TEST_F(OpenMetricsWriterTest, LateReportsForAWrittenWindowGoToAnExtraFile) {
  OpenMetricsWriter writer(dir_.string(), {.max_open_windows = 2});
  writer.Add(Report("a", kT0));
  writer.Add(Report("a", kT0 + 7200));
  writer.Add(Report("a", kT0 + 2 * 7200));  // a third window: the first is written
  EXPECT_EQ(FileNames(), std::vector<std::string>{"accelmon-1764676800.om"});
  writer.Add(Report("late", kT0 + 5));  // a spool catching up
  writer.Add(Report("late", kT0 + 6));
  const auto summary = writer.Finish();
  EXPECT_EQ(FileNames(),
            (std::vector<std::string>{"accelmon-1764676800.om", "accelmon-1764676800_001.om",
                                      "accelmon-1764684000.om", "accelmon-1764691200.om"}));
  EXPECT_EQ(summary.files.size(), 4u);
  const std::string late = Read((dir_ / "accelmon-1764676800_001.om").string());
  EXPECT_NE(late.find("accelmon_node_up{node=\"late\"} 1 1764680005.000\n"), std::string::npos)
      << late;
  EXPECT_NE(late.find("accelmon_node_up{node=\"late\"} 1 1764680006.000\n"), std::string::npos)
      << late;
  EXPECT_EQ(late.find("node=\"a\""), std::string::npos) << late;
  EXPECT_EQ(summary.reports, 5u);
}

TEST_F(OpenMetricsWriterTest, EscapesLabelValuesAndHelp) {
  v1::NodeReport r = Report("n1", kT0);
  auto* t = r.mutable_host()->add_temperatures();
  t->set_sensor("odd \"name\" \\ with\nnewline");
  t->set_chip("hwmon0");
  t->set_celsius(-1.5);
  OpenMetricsWriter writer(dir_.string());
  writer.Add(r);
  const std::string text = Read(writer.Finish().files.at(0));
  EXPECT_NE(text.find("accelmon_host_temperature_celsius{node=\"n1\",chip=\"hwmon0\",sensor=\"odd "
                      "\\\"name\\\" \\\\ with\\nnewline\"} -1.5 1764680000.000\n"),
            std::string::npos)
      << text;
}

TEST_F(OpenMetricsWriterTest, ReportsWithoutTimestampAreSkippedAndCounted) {
  OpenMetricsWriter writer(dir_.string());
  v1::NodeReport r;
  r.set_node("n1");
  writer.Add(r);
  const auto summary = writer.Finish();
  EXPECT_EQ(summary.reports_without_timestamp, 1u);
  EXPECT_EQ(summary.reports, 0u);
  EXPECT_TRUE(summary.files.empty());
  EXPECT_FALSE(summary.first_timestamp_ms.has_value());
}

TEST_F(OpenMetricsWriterTest, CannotCreateDirectoryThrowsWithPath) {
  fs::create_directories(dir_);
  std::ofstream(dir_ / "file") << "x";
  const std::string bad = (dir_ / "file" / "sub").string();
  try {
    OpenMetricsWriter writer(bad);
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("Not a directory"), std::string::npos) << e.what();
  }
}

TEST_F(OpenMetricsWriterTest, CannotCreateFileThrowsWithPath) {
  OpenMetricsWriter writer(dir_.string());
  writer.Add(Report("a", kT0));
  // A directory where the file should go.
  fs::create_directories(dir_ / "accelmon-1764676800.om");
  try {
    writer.Finish();
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find((dir_ / "accelmon-1764676800.om").string()),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("Is a directory"), std::string::npos) << e.what();
  }
}

TEST(OpenMetricsTimestampTest, SecondsWithMillisecondsThatPromtoolTruncatesBack) {
  EXPECT_EQ(OpenMetricsWriter::FormatTimestamp(0), "0.000");
  EXPECT_EQ(OpenMetricsWriter::FormatTimestamp(1764680000123), "1764680000.123");
  EXPECT_EQ(OpenMetricsWriter::FormatTimestamp(1764680000005), "1764680000.005");
  EXPECT_EQ(OpenMetricsWriter::FormatTimestamp(-1500), "-1.500");
  // In 2038 the nearest double to "2147483648.002" times 1000 lies just below ...002.
  EXPECT_EQ(OpenMetricsWriter::FormatTimestamp(2147483648002), "2147483648.0025");
  // Every millisecond of a few seconds around now and around 2038 comes back through
  // promtool's arithmetic (int64(float seconds * 1000)).
  for (const int64_t base : {int64_t{1764680000000}, int64_t{2147483648000}}) {
    for (int64_t ms = base; ms < base + 3000; ++ms) {
      const std::string text = OpenMetricsWriter::FormatTimestamp(ms);
      ASSERT_EQ(static_cast<int64_t>(std::stod(text) * 1000), ms) << text;
    }
  }
}

TEST(OpenMetricsFileNameTest, NamesSortByTimeWithZeroPaddedSecondsAndPart) {
  EXPECT_EQ(OpenMetricsWriter::FileName(kWindowStart * 1000, 0), "accelmon-1764676800.om");
  EXPECT_EQ(OpenMetricsWriter::FileName(kWindowStart * 1000, 2), "accelmon-1764676800_002.om");
  EXPECT_EQ(OpenMetricsWriter::FileName(7200000, 0), "accelmon-0000007200.om");
}

}  // namespace
}  // namespace openmetrics_writer_test
}  // namespace accelmon
