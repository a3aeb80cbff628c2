#include "collectors/meminfo.h"

#include <gtest/gtest.h>

#include "collectors/registry.h"
#include "collectors/sim.h"

namespace accelmon::collectors {
namespace meminfo_test {
namespace {

const std::string kFixtures = ACCELMON_FIXTURES_DIR;

TEST(Meminfo, ReadsRealMachineFixtureInBytes) {
  MeminfoCollector collector(PathResolver(kFixtures + "/host/proc", kFixtures + "/host/sys"));
  v1::NodeReport report;
  collector.Collect(report);
  const auto& m = report.host().memory();
  // Values copied from tests/fixtures/host/proc/meminfo, in kB there.
  EXPECT_EQ(m.total_bytes(), 24683584ULL * 1024);
  EXPECT_EQ(m.free_bytes(), 24023072ULL * 1024);
  EXPECT_EQ(m.available_bytes(), 24314496ULL * 1024);
  EXPECT_EQ(m.buffers_bytes(), 3164ULL * 1024);
  EXPECT_EQ(m.cached_bytes(), 447144ULL * 1024);
  EXPECT_TRUE(m.has_swap_total_bytes());
  EXPECT_EQ(m.swap_total_bytes(), 0u);  // reported as 0 by the kernel: present, not absent
  EXPECT_EQ(m.hugepages_total(), 0u);   // a count, not kB
  EXPECT_EQ(m.hugepage_size_bytes(), 2048ULL * 1024);
}

TEST(Meminfo, SkipsMalformedLinesAndKeepsTheRest) {
  v1::HostMemory m;
  const std::string text =
      "MemTotal:       16318468 kB\n"
      "MemFree: lots kB\n"
      "this line has no colon\n"
      "MemAvailable:   8000000 kB\n"
      "Cached: 18446744073709551615 kB\n"  // overflows once converted to bytes
      "HugePages_Total:       4\n"
      "\n"
      "Buffers:   12 kB\n";
  EXPECT_EQ(ParseMeminfo(text, m), 3u);
  EXPECT_EQ(m.total_bytes(), 16318468ULL * 1024);
  EXPECT_EQ(m.available_bytes(), 8000000ULL * 1024);
  EXPECT_EQ(m.hugepages_total(), 4u);
  EXPECT_EQ(m.buffers_bytes(), 12u * 1024);
  EXPECT_FALSE(m.has_free_bytes()) << "an unparsable value is absent, not zero";
  EXPECT_FALSE(m.has_cached_bytes());
  EXPECT_FALSE(m.has_swap_total_bytes()) << "a key the file lacks is absent";
}

TEST(Meminfo, MalformedFixtureDoesNotCrashTheCollector) {
  MeminfoCollector collector(PathResolver(kFixtures + "/procfs-malformed", "/nonexistent"));
  v1::NodeReport report;
  EXPECT_NO_THROW(collector.Collect(report));
  EXPECT_EQ(report.host().memory().total_bytes(), 16318468ULL * 1024);
}

TEST(Meminfo, MissingFileIsAnErrorNamingThePath) {
  MeminfoCollector collector(PathResolver("/nonexistent/proc", "/nonexistent/sys"));
  v1::NodeReport report;
  try {
    collector.Collect(report);
    FAIL() << "expected CollectorError";
  } catch (const CollectorError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/proc/meminfo"), std::string::npos);
  }
  EXPECT_FALSE(report.host().has_memory());
}

TEST(CollectorSet, AFailingCollectorIsNoDataAndTheOthersStillRun) {
  std::vector<std::unique_ptr<Collector>> list;
  list.push_back(std::make_unique<MeminfoCollector>(PathResolver("/nonexistent", "/nonexistent")));
  list.push_back(std::make_unique<SimCollector>(SimOptions{.devices = 2, .seed = 7}));
  CollectorSet set(std::move(list));
  v1::NodeReport report;
  report.mutable_timestamp()->set_seconds(1'700'000'000);
  set.CollectAll(report);

  ASSERT_EQ(report.collectors_size(), 2);
  EXPECT_EQ(report.collectors(0).name(), "meminfo");
  EXPECT_FALSE(report.collectors(0).success());
  EXPECT_NE(report.collectors(0).error().find("No such file"), std::string::npos);
  EXPECT_EQ(report.collectors(1).name(), "sim");
  EXPECT_TRUE(report.collectors(1).success());
  EXPECT_EQ(report.devices_size(), 2);
  EXPECT_FALSE(report.host().memory().has_total_bytes());
}

TEST(CreateCollectors, EveryHostCollectorAndSimOnlyWhenAsked) {
  const size_t host = HostCollectors().size();
  EXPECT_EQ(CreateCollectors({.paths = PathResolver(), .sim_devices = 0}).size(), host);
  const auto with_sim = CreateCollectors({.paths = PathResolver(), .sim_devices = 8});
  ASSERT_EQ(with_sim.size(), host + 2) << "sim, then processes (who uses the devices)";
  EXPECT_EQ(with_sim[host]->name(), "sim");
  EXPECT_EQ(with_sim[host + 1]->name(), "processes");
  for (const auto& info : HostCollectors()) {
    const auto collector = CreateHostCollector(info.name, PathResolver());
    ASSERT_NE(collector, nullptr) << info.name;
    EXPECT_EQ(collector->name(), info.name);
  }
  EXPECT_EQ(CreateHostCollector("nope", PathResolver()), nullptr);
}

TEST(CollectorSet, AnAbsentSourceIsNotAFailure) {
  // A node without InfiniBand or hwmon: nothing to report, and nothing to alert on.
  std::vector<std::unique_ptr<Collector>> list;
  list.push_back(CreateHostCollector("infiniband", PathResolver("/nonexistent", "/nonexistent")));
  list.push_back(CreateHostCollector("pressure", PathResolver("/nonexistent", "/nonexistent")));
  CollectorSet set(std::move(list));
  v1::NodeReport report;
  set.CollectAll(report);
  ASSERT_EQ(report.collectors_size(), 2);
  for (const auto& status : report.collectors()) {
    EXPECT_TRUE(status.success()) << status.name();
    EXPECT_NE(status.error().find("/nonexistent"), std::string::npos) << status.error();
  }
  EXPECT_EQ(report.host().links_size(), 0);
  EXPECT_FALSE(report.host().has_memory_pressure());
}

}  // namespace
}  // namespace meminfo_test
}  // namespace accelmon::collectors
