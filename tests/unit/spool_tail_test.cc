// What the disk refuses the spool keeps in memory, in a tail: Read serves it in sequence order
// with the spooled reports, acknowledgements settle it, and it counts against max_bytes, the
// oldest report (on disk or in memory) dropped first and counted. The disk is made to refuse by
// segment names linked to /dev/full (every write fails with ENOSPC), linked into a directory
// that does not exist (the segment cannot be created), or by RLIMIT_FSIZE (writes past a size
// fail with EFBIG while the segment stays open): chmod does not stop root. The links are made
// after the spool opened its directory.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <csignal>
#include <filesystem>
#include <string>
#include <vector>

#include "daemon/agent/spool.h"
#include "recording/segment_writer.h"
#include "support/report_sequences.h"
#include "support/temp_dir.h"

namespace accelmon {
namespace spool_tail_test {
namespace {

using testing::Range;
using testing::Sequences;

namespace fs = std::filesystem;

v1::NodeReport Report(uint64_t sequence, size_t padding = 0) {
  v1::NodeReport r;
  r.set_node("node-a" + std::string(padding, 'x'));
  r.set_agent_instance_id("feedface00000001");
  r.set_sequence(sequence);
  return r;
}

class SpoolTailTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
    dir_ = ::accelmon::testing::MakeTempDir("accelmon-spool-tail-test");
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  SpoolOptions Options(uint64_t max_bytes, uint64_t segment_bytes = uint64_t{4} << 20) const {
    return SpoolOptions{.dir = dir_, .max_bytes = max_bytes, .segment_bytes = segment_bytes};
  }

  // The segment of this index, when the spool opens it, refuses every write.
  void Refuse(uint64_t index, const std::string& target = "/dev/full") const {
    fs::create_symlink(target, recording::SegmentFilePath(dir_, index));
  }

  void RemoveLinks() const {
    for (const auto& e : fs::directory_iterator(dir_)) {
      if (fs::is_symlink(e.symlink_status())) fs::remove(e.path());
    }
  }

