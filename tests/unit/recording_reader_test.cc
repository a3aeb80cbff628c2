#include "recording/recording_reader.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "accelmon/v1/recording.pb.h"
#include "proto/time_format.h"
#include "recording/log_format.h"
#include "recording/log_writer.h"
#include "recording/record_codec.h"
#include "support/temp_dir.h"

namespace accelmon::recording {
namespace recording_reader_test {
namespace {

namespace fs = std::filesystem;

v1::NodeReport Report(const std::string& node, uint64_t sequence, int devices = 2) {
  v1::NodeReport r;
  r.set_node(node);
  r.set_agent_instance_id("instance-" + node);
  r.set_sequence(sequence);
  r.mutable_timestamp()->set_seconds(static_cast<int64_t>(1'700'000'000 + sequence));
  r.mutable_timestamp()->set_nanos(250'000'000);
  for (int i = 0; i < devices; ++i) {
    v1::DeviceTelemetry* d = r.add_devices();
    d->mutable_identity()->set_index(static_cast<uint32_t>(i));
    d->mutable_identity()->set_uuid("GPU-" + node + "-" + std::to_string(i));
    d->mutable_memory()->set_used_bytes(sequence * 1000 + static_cast<uint64_t>(i));
  }
  return r;
}

// Builds segment bytes with LogWriter and the record codec directly, as a writer would.
class SegmentBuilder {
 public:
  explicit SegmentBuilder(std::string writer = "test", Compression compression = Compression::kNone)
      : compression_(compression) {
    v1::SegmentHeader header;
    header.set_format_version(kFormatVersion);
    header.set_writer(std::move(writer));
    AddRecord(
        EncodeRecord(RecordKind::kSegmentHeader, header.SerializeAsString(), Compression::kNone));
  }

  SegmentBuilder& Batch(const std::vector<v1::NodeReport>& reports) {
    std::string body;
    for (const v1::NodeReport& r : reports) AppendReportToBatch(r.SerializeAsString(), &body);
    AddRecord(EncodeRecord(RecordKind::kReportBatch, body, compression_));
    return *this;
  }

  // A record exactly as given (for records the codec would not produce).
  SegmentBuilder& AddRecord(const std::string& record) {
    log_.AddRecord(record, &bytes_);
    return *this;
  }

  const std::string& bytes() const { return bytes_; }

 private:
  const Compression compression_;
  LogWriter log_;
  std::string bytes_;
};

class RecordingReaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::accelmon::testing::MakeTempDir("accelmon-recording-reader-test");
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Write(const std::string& name, const std::string& bytes) const {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }

  static std::string SegmentName(uint64_t index) {
    std::string digits = std::to_string(index);
    return std::string(20 - digits.size(), '0') + digits + ".seg";
  }

  // Every report's "node/sequence", in the order read.
  static std::vector<std::string> ReadAll(RecordingReader& reader,
                                          std::vector<ReportOrigin>* origins = nullptr) {
    std::vector<std::string> out;
    ReportOrigin origin;
    while (const v1::NodeReport* r = reader.Next(&origin)) {
      out.push_back(r->node() + "/" + std::to_string(r->sequence()));
      if (origins != nullptr) origins->push_back(origin);
    }
    return out;
  }

  std::string dir_;
};

TEST_F(RecordingReaderTest, ReadsSegmentsInIndexOrderAndIgnoresOtherFiles) {
  // Written out of order, with a gap in the indexes, beside a spool's state and lock files.
  Write(SegmentName(10), SegmentBuilder("exporter").Batch({Report("b", 3)}).bytes());
  Write(SegmentName(2), SegmentBuilder("exporter")
                            .Batch({Report("a", 1), Report("b", 1)})
                            .Batch({Report("a", 2), Report("b", 2)})
                            .bytes());
  Write("lock", "");
  Write("state", "not a segment");
  Write("00000000000000000003.seg.tmp", "junk");

  RecordingReader reader(dir_);
  EXPECT_EQ(reader.format(), InputFormat::kDirectory);
  std::vector<ReportOrigin> origins;
  EXPECT_EQ(ReadAll(reader, &origins),
            (std::vector<std::string>{"a/1", "b/1", "a/2", "b/2", "b/3"}));
  const ReadSummary& s = reader.summary();
  EXPECT_TRUE(s.clean());
  EXPECT_TRUE(s.torn_tails.empty());
  ASSERT_EQ(s.segments.size(), 2u);
  EXPECT_EQ(fs::path(s.segments[0].path).filename(), SegmentName(2));
  EXPECT_EQ(s.segments[0].writer, "exporter");
  EXPECT_TRUE(s.segments[0].header);
  EXPECT_EQ(s.segments[0].records, 2u);
  EXPECT_EQ(s.segments[0].reports, 4u);
  EXPECT_EQ(*s.segments[0].first_time_ns, 1'700'000'001'250'000'000);
  EXPECT_EQ(*s.segments[0].last_time_ns, 1'700'000'002'250'000'000);
  EXPECT_EQ(s.segments[1].reports, 1u);
  EXPECT_EQ(s.reports, 5u);
  EXPECT_EQ(s.records, 3u);
  EXPECT_EQ(origins.back().file, s.segments[1].path);
  EXPECT_EQ(reader.bytes_done(), reader.bytes_total());
}

TEST_F(RecordingReaderTest, ReadsCompressedBatches) {
  std::vector<v1::NodeReport> batch;
  for (uint64_t seq = 1; seq <= 100; ++seq) batch.push_back(Report("n", seq, 8));
  const std::string path =
      Write(SegmentName(1), SegmentBuilder("exporter", Compression::kZstd).Batch(batch).bytes());
  RecordingReader reader(path);
  EXPECT_EQ(reader.format(), InputFormat::kSegment);
  uint64_t n = 0;
  while (const v1::NodeReport* r = reader.Next()) {
    ++n;
    ASSERT_EQ(r->devices_size(), 8);
    EXPECT_EQ(r->devices(7).memory().used_bytes(), n * 1000 + 7);
  }
  EXPECT_EQ(n, 100u);
  // The uncompressed reports are larger than the segment that holds them.
  EXPECT_GT(reader.summary().segments[0].report_bytes, reader.summary().bytes);
}

TEST_F(RecordingReaderTest, DamageInTheMiddleCostsOnlyItsBlockAndIsReportedPrecisely) {
  SegmentBuilder builder;
  constexpr uint64_t kReports = 600;  // one per record, several blocks' worth
  for (uint64_t seq = 1; seq <= kReports; ++seq) builder.Batch({Report("n", seq, 8)});
  std::string bytes = builder.bytes();
  ASSERT_GT(bytes.size(), 3 * kBlockSize);
  // Overwrite 64 bytes inside the second block, as `dd conv=notrunc` would.
  const uint64_t at = kBlockSize + 1000;
  for (uint64_t i = 0; i < 64; ++i) bytes[at + i] = '\x5a';
  const std::string path = Write(SegmentName(1), bytes);

  RecordingReader reader(dir_);
  const std::vector<std::string> got = ReadAll(reader);
  const ReadSummary& s = reader.summary();
  ASSERT_FALSE(s.clean());
  EXPECT_EQ(s.damage[0].file, path);
  EXPECT_GE(s.damage[0].offset, kBlockSize);
  EXPECT_LE(s.damage[0].offset, at);
  EXPECT_GT(s.damage[0].bytes, 0u);
  EXPECT_FALSE(s.damage[0].reason.empty());
  EXPECT_EQ(s.damaged_bytes(), s.segments[0].damaged_bytes);
  // Only the records touching the second block are gone: the reports before and after remain.
  EXPECT_LT(got.size(), kReports);
  EXPECT_GT(got.size(), kReports * 2 / 3);
  EXPECT_EQ(got.front(), "n/1");
  EXPECT_EQ(got.back(), "n/" + std::to_string(kReports));
}

TEST_F(RecordingReaderTest, TornTailIsANoteNotDamage) {
  const std::string full =
      SegmentBuilder().Batch({Report("n", 1)}).Batch({Report("n", 2, 8)}).bytes();
  const std::string path = Write(SegmentName(1), full.substr(0, full.size() - 10));
  RecordingReader reader(dir_);
  EXPECT_EQ(ReadAll(reader), (std::vector<std::string>{"n/1"}));
  const ReadSummary& s = reader.summary();
  EXPECT_TRUE(s.clean());
  ASSERT_EQ(s.torn_tails.size(), 1u);
  EXPECT_EQ(s.torn_tails[0].file, path);
  EXPECT_GT(s.torn_tails[0].bytes, 0u);
  EXPECT_EQ(s.torn_tails[0].offset + s.torn_tails[0].bytes, full.size() - 10);
  EXPECT_EQ(s.segments[0].torn_tail_bytes, s.torn_tails[0].bytes);
}

TEST_F(RecordingReaderTest, UndecodableRecordsCostOnlyThemselves) {
  std::string unknown_kind = EncodeRecord(RecordKind::kReportBatch, "", Compression::kNone);
  unknown_kind[0] = 7;
  std::string bad_zstd(1, static_cast<char>(RecordKind::kReportBatch));
  bad_zstd += static_cast<char>(Compression::kZstd);
  bad_zstd += "this is not a zstd frame";
  Write(SegmentName(1), SegmentBuilder()
                            .Batch({Report("n", 1)})
                            .AddRecord(unknown_kind)
                            .Batch({Report("n", 2)})
                            .AddRecord(bad_zstd)
                            .Batch({Report("n", 3)})
                            .bytes());
  RecordingReader reader(dir_);
  EXPECT_EQ(ReadAll(reader), (std::vector<std::string>{"n/1", "n/2", "n/3"}));
  const ReadSummary& s = reader.summary();
  ASSERT_EQ(s.damage.size(), 2u);
  EXPECT_NE(s.damage[0].reason.find("kind"), std::string::npos) << s.damage[0].reason;
  EXPECT_NE(s.damage[1].reason.find("zstd"), std::string::npos) << s.damage[1].reason;
  EXPECT_LT(s.damage[0].offset, s.damage[1].offset);
  EXPECT_EQ(s.damage[0].bytes, unknown_kind.size());
}

TEST_F(RecordingReaderTest, UnparseableReportInABatchCostsOnlyItself) {
  std::string body;
  AppendReportToBatch(Report("n", 1).SerializeAsString(), &body);
  AppendReportToBatch("\xff\xff\xff", &body);  // a truncated varint: not a NodeReport
  AppendReportToBatch(Report("n", 2).SerializeAsString(), &body);
  Write(SegmentName(1),
        SegmentBuilder()
            .AddRecord(EncodeRecord(RecordKind::kReportBatch, body, Compression::kNone))
            .bytes());
  RecordingReader reader(dir_);
  EXPECT_EQ(ReadAll(reader), (std::vector<std::string>{"n/1", "n/2"}));
  ASSERT_EQ(reader.summary().damage.size(), 1u);
  EXPECT_EQ(reader.summary().damage[0].bytes, 3u);
}

TEST_F(RecordingReaderTest, PointInTimeStopsAtTheFirstDamage) {
  SegmentBuilder builder;
  for (uint64_t seq = 1; seq <= 600; ++seq) builder.Batch({Report("n", seq, 8)});
  std::string bytes = builder.bytes();
  bytes[kBlockSize + 1000] ^= 0x01;
  Write(SegmentName(1), bytes);
  Write(SegmentName(2), SegmentBuilder().Batch({Report("n", 601)}).bytes());
  RecordingReader reader(dir_, {.mode = ReadMode::kPointInTime});
  const auto got = ReadAll(reader);
  EXPECT_EQ(reader.summary().damage.size(), 1u);
  EXPECT_FALSE(got.empty());
  EXPECT_NE(got.back(), "n/601");
  EXPECT_LT(got.size(), 600u);
}

TEST_F(RecordingReaderTest, ReadsJsonLinesWithBadLinesReportedByLine) {
  const std::string path = Write("in.jsonl",
                                 "{\"node\":\"a\",\"agentInstanceId\":\"i\",\"sequence\":\"1\","
                                 "\"timestamp\":\"2024-05-01T03:00:00Z\"}\n"
                                 "\n"
                                 "{\"node\":\"a\",\"sequence\":\n"
                                 "{\"node\":\"a\",\"agentInstanceId\":\"i\",\"sequence\":\"2\","
                                 "\"timestamp\":\"2024-05-01T03:00:01Z\"}\n");
  RecordingReader reader(path);
  EXPECT_EQ(reader.format(), InputFormat::kJsonLines);
  std::vector<ReportOrigin> origins;
  EXPECT_EQ(ReadAll(reader, &origins), (std::vector<std::string>{"a/1", "a/2"}));
  ASSERT_EQ(origins.size(), 2u);
  EXPECT_EQ(origins[0].line, 1u);
  EXPECT_EQ(origins[1].line, 4u);
  const ReadSummary& s = reader.summary();
  ASSERT_EQ(s.damage.size(), 1u);
  EXPECT_EQ(s.damage[0].file, path);
  EXPECT_EQ(s.damage[0].line, 3u);
  EXPECT_EQ(s.reports, 2u);
  EXPECT_EQ(s.segments[0].first_time_ns, 1714532400LL * 1'000'000'000);
  EXPECT_EQ(reader.bytes_done(), reader.bytes_total());
}

TEST_F(RecordingReaderTest, DetectsJsonLinesByContent) {
  const std::string path =
      Write("export.txt", "  {\"node\":\"a\",\"agentInstanceId\":\"i\",\"sequence\":\"1\"}\n");
  RecordingReader reader(path);
  EXPECT_EQ(reader.format(), InputFormat::kJsonLines);
  EXPECT_EQ(ReadAll(reader), (std::vector<std::string>{"a/1"}));
}

TEST_F(RecordingReaderTest, DetectsASegmentByItsHeader) {
  const std::string path = Write("copy.bin", SegmentBuilder().Batch({Report("n", 1)}).bytes());
  RecordingReader reader(path);
  EXPECT_EQ(reader.format(), InputFormat::kSegment);
  EXPECT_EQ(ReadAll(reader), (std::vector<std::string>{"n/1"}));
}

TEST_F(RecordingReaderTest, RefusesWhatIsNotARecording) {
  EXPECT_THROW(RecordingReader(dir_ + "/missing"), RecordingError);
  EXPECT_THROW(RecordingReader{dir_}, RecordingError);  // no segments
  const std::string binary = Write("random.bin", std::string("\x01\x02\x03\x04garbage", 11));
  try {
    RecordingReader reader(binary);
    FAIL() << "read a random file";
  } catch (const RecordingError& e) {
    EXPECT_NE(std::string(e.what()).find("not a recording"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(binary), std::string::npos) << e.what();
  }
}

TEST_F(RecordingReaderTest, ASegmentFromANewerFormatIsReportedNotMisread) {
  v1::SegmentHeader header;
  header.set_format_version(kFormatVersion + 1);
  std::string bytes;
  LogWriter log;
  log.AddRecord(
      EncodeRecord(RecordKind::kSegmentHeader, header.SerializeAsString(), Compression::kNone),
      &bytes);
  log.AddRecord(EncodeRecord(RecordKind::kReportBatch, "", Compression::kNone), &bytes);
  Write(SegmentName(1), bytes);
  Write(SegmentName(2), SegmentBuilder().Batch({Report("n", 1)}).bytes());
  RecordingReader reader(dir_);
  EXPECT_EQ(ReadAll(reader), (std::vector<std::string>{"n/1"}));
  ASSERT_EQ(reader.summary().damage.size(), 1u);
  EXPECT_NE(reader.summary().damage[0].reason.find("version"), std::string::npos);
}

TEST(FormatRfc3339Test, Rfc3339WithMilliseconds) {
  EXPECT_EQ(FormatRfc3339(1714532400LL * 1'000'000'000 + 123'456'789), "2024-05-01T03:00:00.123Z");
  EXPECT_EQ(FormatRfc3339(0), "1970-01-01T00:00:00.000Z");
}

TEST(IsSegmentFileNameTest, TwentyDigitsAndTheExtension) {
  EXPECT_TRUE(IsSegmentFileName("00000000000000000001.seg"));
  EXPECT_FALSE(IsSegmentFileName("0000000000000000001.seg"));
  EXPECT_FALSE(IsSegmentFileName("0000000000000000000a.seg"));
  EXPECT_FALSE(IsSegmentFileName("00000000000000000001.seg.tmp"));
  EXPECT_FALSE(IsSegmentFileName("state"));
}

}  // namespace
}  // namespace recording_reader_test
}  // namespace accelmon::recording
