// `accelmon top`'s model (daemon/clients/top_view.h): absent values shown as "-", stale nodes,
// sorting and filtering, and the text `--once` prints.
#include "daemon/clients/top_view.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "proto/time_format.h"

namespace accelmon::top {
namespace top_view_test {
namespace {

using namespace std::chrono_literals;

const auto kNow = std::chrono::system_clock::time_point(1'800'000'000s);

v1::NodeReport Report(const std::string& node, std::chrono::seconds age,
                      std::chrono::seconds interval = 1s) {
  v1::NodeReport r;
  r.set_node(node);
  *r.mutable_timestamp() = TimestampFromTimePoint(kNow - age);
  *r.mutable_interval() = DurationFromNanos(std::chrono::nanoseconds(interval).count());
  return r;
}

v1::DeviceTelemetry* AddDevice(v1::NodeReport& r, uint32_t index, double util, uint64_t used,
                               uint64_t total, double celsius, const std::string& job = "") {
  v1::DeviceTelemetry* d = r.add_devices();
  d->mutable_identity()->set_index(index);
  d->mutable_identity()->set_model("Sim A100");
  d->mutable_utilization()->set_compute_ratio(util);
  d->mutable_memory()->set_used_bytes(used);
  d->mutable_memory()->set_total_bytes(total);
  d->mutable_thermal()->set_core_celsius(celsius);
  d->mutable_power()->set_usage_watts(100);
  if (!job.empty()) d->add_holders()->set_job(job);
  return d;
}

v1::Finding Finding(const std::string& node, const std::string& severity, bool open = true) {
  v1::Finding f;
  f.set_rule("memory_fragmentation");
  f.set_severity(severity);
  f.set_node(node);
  f.set_device("0");
  f.set_summary("device 0 fragmented");
  *f.mutable_start() = TimestampFromTimePoint(kNow - 90s);
  if (!open) *f.mutable_end() = TimestampFromTimePoint(kNow - 10s);
  return f;
}

std::vector<std::string> Names(const View& view) {
  std::vector<std::string> names;
  for (const NodeRow& n : view.nodes) names.push_back(n.node);
  return names;
}

constexpr uint64_t kGiB = 1024ULL * 1024 * 1024;

TEST(TopView, AbsentValuesShowAsDashNeverZero) {
  v1::NodeReport r = Report("bare", 0s);
  v1::DeviceTelemetry* d = r.add_devices();  // identity only: nothing measured
  d->mutable_identity()->set_index(3);
  const View view = BuildView({r}, {}, kNow, {});
  ASSERT_EQ(view.nodes.size(), 1u);
  const NodeRow& n = view.nodes[0];
  EXPECT_FALSE(n.mean_util.has_value());
  EXPECT_FALSE(n.mem_used.has_value());
  EXPECT_FALSE(n.max_temp.has_value());
  EXPECT_FALSE(n.power.has_value());
  EXPECT_EQ(FormatPercent(n.mean_util), "-");
  EXPECT_EQ(FormatGiB(n.mem_used), "-");
  EXPECT_EQ(FormatMemory(n.mem_used, n.mem_total), "-");
  EXPECT_EQ(FormatCelsius(n.max_temp), "-");
  EXPECT_EQ(FormatWatts(n.power), "-");
  ASSERT_EQ(n.device_rows.size(), 1u);
  const DeviceRow& dev = n.device_rows[0];
  EXPECT_EQ(FormatBytes(dev.mem_used), "-");
  EXPECT_EQ(FormatRatio(dev.fragmentation), "-");

  const std::string text = FormatText(view, "test");
  // The device row: node, index, then every value a dash (holder and model too).
  EXPECT_NE(text.find("bare  3    -               -                -       -     -     -       "
                      "-        -       -"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find(" 0%"), std::string::npos) << text;
}

TEST(TopView, ZeroIsShownAsZeroNotAsAbsent) {
  v1::NodeReport r = Report("idle", 0s);
  AddDevice(r, 0, 0.0, 0, 80 * kGiB, 30);
  const View view = BuildView({r}, {}, kNow, {});
  EXPECT_EQ(FormatPercent(view.nodes[0].mean_util), "0%");
  EXPECT_EQ(FormatBytes(view.nodes[0].device_rows[0].mem_used), "0");
  EXPECT_EQ(FormatMemory(view.nodes[0].mem_used, view.nodes[0].mem_total), "0.0/80.0G");
}

TEST(TopView, NodeValuesAggregateOnlyTheDevicesThatReportThem) {
  v1::NodeReport r = Report("n", 0s);
  AddDevice(r, 0, 0.2, 10 * kGiB, 80 * kGiB, 60);
  v1::DeviceTelemetry* d = AddDevice(r, 1, 0.6, 30 * kGiB, 80 * kGiB, 70);
  d->mutable_utilization()->clear_compute_ratio();  // one device without utilization
  const View view = BuildView({r}, {}, kNow, {});
  const NodeRow& n = view.nodes[0];
  EXPECT_DOUBLE_EQ(*n.mean_util, 0.2);  // not (0.2 + 0) / 2
  EXPECT_EQ(*n.mem_used, 40 * kGiB);
  EXPECT_EQ(*n.mem_total, 160 * kGiB);
  EXPECT_DOUBLE_EQ(*n.max_temp, 70);
  EXPECT_DOUBLE_EQ(*n.power, 200);
}

TEST(TopView, NodeIsStaleWhenItsReportIsOlderThanThreeIntervals) {
  const View view = BuildView({Report("fresh", 2s, 1s), Report("edge", 3s, 1s),
                               Report("old", 4s, 1s), Report("slow", 25s, 10s)},
                              {}, kNow, {});
  ASSERT_EQ(Names(view), (std::vector<std::string>{"edge", "fresh", "old", "slow"}));
  EXPECT_FALSE(view.nodes[0].stale);  // exactly three intervals: still live
  EXPECT_FALSE(view.nodes[1].stale);
  EXPECT_TRUE(view.nodes[2].stale);
  EXPECT_FALSE(view.nodes[3].stale);  // its own interval counts
  EXPECT_EQ(view.summary.nodes, 4u);
  EXPECT_EQ(view.summary.live, 3u);
  EXPECT_EQ(view.summary.stale, 1u);
  EXPECT_NE(FormatText(view, "t").find("old    stale"), std::string::npos);
}

TEST(TopView, SummaryCountsOpenFindingsBySeverityAndIgnoresClosedOnes) {
  v1::NodeReport a = Report("a", 0s);
  AddDevice(a, 0, 0.5, kGiB, 2 * kGiB, 50);
  AddDevice(a, 1, 0.5, kGiB, 2 * kGiB, 50);
  const View view = BuildView(
      {a, Report("b", 0s)},
      {Finding("a", "warning"), Finding("a", "critical"), Finding("b", "critical", false)}, kNow,
      {});
  EXPECT_EQ(view.summary.devices, 2u);
  EXPECT_EQ(view.summary.findings, 2u);
  EXPECT_EQ(view.summary.critical, 1u);
  EXPECT_EQ(view.summary.warning, 1u);
  EXPECT_EQ(view.nodes[0].findings, 2u);
  EXPECT_EQ(view.nodes[1].findings, 0u);
  ASSERT_EQ(view.findings.size(), 2u);
  EXPECT_EQ(view.findings[0].severity, "critical");  // critical first
  EXPECT_DOUBLE_EQ(*view.findings[0].since_seconds, 90);
  EXPECT_EQ(FormatSummary(view.summary),
            "nodes 2 (2 live, 0 stale)  devices 2  open findings 2 (1 critical, 1 warning)");
}

TEST(TopView, SortKeysOrderNodesWithAbsentValuesLast) {
  v1::NodeReport cool = Report("cool", 0s);
  AddDevice(cool, 0, 0.9, 70 * kGiB, 80 * kGiB, 40);
  v1::NodeReport hot = Report("hot", 0s);
  AddDevice(hot, 0, 0.1, 10 * kGiB, 80 * kGiB, 90);
  v1::NodeReport empty = Report("empty", 0s);  // no devices: no utilization, memory, temp
  const std::vector<v1::NodeReport> reports{hot, empty, cool};
  const std::vector<v1::Finding> findings{Finding("empty", "warning")};

  auto sorted = [&](SortKey key) {
    return Names(BuildView(reports, findings, kNow, {.sort = key}));
  };
  using Names_ = std::vector<std::string>;
  EXPECT_EQ(sorted(SortKey::kNode), (Names_{"cool", "empty", "hot"}));
  EXPECT_EQ(sorted(SortKey::kUtil), (Names_{"cool", "hot", "empty"}));
  EXPECT_EQ(sorted(SortKey::kMemory), (Names_{"cool", "hot", "empty"}));
  EXPECT_EQ(sorted(SortKey::kTemp), (Names_{"hot", "cool", "empty"}));
  EXPECT_EQ(sorted(SortKey::kFindings), (Names_{"empty", "cool", "hot"}));
}

TEST(TopView, SortKeyCyclesThroughEveryKeyAndParsesItsName) {
  SortKey key = SortKey::kNode;
  std::vector<std::string> seen;
  for (int i = 0; i < 5; ++i) {
    seen.emplace_back(SortKeyName(key));
    EXPECT_EQ(ParseSortKey(SortKeyName(key)), key);
    key = NextSortKey(key);
  }
  EXPECT_EQ(key, SortKey::kNode);
  EXPECT_EQ(seen, (std::vector<std::string>{"node", "util", "memory", "temp", "findings"}));
  EXPECT_FALSE(ParseSortKey("bogus").has_value());
}

TEST(TopView, DevicesSortByTheSameKeyAndByIndexOtherwise) {
  v1::NodeReport r = Report("n", 0s);
  AddDevice(r, 0, 0.1, kGiB, 8 * kGiB, 50);
  AddDevice(r, 1, 0.9, 7 * kGiB, 8 * kGiB, 40);
  AddDevice(r, 2, 0.5, 4 * kGiB, 8 * kGiB, 60);
  auto order = [&](SortKey key) {
    std::vector<uint32_t> idx;
    const View view = BuildView({r}, {}, kNow, {.sort = key});
    for (const DeviceRow& d : view.nodes[0].device_rows) {
      idx.push_back(d.index);
    }
    return idx;
  };
  EXPECT_EQ(order(SortKey::kNode), (std::vector<uint32_t>{0, 1, 2}));
  EXPECT_EQ(order(SortKey::kUtil), (std::vector<uint32_t>{1, 2, 0}));
  EXPECT_EQ(order(SortKey::kMemory), (std::vector<uint32_t>{1, 2, 0}));
  EXPECT_EQ(order(SortKey::kTemp), (std::vector<uint32_t>{2, 0, 1}));
}

TEST(TopView, FilterMatchesNodeNameOrJobAnyCaseAndDropsOtherNodesFindings) {
  v1::NodeReport a = Report("gpu-alpha", 0s);
  AddDevice(a, 0, 0.5, kGiB, 2 * kGiB, 50, "llama-pretrain");
  v1::NodeReport b = Report("gpu-bravo", 0s);
  AddDevice(b, 0, 0.5, kGiB, 2 * kGiB, 50, "bert-finetune");
  const std::vector<v1::NodeReport> reports{a, b};
  const std::vector<v1::Finding> findings{Finding("gpu-alpha", "warning"),
                                          Finding("gpu-bravo", "critical")};

  const View by_name = BuildView(reports, findings, kNow, {.filter = "BRAVO"});
  EXPECT_EQ(Names(by_name), (std::vector<std::string>{"gpu-bravo"}));
  ASSERT_EQ(by_name.findings.size(), 1u);
  EXPECT_EQ(by_name.findings[0].node, "gpu-bravo");
  EXPECT_EQ(by_name.summary.nodes, 1u);
  EXPECT_EQ(by_name.summary.devices, 1u);
  EXPECT_EQ(by_name.summary.critical, 1u);
  EXPECT_EQ(by_name.summary.warning, 0u);

  const View by_job = BuildView(reports, findings, kNow, {.filter = "llama"});
  EXPECT_EQ(Names(by_job), (std::vector<std::string>{"gpu-alpha"}));
  EXPECT_EQ(by_job.nodes[0].device_rows[0].holder, "llama-pretrain");

  EXPECT_TRUE(BuildView(reports, findings, kNow, {.filter = "nomatch"}).nodes.empty());
  EXPECT_EQ(BuildView(reports, findings, kNow, {}).nodes.size(), 2u);
}

TEST(TopView, OnceTextHasExactBytesForEveryDeviceOfEveryNode) {
  v1::NodeReport a = Report("a", 0s);
  AddDevice(a, 0, 0.25, 13'207'024'435, 85'899'345'920, 61.4);
  AddDevice(a, 1, 0.75, 1, 85'899'345'920, 70);
  v1::NodeReport b = Report("b", 0s);
  AddDevice(b, 0, 0.5, 42, 85'899'345'920, 50);
  const std::string text =
      FormatText(BuildView({a, b}, {Finding("b", "warning")}, kNow, {}), "exporter x");
  EXPECT_EQ(text.rfind("accelmon top: exporter x\nnodes 2 (2 live, 0 stale)", 0), 0u) << text;
  EXPECT_NE(text.find("\nNODE  STATE  DEVICES  UTIL  MEM_USED_GIB"), std::string::npos) << text;
  EXPECT_NE(text.find("\na     0    13207024435     85899345920      12.3/80.0G"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("\na     1    1               85899345920"), std::string::npos) << text;
  EXPECT_NE(text.find("\nb     0    42              85899345920"), std::string::npos) << text;
  EXPECT_NE(text.find("\nwarning   memory_fragmentation  b     0       1m30s  device 0 fragmented"),
            std::string::npos)
      << text;
}

TEST(TopView, AgesReadAsDurations) {
  EXPECT_EQ(FormatAge(std::nullopt), "-");
  EXPECT_EQ(FormatAge(0.25), "0.2s");
  EXPECT_EQ(FormatAge(42), "42s");
  EXPECT_EQ(FormatAge(185), "3m05s");
  EXPECT_EQ(FormatAge(7800), "2h10m");
  EXPECT_EQ(FormatAge(3 * 86400 + 4 * 3600), "3d4h");
}

}  // namespace
}  // namespace top_view_test
}  // namespace accelmon::top
