#include "daemon/agent/spool.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <thread>
#include <utility>

#include "accelmon/v1/recording.pb.h"
#include "recording/log_format.h"
#include "recording/log_reader.h"
#include "recording/record_codec.h"
#include "support/report_sequences.h"
#include "support/temp_dir.h"
#include "support/wait.h"

namespace accelmon {
namespace spool_test {
namespace {

using testing::Range;
using testing::Sequences;

namespace fs = std::filesystem;

class SpoolTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = ::accelmon::testing::MakeTempDir("accelmon-spool-test"); }
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

// A segment as the spool writes it: the header, then one record per report. `starts` gets the
// offset of each report's record.
std::string SpoolSegment(uint64_t first, uint64_t last, recording::LogWriter* writer,
                         std::vector<uint64_t>* starts = nullptr) {
  std::string data;
  AppendSpoolSegmentHeader(writer, &data);
  for (uint64_t s = first; s <= last; ++s) {
    if (starts) starts->push_back(data.size());
    AppendSpoolReport(Report(s).SerializeAsString(), writer, &data);
  }
  return data;
}

std::string SpoolSegment(uint64_t first, uint64_t last, std::vector<uint64_t>* starts = nullptr) {
  recording::LogWriter writer;
  return SpoolSegment(first, last, &writer, starts);
}

TEST_F(SpoolTest, SegmentsAreInTheRecordingFormat) {
  {
    Spool spool(Options(), "fresh-id");
    for (uint64_t s = 1; s <= 3; ++s) ASSERT_TRUE(spool.Append(Report(s)));
  }
  const std::vector<std::string> files = SegmentFiles();
  ASSERT_EQ(files.size(), 1u);
  std::ifstream in(files[0], std::ios::binary);
  const std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  recording::LogReader reader(data, recording::ReadMode::kSalvage);
  std::string_view record;
  std::string scratch, storage, error;
  std::vector<recording::RecordKind> kinds;
  std::vector<uint64_t> sequences;
  while (reader.ReadRecord(&record, &scratch)) {
    recording::DecodedRecord decoded;
    ASSERT_TRUE(recording::DecodeRecord(record, &storage, &decoded, &error)) << error;
    EXPECT_EQ(decoded.compression, recording::Compression::kNone);
    kinds.push_back(decoded.kind);
    if (decoded.kind == recording::RecordKind::kSegmentHeader) {
      v1::SegmentHeader header;
      ASSERT_TRUE(
          header.ParseFromArray(decoded.body.data(), static_cast<int>(decoded.body.size())));
      EXPECT_EQ(header.format_version(), recording::kFormatVersion);
      EXPECT_EQ(header.writer(), "agent-spool");
      EXPECT_GT(header.created().seconds(), 1'700'000'000);
    } else {
      v1::ReportBatch batch;
      ASSERT_TRUE(batch.ParseFromArray(decoded.body.data(), static_cast<int>(decoded.body.size())));
      ASSERT_EQ(batch.reports_size(), 1) << "one report per record";
      sequences.push_back(batch.reports(0).sequence());
    }
  }
  EXPECT_TRUE(reader.damage().empty());
  EXPECT_EQ(reader.torn_tail_bytes(), 0u);
  EXPECT_EQ(kinds, (std::vector<recording::RecordKind>{
                       recording::RecordKind::kSegmentHeader, recording::RecordKind::kReportBatch,
                       recording::RecordKind::kReportBatch, recording::RecordKind::kReportBatch}));
  EXPECT_EQ(sequences, Range(1, 3));
}

TEST_F(SpoolTest, TornTailAtEveryOffsetOfTheLastRecordIsACleanEnd) {
  recording::LogWriter writer;
  const std::string data = SpoolSegment(1, 3, &writer);
  std::string last;
  AppendSpoolReport(Report(4).SerializeAsString(), &writer, &last);
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
    EXPECT_EQ(scan.records, whole ? 4u : 3u);
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
  std::vector<uint64_t> starts;
  std::string data = SpoolSegment(1, 5, &starts);
  const uint64_t third = starts[2];
  data[third + recording::kHeaderSize + 5] ^= 0x20;  // in the third report's record
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
  WriteFile(dir_ + "/00000000000000000002.seg", SpoolSegment(6, 6));
  Spool spool(Options(), "fresh-id");
  EXPECT_EQ(spool.skipped_bytes_at_open(), data.size() - third);
  EXPECT_EQ(Sequences(spool.Read(0, UINT64_MAX, 100, nullptr)), (std::vector<uint64_t>{1, 2, 6}));
  EXPECT_EQ(spool.last_sequence(), 6u);
}

TEST_F(SpoolTest, UnreadableRecordIsDamage) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {std::string("\x07\x00junk", 6), "unknown record kind 7"},
      {recording::EncodeRecord(recording::RecordKind::kReportBatch, std::string("\x12\x00", 2),
                               recording::Compression::kNone),
       "malformed report batch"},
  };
  for (const auto& [bad, reason] : cases) {
    recording::LogWriter writer;
    std::string data = SpoolSegment(1, 1, &writer);
    const uint64_t offset = data.size();
    writer.AddRecord(bad, &data);
    AppendSpoolReport(Report(2).SerializeAsString(), &writer, &data);
    const std::string path = dir_ + "/00000000000000000001.seg";
    WriteFile(path, data);
    int records = 0;
    const SegmentScan scan = ScanSegment(
        path, [&](std::string_view) { ++records; }, nullptr);
    EXPECT_EQ(records, 1);
    EXPECT_NE(scan.damage.find(reason), std::string::npos) << scan.damage;
    EXPECT_NE(scan.damage.find("offset " + std::to_string(offset)), std::string::npos)
        << scan.damage;
    EXPECT_EQ(scan.valid_bytes, offset);
    EXPECT_EQ(scan.skipped_bytes, data.size() - offset);
  }
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
    // The watermark is persisted (and segments deleted) at most once a second: acknowledge until
    // it is, rather than sleeping past the second.
    EXPECT_TRUE(testing::WaitFor(
        [&] {
          spool.Acknowledge(20);
          return spool.segments() < before;
        },
        std::chrono::seconds(10)));
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

TEST_F(SpoolTest, AcknowledgedSegmentsAreDeletedEvenWhenTheStateCannotBeWritten) {
  {
    Spool spool(Options(uint64_t{1} << 20, 4096), "fresh-id");
    for (uint64_t s = 1; s <= 40; ++s) ASSERT_TRUE(spool.Append(Report(s, 500)));
    const size_t before = spool.segments();
    // A directory where the state's temporary file goes: every state write fails (as on a full
    // disk, where writing the state fails and deleting segments is what frees space).
    fs::create_directory(dir_ + "/state.tmp");
    EXPECT_TRUE(testing::WaitFor(
        [&] {
          spool.Acknowledge(20);
          return spool.segments() < before;
        },
        std::chrono::seconds(10)));
    const auto left = spool.Read(0, UINT64_MAX, 100, nullptr);
    ASSERT_FALSE(left.empty());
    EXPECT_LE(left.front()->sequence(), 21u) << "nothing unacknowledged is deleted";
    EXPECT_EQ(SegmentFiles().size(), spool.segments());
    // Everything acknowledged: the newest segment stays while the state is unwritten.
    EXPECT_TRUE(testing::WaitFor(
        [&] {
          spool.Acknowledge(40);
          return spool.segments() == 1;
        },
        std::chrono::seconds(10)));
  }
  // After a restart (the state says less than was acknowledged), sequences continue after the
  // newest record: none is reused.
  fs::remove(dir_ + "/state.tmp");
  Spool spool(Options(), "fresh-id");
  EXPECT_EQ(spool.last_sequence(), 40u);
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
}  // namespace spool_test
}  // namespace accelmon
