#include "daemon/spool.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <thread>

namespace accelmon {
namespace {

namespace fs = std::filesystem;

class SpoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/accelmon-spool-test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }

  SpoolOptions Options(uint64_t max_bytes = uint64_t{256} << 20,
                       uint64_t segment_bytes = uint64_t{4} << 20) const {
    return SpoolOptions{.dir = dir_, .max_bytes = max_bytes, .segment_bytes = segment_bytes};
  }

  std::vector<std::string> SegmentFiles() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir_)) {
      if (e.path().extension() == ".seg") out.push_back(e.path().string());
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  std::string dir_;
};

v1::NodeReport Report(uint64_t sequence, size_t padding = 0) {
  v1::NodeReport r;
  r.set_node("node-a" + std::string(padding, 'x'));
  r.set_agent_instance_id("feedface00000001");
  r.set_sequence(sequence);
  r.mutable_timestamp()->set_seconds(static_cast<int64_t>(1'700'000'000 + sequence));
  return r;
}

std::vector<uint64_t> Sequences(const std::vector<std::shared_ptr<const v1::NodeReport>>& rs) {
  std::vector<uint64_t> out;
  for (const auto& r : rs) out.push_back(r->sequence());
  return out;
}

std::vector<uint64_t> Range(uint64_t first, uint64_t last) {
  std::vector<uint64_t> out;
  for (uint64_t s = first; s <= last; ++s) out.push_back(s);
  return out;
}

void WriteFile(const std::string& path, const std::string& data) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << data;
}

TEST_F(SpoolTest, WritesAndReadsBack) {
  Spool spool(Options(), "fresh-id");
  EXPECT_EQ(spool.instance_id(), "fresh-id");
  EXPECT_EQ(spool.last_sequence(), 0u);
  for (uint64_t s = 1; s <= 10; ++s) ASSERT_TRUE(spool.Append(Report(s)));
  EXPECT_EQ(spool.last_sequence(), 10u);
  EXPECT_EQ(spool.unacknowledged(), 10u);

  uint64_t scanned = 0;
  const auto all = spool.Read(0, UINT64_MAX, 100, &scanned);
  EXPECT_EQ(Sequences(all), Range(1, 10));
  EXPECT_EQ(scanned, 10u);
  EXPECT_EQ(all[3]->node(), "node-a");
  EXPECT_EQ(all[3]->timestamp().seconds(), 1'700'000'004);

  // A window, and a limit.
  EXPECT_EQ(Sequences(spool.Read(3, 7, 100, &scanned)), Range(4, 6));
  EXPECT_EQ(scanned, 6u);
  EXPECT_EQ(Sequences(spool.Read(0, UINT64_MAX, 4, &scanned)), Range(1, 4));
  EXPECT_EQ(scanned, 4u);
}

TEST_F(SpoolTest, ReopeningKeepsInstanceAndContinuesAfterWatermark) {
  {
    Spool spool(Options(), "first-id");
    for (uint64_t s = 1; s <= 10; ++s) ASSERT_TRUE(spool.Append(Report(s)));
    spool.Acknowledge(6);
  }  // closing persists the watermark
  Spool spool(Options(), "second-id");
  EXPECT_EQ(spool.instance_id(), "first-id");
  EXPECT_EQ(spool.acknowledged(), 6u);
  EXPECT_EQ(spool.last_sequence(), 10u);
  EXPECT_EQ(spool.unacknowledged(), 4u);
  EXPECT_EQ(Sequences(spool.Read(spool.acknowledged(), UINT64_MAX, 100, nullptr)), Range(7, 10));
  // New reports go to a new segment after the old ones.
  ASSERT_TRUE(spool.Append(Report(11)));
  EXPECT_EQ(Sequences(spool.Read(6, UINT64_MAX, 100, nullptr)), Range(7, 11));
}

TEST_F(SpoolTest, EverythingAcknowledgedStillContinuesTheSequence) {
  {
    Spool spool(Options(), "first-id");
    for (uint64_t s = 1; s <= 5; ++s) ASSERT_TRUE(spool.Append(Report(s)));
    spool.Acknowledge(5);
  }
  EXPECT_TRUE(SegmentFiles().empty()) << "settled segments are deleted at close";
  Spool spool(Options(), "second-id");
  EXPECT_EQ(spool.instance_id(), "first-id");
  EXPECT_EQ(spool.last_sequence(), 5u) << "from the state file alone";
  EXPECT_EQ(spool.unacknowledged(), 0u);
}

TEST_F(SpoolTest, TornTailAtEveryOffsetOfTheLastRecordIsACleanEnd) {
  std::string data;
  for (uint64_t s = 1; s <= 3; ++s) data += EncodeSpoolRecord(Report(s).SerializeAsString());
  const std::string last = EncodeSpoolRecord(Report(4).SerializeAsString());
  const std::string path = dir_ + "/00000000000000000001.seg";
  for (size_t cut = 0; cut <= last.size(); ++cut) {
    WriteFile(path, data + last.substr(0, cut));
    int records = 0;
    std::string error;
    const SegmentScan scan = ScanSegment(
        path, [&](std::string_view) { ++records; }, &error);
    SCOPED_TRACE("cut at " + std::to_string(cut));
    EXPECT_TRUE(error.empty());
    EXPECT_TRUE(scan.damage.empty()) << scan.damage;
    const bool whole = cut == last.size();
    EXPECT_EQ(records, whole ? 4 : 3);
    EXPECT_EQ(scan.valid_bytes, data.size() + (whole ? last.size() : 0));
    EXPECT_EQ(scan.skipped_bytes, whole ? 0 : cut);
  }

  // Through the spool: the torn record is ignored, the others come back, appends go on.
  WriteFile(path, data + last.substr(0, last.size() / 2));
  Spool spool(Options(), "fresh-id");
  EXPECT_EQ(spool.skipped_bytes_at_open(), last.size() / 2);
  EXPECT_EQ(spool.instance_id(), "feedface00000001") << "taken from the records (no state file)";
  EXPECT_EQ(spool.last_sequence(), 3u);
  ASSERT_TRUE(spool.Append(Report(4)));
  EXPECT_EQ(Sequences(spool.Read(0, UINT64_MAX, 100, nullptr)), Range(1, 4));
}

TEST_F(SpoolTest, FlippedByteStopsTheReaderAtThatRecord) {
  std::vector<std::string> records;
  for (uint64_t s = 1; s <= 5; ++s)
    records.push_back(EncodeSpoolRecord(Report(s).SerializeAsString()));
  std::string data;
  for (const auto& r : records) data += r;
  const size_t third = records[0].size() + records[1].size();
  data[third + 8 + 3] ^= 0x20;  // in the third record's payload
  const std::string path = dir_ + "/00000000000000000001.seg";
  WriteFile(path, data);

  std::vector<uint64_t> seen;
  std::string error;
  const SegmentScan scan = ScanSegment(
      path,
      [&](std::string_view payload) {
        v1::NodeReport r;
        ASSERT_TRUE(r.ParseFromArray(payload.data(), static_cast<int>(payload.size())));
        seen.push_back(r.sequence());
      },
      &error);
  EXPECT_EQ(seen, Range(1, 2));
  EXPECT_NE(scan.damage.find("checksum mismatch"), std::string::npos) << scan.damage;
  EXPECT_NE(scan.damage.find("offset " + std::to_string(third)), std::string::npos);
  EXPECT_EQ(scan.valid_bytes, third);
  EXPECT_EQ(scan.skipped_bytes, data.size() - third);

  // A later segment is still read.
  WriteFile(dir_ + "/00000000000000000002.seg", EncodeSpoolRecord(Report(6).SerializeAsString()));
  Spool spool(Options(), "fresh-id");
  EXPECT_EQ(spool.skipped_bytes_at_open(), data.size() - third);
  EXPECT_EQ(Sequences(spool.Read(0, UINT64_MAX, 100, nullptr)), (std::vector<uint64_t>{1, 2, 6}));
  EXPECT_EQ(spool.last_sequence(), 6u);
}

TEST_F(SpoolTest, ImplausibleLengthIsDamage) {
  std::string data = EncodeSpoolRecord(Report(1).SerializeAsString());
  data += std::string("\xff\xff\xff\x7f\0\0\0\0", 8) + "junk";
  const std::string path = dir_ + "/00000000000000000001.seg";
  WriteFile(path, data);
  int records = 0;
  const SegmentScan scan = ScanSegment(
      path, [&](std::string_view) { ++records; }, nullptr);
  EXPECT_EQ(records, 1);
  EXPECT_NE(scan.damage.find("implausible record length"), std::string::npos);
  EXPECT_EQ(scan.skipped_bytes, 12u);
}

TEST_F(SpoolTest, RotatesSegments) {
  Spool spool(Options(uint64_t{1} << 20, 4096), "fresh-id");
  for (uint64_t s = 1; s <= 40; ++s) ASSERT_TRUE(spool.Append(Report(s, 500)));
  EXPECT_GE(spool.segments(), 5u);
  EXPECT_EQ(SegmentFiles().size(), spool.segments());
  for (const auto& f : SegmentFiles()) EXPECT_LE(fs::file_size(f), 4096u) << f;
  EXPECT_EQ(Sequences(spool.Read(0, UINT64_MAX, 100, nullptr)), Range(1, 40));
  EXPECT_EQ(Sequences(spool.Read(25, UINT64_MAX, 100, nullptr)), Range(26, 40));
}

TEST_F(SpoolTest, DeletesAcknowledgedSegments) {
  {
    Spool spool(Options(uint64_t{1} << 20, 4096), "fresh-id");
    for (uint64_t s = 1; s <= 40; ++s) ASSERT_TRUE(spool.Append(Report(s, 500)));
    const size_t before = spool.segments();
    // The watermark is persisted (and segments deleted) at most once a second.
    std::this_thread::sleep_for(std::chrono::milliseconds(1100));
    spool.Acknowledge(20);
    EXPECT_LT(spool.segments(), before);
    EXPECT_EQ(SegmentFiles().size(), spool.segments());
    const auto left = spool.Read(0, UINT64_MAX, 100, nullptr);
    ASSERT_FALSE(left.empty());
    EXPECT_LE(left.front()->sequence(), 21u) << "nothing unacknowledged is deleted";
    EXPECT_GT(left.front()->sequence(), 1u);
    spool.Acknowledge(40);
  }
  EXPECT_TRUE(SegmentFiles().empty());
  Spool spool(Options(), "fresh-id");
  EXPECT_EQ(spool.last_sequence(), 40u);
  EXPECT_TRUE(spool.Read(0, UINT64_MAX, 100, nullptr).empty());
}

TEST_F(SpoolTest, OverMaxBytesDropsTheOldestSegment) {
  const uint64_t max_bytes = 16384;
  Spool spool(Options(max_bytes, 4096), "fresh-id");
  for (uint64_t s = 1; s <= 100; ++s) {
    ASSERT_TRUE(spool.Append(Report(s, 500)));
    EXPECT_LE(spool.bytes(), max_bytes);
  }
  EXPECT_GT(spool.dropped_reports(), 0u);
  const auto left = Sequences(spool.Read(0, UINT64_MAX, 1000, nullptr));
  ASSERT_FALSE(left.empty());
  EXPECT_EQ(left, Range(left.front(), 100)) << "the newest are kept";
  EXPECT_EQ(left.size() + spool.dropped_reports(), 100u) << "every report kept or counted";
  EXPECT_EQ(spool.dropped_through(), left.front() - 1);
  EXPECT_EQ(spool.unacknowledged(), left.size());
}

TEST_F(SpoolTest, StateFileRoundTrip) {
  std::string error;
  EXPECT_TRUE(ReadSpoolState(dir_, &error).instance_id.empty());
  EXPECT_NE(error.find("missing"), std::string::npos);

  ASSERT_TRUE(WriteSpoolState(dir_, {"0123456789abcdef", 12345678901234}, &error)) << error;
  const SpoolState state = ReadSpoolState(dir_, &error);
  EXPECT_EQ(state.instance_id, "0123456789abcdef");
  EXPECT_EQ(state.acknowledged, 12345678901234u);
  EXPECT_FALSE(fs::exists(dir_ + "/state.tmp")) << "written by rename";

  WriteFile(dir_ + "/state", "accelmon-spool 1\ninstance x\nacknowledged twelve\n");
  error.clear();
  EXPECT_TRUE(ReadSpoolState(dir_, &error).instance_id.empty());
  EXPECT_NE(error.find("not a valid spool state file"), std::string::npos);
}

TEST_F(SpoolTest, OneAgentPerDirectory) {
  Spool spool(Options(), "fresh-id");
  EXPECT_THROW(Spool(Options(), "other-id"), std::runtime_error);
}

TEST_F(SpoolTest, UnusableDirectoryIsAClearError) {
  WriteFile(dir_ + "/file", "x");
  try {
    Spool spool(SpoolOptions{.dir = dir_ + "/file/spool"}, "fresh-id");
    FAIL() << "expected an error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot create spool directory"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace accelmon
