#include "collectors/vmstat.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace accelmon::collectors {
namespace vmstat_test {
namespace {

const std::string kFixtures = ACCELMON_FIXTURES_DIR;

// A scratch procfs root whose vmstat the test rewrites between collections.
class ScratchProc {
 public:
  ScratchProc() {
    std::string pattern = (std::filesystem::temp_directory_path() / "vmstat_test.XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp " + pattern);
    root_ = pattern;
  }
  ~ScratchProc() { std::filesystem::remove_all(root_); }
  void WriteVmstat(const std::string& text) const { std::ofstream(root_ / "vmstat") << text; }
  PathResolver paths() const { return PathResolver(root_, "/nonexistent/sys"); }

 private:
  std::filesystem::path root_;
};

v1::NodeReport ReportAt(int64_t seconds) {
  v1::NodeReport report;
  report.mutable_timestamp()->set_seconds(seconds);
  return report;
}

TEST(Vmstat, ReadsRealMachineFixture) {
  VmstatCollector collector(PathResolver(kFixtures + "/host/proc", kFixtures + "/host/sys"));
  v1::NodeReport report;
  collector.Collect(report);
  // tests/fixtures/host/proc/vmstat: "oom_kill 3".
  ASSERT_TRUE(report.host().vmstat().has_oom_kill_total());
  EXPECT_EQ(report.host().vmstat().oom_kill_total(), 3u);
  EXPECT_EQ(report.events_size(), 0) << "the first collection is only a baseline";
}

TEST(Vmstat, KernelWithoutOomKillLeavesTheFieldAbsent) {
  VmstatCollector collector(
      PathResolver(kFixtures + "/host-variants/vmstat-no-oom-kill/proc", "/nonexistent"));
  v1::NodeReport report;
  EXPECT_NO_THROW(collector.Collect(report));
  EXPECT_TRUE(report.host().has_vmstat());
  EXPECT_FALSE(report.host().vmstat().has_oom_kill_total()) << "absent, not 0";
  EXPECT_NO_THROW(collector.Collect(report));
  EXPECT_EQ(report.events_size(), 0);
}

TEST(Vmstat, SkipsMalformedLinesAndKeepsTheRest) {
  v1::HostVmstat vmstat;
  const std::string text =
      "nr_free_pages 1139885\n"
      "pgfault lots\n"
      "no_value_here\n"
      "too many fields 1\n"
      "nr_dirty -5\n"
      "\n"
      "oom_kill 7\n"
      "pgmajfault 1720";  // no final newline
  EXPECT_EQ(ParseVmstat(text, vmstat), 4u);
  EXPECT_EQ(vmstat.oom_kill_total(), 7u);
}

TEST(Vmstat, MalformedOomKillIsAbsent) {
  v1::HostVmstat vmstat;
  EXPECT_EQ(ParseVmstat("oom_kill 12x\npgfault 1\n", vmstat), 1u);
  EXPECT_FALSE(vmstat.has_oom_kill_total());
}

TEST(Vmstat, CountersNear2To64ParseExactly) {
  v1::HostVmstat vmstat;
  EXPECT_EQ(ParseVmstat("oom_kill 18446744073709551000\n", vmstat), 0u);
  EXPECT_EQ(vmstat.oom_kill_total(), 18446744073709551000ULL);
  EXPECT_EQ(ParseVmstat("oom_kill 18446744073709551616\n", vmstat), 1u) << "2^64 overflows";
}

TEST(Vmstat, MissingFileIsAnErrorNamingThePath) {
  VmstatCollector collector(PathResolver("/nonexistent/proc", "/nonexistent/sys"));
  v1::NodeReport report;
  try {
    collector.Collect(report);
    FAIL() << "expected CollectorError";
  } catch (const CollectorError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/proc/vmstat"), std::string::npos);
  }
}

TEST(Vmstat, OomKillEventsFollowTheCounter) {
  ScratchProc proc;
  VmstatCollector collector(proc.paths());

  proc.WriteVmstat("pgfault 100\noom_kill 5\n");
  v1::NodeReport baseline = ReportAt(1000);
  collector.Collect(baseline);
  EXPECT_EQ(baseline.events_size(), 0) << "baseline";

  proc.WriteVmstat("pgfault 120\noom_kill 7\n");
  v1::NodeReport grown = ReportAt(1010);
  collector.Collect(grown);
  ASSERT_EQ(grown.events_size(), 1) << "one event for the growth, however many kills";
  const v1::Event& event = grown.events(0);
  EXPECT_EQ(event.kind(), v1::EVENT_KIND_OOM_KILL);
  EXPECT_EQ(event.code(), 2u);
  EXPECT_EQ(event.time().seconds(), 1010);
  EXPECT_EQ(event.message(), "the kernel's OOM killer killed 2 processes since the last report");
  EXPECT_FALSE(event.has_device_index());

  v1::NodeReport same = ReportAt(1020);
  collector.Collect(same);
  EXPECT_EQ(same.events_size(), 0) << "no growth";

  proc.WriteVmstat("oom_kill 1\n");  // rebooted
  v1::NodeReport rebooted = ReportAt(1030);
  collector.Collect(rebooted);
  EXPECT_EQ(rebooted.events_size(), 0) << "a decrease re-baselines";
  EXPECT_EQ(rebooted.host().vmstat().oom_kill_total(), 1u);

  proc.WriteVmstat("oom_kill 2\n");
  v1::NodeReport after = ReportAt(1040);
  collector.Collect(after);
  ASSERT_EQ(after.events_size(), 1) << "growth from the new baseline";
  EXPECT_EQ(after.events(0).code(), 1u);
  EXPECT_EQ(after.events(0).message(),
            "the kernel's OOM killer killed 1 process since the last report");
}

TEST(Vmstat, OomKillEventNear2To64) {
  ScratchProc proc;
  VmstatCollector collector(proc.paths());
  proc.WriteVmstat("oom_kill 18446744073709551000\n");
  v1::NodeReport first = ReportAt(1);
  collector.Collect(first);
  proc.WriteVmstat("oom_kill 18446744073709551002\n");
  v1::NodeReport second = ReportAt(2);
  collector.Collect(second);
  ASSERT_EQ(second.events_size(), 1);
  EXPECT_EQ(second.events(0).code(), 2u);
}

TEST(Vmstat, AFailedReadKeepsTheBaseline) {
  ScratchProc proc;
  VmstatCollector collector(proc.paths());
  proc.WriteVmstat("oom_kill 4\n");
  v1::NodeReport first = ReportAt(1);
  collector.Collect(first);

  std::filesystem::remove(proc.paths().Proc("vmstat"));
  v1::NodeReport failed = ReportAt(2);
  EXPECT_THROW(collector.Collect(failed), CollectorError);

  proc.WriteVmstat("oom_kill 6\n");
  v1::NodeReport third = ReportAt(3);
  collector.Collect(third);
  ASSERT_EQ(third.events_size(), 1);
  EXPECT_EQ(third.events(0).code(), 2u);
}

}  // namespace
}  // namespace vmstat_test
}  // namespace accelmon::collectors
