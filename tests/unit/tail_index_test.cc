// The tail index (recording/tail_index.h): every node's latest recorded report found again after
// a restart, from `tail.index` and the records after the point it covers, on real files.
#include "recording/tail_index.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "recording/segment_writer.h"
#include "support/temp_dir.h"

namespace accelmon::recording {
namespace tail_index_test {
namespace {

namespace fs = std::filesystem;
constexpr int64_t kT0 = 1'700'000'000;

v1::NodeReport Report(const std::string& node, uint64_t sequence) {
  v1::NodeReport r;
  r.set_node(node);
  r.set_agent_instance_id("instance-" + node);
  r.set_sequence(sequence);
  r.mutable_timestamp()->set_seconds(kT0 + static_cast<int64_t>(sequence));
  // Some bulk, so that a few batches fill a small segment.
  r.set_agent_version(std::string(2000, static_cast<char>('a' + sequence % 26)));
  return r;
}

class TailIndex : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = testing::MakeTempDir("accelmon-tail-index"); }
  void TearDown() override { fs::remove_all(dir_); }

  RecordingOptions Options() const {
    RecordingOptions o;
    o.dir = dir_;
    o.segment_bytes = 64 << 10;  // a few batches each: the reports span several segments
    o.max_bytes = 0;
    o.compression = Compression::kNone;
    o.tail_index = true;
    return o;
  }

  // `quiet` reports once, first; a, b and c report `rounds` times, several times per batch.
  void Write(int rounds) {
    SegmentWriter writer(Options());
    Batch first;
    first.Add(Report("quiet", 1));
    writer.AppendBatch(first);
    writer.Sync();
    for (int round = 1; round <= rounds; ++round) {
      Batch batch;
      for (const char* node : {"a", "b", "c"}) {
        batch.Add(Report(node, 2 * round));
        batch.Add(Report(node, 2 * round + 1));  // the latest of this batch
      }
      writer.AppendBatch(batch);
      writer.Sync();
    }
  }

  // The sequences of the reports ReadLatestReports finds, by node.
  std::map<std::string, uint64_t> Latest(const RecoveredLocations& located, int64_t oldest_ns = 0) {
    last_ = ReadLatestReports(dir_, located.nodes, oldest_ns);
    std::map<std::string, uint64_t> out;
    for (const std::string& wire : last_.reports) {
      v1::NodeReport r;
      EXPECT_TRUE(r.ParseFromString(wire));
      out[r.node()] = r.sequence();
    }
    return out;
  }

  size_t Segments() const {
    size_t n = 0;
    for (const auto& e : fs::directory_iterator(dir_)) n += e.path().extension() == ".seg";
    return n;
  }