  std::string dir_;
};

TEST_F(SpoolTailTest, RefusedReportsAreReadInOrderWithTheSpooledOnes) {
  std::vector<uint64_t> refused;
  {
    // Segments of about 4 KiB: report 1 meets segment 1, the next ones fill segment 2, and the
    // two that would open segments 3 and 4 are refused too.
    Spool spool(Options(uint64_t{1} << 20, 4096), "fresh-id");
    Refuse(1);
    Refuse(3);
    Refuse(4);
    for (uint64_t s = 1; s <= 40; ++s) {
      if (!spool.Append(Report(s, 500))) refused.push_back(s);
    }
    ASSERT_EQ(refused.size(), 3u);
    EXPECT_EQ(refused[0], 1u);
    EXPECT_EQ(refused[2], refused[1] + 1);
    EXPECT_EQ(spool.tail_reports(), 3u);
    EXPECT_GT(spool.tail_bytes(), 3 * 500u);
    EXPECT_EQ(spool.last_sequence(), 40u);
    EXPECT_EQ(spool.unacknowledged(), 40u);
    EXPECT_EQ(spool.dropped_reports(), 0u);

    uint64_t scanned = 0;
    const auto all = spool.Read(0, UINT64_MAX, 100, &scanned);
    EXPECT_EQ(Sequences(all), Range(1, 40));
    EXPECT_EQ(scanned, 40u);
    EXPECT_EQ(all[0]->node().size(), 506u) << "the report itself";
    // Every window and limit, across the tail's reports.
    for (uint64_t after = 0; after < 40; ++after) {
      SCOPED_TRACE("after " + std::to_string(after));
      const uint64_t last = std::min<uint64_t>(40, after + 3);
      EXPECT_EQ(Sequences(spool.Read(after, UINT64_MAX, 3, &scanned)), Range(after + 1, last));
      EXPECT_EQ(scanned, last);
      const uint64_t before = std::min<uint64_t>(41, after + 5);
      EXPECT_EQ(Sequences(spool.Read(after, before, 100, &scanned)), Range(after + 1, before - 1));
      EXPECT_EQ(scanned, before - 1);
    }

    // Acknowledged, they leave the tail.
    spool.Acknowledge(1);
    EXPECT_EQ(spool.tail_reports(), 2u);
    EXPECT_EQ(spool.unacknowledged(), 39u);
    EXPECT_EQ(Sequences(spool.Read(1, UINT64_MAX, 100, nullptr)), Range(2, 40));
    spool.Acknowledge(refused[2]);
    EXPECT_EQ(spool.tail_reports(), 0u);
    EXPECT_EQ(spool.tail_bytes(), 0u);
    EXPECT_EQ(spool.unacknowledged(), 40 - refused[2]);
    // (Acknowledged segments are deleted later, at most once a second: read from the watermark.)
    EXPECT_EQ(Sequences(spool.Read(refused[2], UINT64_MAX, 100, nullptr)),
              Range(refused[2] + 1, 40));
    EXPECT_EQ(spool.dropped_reports(), 0u);
  }
  // What the disk took is there for the next run, in the format it always had.
  RemoveLinks();
  Spool spool(Options(uint64_t{1} << 20, 4096), "other-id");
  EXPECT_EQ(spool.instance_id(), "fresh-id");
  EXPECT_EQ(spool.last_sequence(), 40u);
  EXPECT_EQ(Sequences(spool.Read(spool.acknowledged(), UINT64_MAX, 100, nullptr)),
            Range(refused[2] + 1, 40));
}

TEST_F(SpoolTailTest, ATailOverMaxBytesDropsTheOldestAndCountsThem) {
  const uint64_t max_bytes = 16384;
  Spool spool(Options(max_bytes, 4096), "fresh-id");
  Refuse(1, dir_ + "/missing/segment");  // no segment can be created
  for (uint64_t s = 1; s <= 100; ++s) {
    EXPECT_FALSE(spool.Append(Report(s, 500)));
    EXPECT_LE(spool.tail_bytes(), max_bytes);
  }
  EXPECT_EQ(spool.bytes(), 0u);
  EXPECT_EQ(spool.segments(), 0u);
  EXPECT_GT(spool.dropped_reports(), 0u);
  const auto left = Sequences(spool.Read(0, UINT64_MAX, 1000, nullptr));
  ASSERT_FALSE(left.empty());
  EXPECT_EQ(left, Range(left.front(), 100)) << "the newest are kept";
  EXPECT_EQ(left.size(), spool.tail_reports());
  EXPECT_EQ(left.size() + spool.dropped_reports(), 100u) << "every report kept or counted";
  EXPECT_EQ(spool.dropped_through(), left.front() - 1);
  EXPECT_EQ(spool.unacknowledged(), left.size());
  spool.Acknowledge(100);
  EXPECT_EQ(spool.unacknowledged(), 0u);
  EXPECT_EQ(spool.tail_reports(), 0u);
}

TEST_F(SpoolTailTest, DiskAndTailTogetherDropTheOldestFirst) {
  const uint64_t max_bytes = 16384;
  Spool spool(Options(max_bytes, 4096), "fresh-id");
  // Every third segment takes no write.
  for (uint64_t index = 3; index <= 200; index += 3) Refuse(index);
  size_t refused = 0;
  for (uint64_t s = 1; s <= 300; ++s) {
    if (!spool.Append(Report(s, 500))) ++refused;
    EXPECT_LE(spool.bytes() + spool.tail_bytes(), max_bytes) << s;
  }
  EXPECT_GT(refused, 10u);
  EXPECT_GT(spool.dropped_reports(), 0u);
  const auto left = Sequences(spool.Read(0, UINT64_MAX, 1000, nullptr));
  ASSERT_FALSE(left.empty());
  EXPECT_EQ(left, Range(left.front(), 300)) << "the newest are kept";
  EXPECT_EQ(left.size() + spool.dropped_reports(), 300u) << "every report kept or counted";
  EXPECT_EQ(spool.unacknowledged(), left.size());
}

// The segment being written is never dropped for room: the tail's oldest go instead, though
// older reports stay on disk, and they are still counted right.
TEST_F(SpoolTailTest, WithOnlyTheSegmentBeingWrittenTheTailGives) {
  const uint64_t max_bytes = 65536;
  struct rlimit old_limit {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old_limit), 0);
  Spool spool(Options(max_bytes, 16384), "fresh-id");
  std::vector<uint64_t> on_disk;
  {
    // Writes past 8 KiB fail with EFBIG (not a signal) while the segment stays open.
    const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
    struct rlimit limit = old_limit;
    limit.rlim_cur = 8192;
    ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &limit), 0);
    for (uint64_t s = 1; s <= 200; ++s) {
      if (spool.Append(Report(s, 500))) on_disk.push_back(s);
    }
    ::setrlimit(RLIMIT_FSIZE, &old_limit);
    std::signal(SIGXFSZ, old_handler);
  }
  ASSERT_FALSE(on_disk.empty());
  EXPECT_EQ(on_disk, Range(1, on_disk.back()));
  EXPECT_EQ(spool.segments(), 1u);
  EXPECT_GT(spool.dropped_reports(), 0u);
  const auto left = Sequences(spool.Read(0, UINT64_MAX, 1000, nullptr));
  std::vector<uint64_t> expected = on_disk;
  const auto newest = Range(200 - spool.tail_reports() + 1, 200);
  expected.insert(expected.end(), newest.begin(), newest.end());
  EXPECT_EQ(left, expected) << "the disk's reports, then the newest of the tail";
  EXPECT_EQ(left.size() + spool.dropped_reports(), 200u);
  EXPECT_EQ(spool.unacknowledged(), left.size());
  spool.Acknowledge(on_disk.back());
  EXPECT_EQ(spool.unacknowledged(), spool.tail_reports());
  spool.Acknowledge(200);
  EXPECT_EQ(spool.unacknowledged(), 0u);
  // Writable again: the same segment goes on.
  EXPECT_TRUE(spool.Append(Report(201)));
  EXPECT_EQ(Sequences(spool.Read(200, UINT64_MAX, 10, nullptr)), Range(201, 201));
}

}  // namespace
}  // namespace spool_tail_test
}  // namespace accelmon