  std::string dir_;
  LatestReports last_;
};

const std::map<std::string, uint64_t> kAfterTwentyRounds = {
    {"quiet", 1}, {"a", 41}, {"b", 41}, {"c", 41}};

TEST_F(TailIndex, TheLatestReportOfEveryNodeComesBackAcrossSegments) {
  Write(20);
  ASSERT_GE(Segments(), 3u) << "the test wants reports in several segments";
  ASSERT_TRUE(fs::exists(dir_ + "/tail.index"));
  SegmentWriter reopened(Options());
  const RecoveredLocations& located = reopened.recovered_locations();
  EXPECT_EQ(located.index_problem, "");
  EXPECT_EQ(Latest(located), kAfterTwentyRounds);
  EXPECT_TRUE(last_.problems.empty());
  EXPECT_EQ(located.nodes.at("quiet").segment, 1u) << "the quiet node's report is in the first";
  EXPECT_EQ(located.nodes.at("a").time_ns, (kT0 + 41) * 1'000'000'000);
}

TEST_F(TailIndex, RecordsWrittenAfterTheIndexAreReadToo) {
  {
    SegmentWriter writer(Options());
    Batch first;
    first.Add(Report("quiet", 1));
    writer.AppendBatch(first);
    writer.Sync();  // the first sync writes the index
  }
  const std::string stale = dir_ + "/stale.index";
  fs::copy_file(dir_ + "/tail.index", stale);
  Write(20);
  // As after a crash a second after the index was written: the index lags the records.
  fs::copy_file(stale, dir_ + "/tail.index", fs::copy_options::overwrite_existing);
  const Watermarks scanned = RecoverWatermarks(dir_).watermarks;
  SegmentWriter reopened(Options());
  EXPECT_EQ(reopened.recovered_locations().index_problem, "");
  EXPECT_GT(reopened.recovered_locations().records_scanned, 20u);
  EXPECT_EQ(Latest(reopened.recovered_locations()), kAfterTwentyRounds);
  // Exactly-once rests on these: the index's watermarks, advanced by the reports after it, are
  // what reading the newest segment gives.
  EXPECT_EQ(reopened.recovered().watermarks, scanned);
  EXPECT_EQ(reopened.recovered().watermarks.at("a").sequence, 41u);
}

TEST_F(TailIndex, WatermarksFromTheIndexAreThoseOfTheNewestSegment) {
  Write(20);
  const Watermarks scanned = RecoverWatermarks(dir_).watermarks;
  SegmentWriter reopened(Options());
  EXPECT_EQ(reopened.recovered().segment, dir_ + "/tail.index");
  EXPECT_EQ(reopened.recovered().watermarks, scanned);
  EXPECT_EQ(scanned.size(), 4u);
}

TEST_F(TailIndex, WithoutAnIndexRestartsThatWroteNothingDoNotHideTheReports) {
  Write(20);
  for (int i = 0; i < 3; ++i) SegmentWriter idle(Options());  // each begins a header-only segment
  fs::remove(dir_ + "/tail.index");
  SegmentWriter reopened(Options());
  const auto latest = Latest(reopened.recovered_locations());
  EXPECT_EQ(latest.at("a"), 41u);
  EXPECT_EQ(latest.at("c"), 41u);
}

TEST_F(TailIndex, WithoutAnIndexOnlyTheNewestTwoSegmentsAreRead) {
  Write(20);
  fs::remove(dir_ + "/tail.index");
  SegmentWriter reopened(Options());
  EXPECT_EQ(reopened.recovered_locations().index_problem, "no tail.index");
  const auto latest = Latest(reopened.recovered_locations());
  EXPECT_EQ(latest.count("quiet"), 0u) << "its report is older than the newest two segments";
  EXPECT_EQ(latest.at("a"), 41u);
}

TEST_F(TailIndex, ADamagedIndexIsReportedAndNotTrusted) {
  Write(5);
  std::ofstream(dir_ + "/tail.index", std::ios::binary | std::ios::trunc) << "not an index";
  SegmentWriter reopened(Options());
  EXPECT_NE(reopened.recovered_locations().index_problem.find("tail.index is damaged"),
            std::string::npos)
      << reopened.recovered_locations().index_problem;
  EXPECT_EQ(Latest(reopened.recovered_locations()).at("a"), 11u);
}

TEST_F(TailIndex, NodesOlderThanTheCutOffAreLeftOutUnread) {
  Write(20);
  SegmentWriter reopened(Options());
  const auto latest = Latest(reopened.recovered_locations(), (kT0 + 2) * 1'000'000'000);
  EXPECT_EQ(latest.count("quiet"), 0u);
  EXPECT_EQ(last_.too_old, 1u);
  EXPECT_EQ(latest.size(), 3u);
}

TEST_F(TailIndex, ALostSegmentCostsOnlyItsNodes) {
  Write(20);
  fs::remove(SegmentFilePath(dir_, 1));
  SegmentWriter reopened(Options());
  const auto latest = Latest(reopened.recovered_locations());
  EXPECT_EQ(latest.count("quiet"), 0u);
  EXPECT_EQ(latest.size(), 3u);
  ASSERT_EQ(last_.problems.size(), 1u);
  EXPECT_NE(last_.problems[0].find("quiet"), std::string::npos) << last_.problems[0];
}

TEST_F(TailIndex, AWriterWithoutTheIndexWritesNone) {
  RecordingOptions o = Options();
  o.tail_index = false;
  {
    SegmentWriter writer(o);
    Batch batch;
    batch.Add(Report("a", 1));
    writer.AppendBatch(batch);
    writer.Sync();
  }
  EXPECT_FALSE(fs::exists(dir_ + "/tail.index"));
}

}  // namespace
}  // namespace tail_index_test
}  // namespace accelmon::recording
