// Format version 2: a zstd dictionary per segment, in its header (docs/recording-format.md).
// The writer makes it from a segment's first reports and begins the next segment with it; readers
// decode each record with its segment's dictionary, still losing only the records damage touches,
// and still read version 1 recordings (tests/fixtures/recordings/v1, written before version 2).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "accelmon/v1/recording.pb.h"
#include "recording/log_format.h"
#include "recording/log_reader.h"
#include "recording/log_writer.h"
#include "recording/record_codec.h"
#include "recording/recording_reader.h"
#include "recording/segment_writer.h"
#include "recording/tail_index.h"
#include "support/temp_dir.h"

namespace accelmon::recording {
namespace recording_dictionary_test {
namespace {

namespace fs = std::filesystem;

const std::string kVersion1Fixture = std::string(ACCELMON_FIXTURES_DIR) + "/recordings/v1";

// A report much like a real one: 8 devices with a handful of numbers, names repeated in every one.
v1::NodeReport Report(const std::string& node, uint64_t sequence) {
  v1::NodeReport r;
  r.set_node(node);
  r.set_agent_instance_id("instance-" + node);
  r.set_sequence(sequence);
  r.mutable_timestamp()->set_seconds(static_cast<int64_t>(1'700'000'000 + sequence));
  for (uint32_t i = 0; i < 8; ++i) {
    v1::DeviceTelemetry* d = r.add_devices();
    d->mutable_identity()->set_index(i);
    d->mutable_identity()->set_uuid("GPU-" + node + "-0000-1111-2222-" + std::to_string(i));
    d->mutable_memory()->set_used_bytes(sequence * 7919 + i * 104729);
    d->mutable_memory()->set_total_bytes(uint64_t{80} << 30);
  }
  return r;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream buf;
  buf << in.rdbuf();
  return std::move(buf).str();
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// One record of a segment: where it is, and what it is.
struct RawRecord {
  uint64_t offset = 0;
  std::string record;
};

std::vector<RawRecord> RawRecords(const std::string& path) {
  const std::string data = ReadFile(path);
  LogReader reader(data, ReadMode::kPointInTime);
  std::vector<RawRecord> out;
  std::string_view record;
  std::string scratch;
  while (reader.ReadRecord(&record, &scratch)) {
    out.push_back(RawRecord{.offset = reader.record_offset(), .record = std::string(record)});
  }
  return out;
}

v1::SegmentHeader HeaderOf(const std::string& path) {
  const std::vector<RawRecord> records = RawRecords(path);
  EXPECT_FALSE(records.empty()) << path;
  if (records.empty()) return {};
  std::string storage;
  std::string error;
  DecodedRecord decoded;
  EXPECT_TRUE(DecodeRecord(records[0].record, &storage, &decoded, &error)) << error;
  EXPECT_EQ(decoded.kind, RecordKind::kSegmentHeader);
  v1::SegmentHeader header;
  EXPECT_TRUE(header.ParseFromArray(decoded.body.data(), static_cast<int>(decoded.body.size())));
  return header;
}

// "node/sequence" of every report read, and the summary.
std::vector<std::string> ReadAll(const std::string& input, ReadSummary* summary = nullptr) {
  RecordingReader reader(input);
  std::vector<std::string> out;
  while (const v1::NodeReport* r = reader.Next()) {
    out.push_back(r->node() + "/" + std::to_string(r->sequence()));
  }
  if (summary != nullptr) *summary = reader.summary();
  return out;
}

class RecordingDictionaryTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = ::accelmon::testing::MakeTempDir("accelmon-dictionary-test"); }
  void TearDown() override { fs::remove_all(dir_); }

  // Small samples and dictionary, so that a few dozen reports are enough.
  RecordingOptions Options() const {
    RecordingOptions o;
    o.dir = dir_;
    o.dictionary_bytes = 8 << 10;
    o.dictionary_sample_bytes = 24 << 10;
    return o;
  }

  // `count` reports of one node, one record each (a lone node's group commits).
  std::vector<std::string> WriteLoneNode(uint64_t count) {
    std::vector<std::string> sent;
    SegmentWriter writer(Options(), Watermarks{});
    for (uint64_t seq = 1; seq <= count; ++seq) {
      Batch batch;
      batch.Add(Report("lone", seq));
      writer.AppendBatch(batch);
      writer.Sync();
      sent.push_back("lone/" + std::to_string(seq));
    }
    stats_ = writer.stats();
    return sent;
  }

  std::vector<std::string> Segments() const { return ListSegments(dir_); }

  std::string dir_;
  SegmentWriterStats stats_;
};

TEST_F(RecordingDictionaryTest, ReadsAVersion1RecordingWrittenBeforeDictionaries) {
  ASSERT_TRUE(fs::is_directory(kVersion1Fixture)) << kVersion1Fixture;
  const std::vector<std::string> segments = ListSegments(kVersion1Fixture);
  ASSERT_FALSE(segments.empty());
  for (const std::string& segment : segments) {
    const v1::SegmentHeader header = HeaderOf(segment);
    EXPECT_EQ(header.format_version(), 1u) << segment;
    EXPECT_TRUE(header.zstd_dictionary().empty());
  }
  ReadSummary summary;
  const std::vector<std::string> reports = ReadAll(kVersion1Fixture, &summary);
  EXPECT_TRUE(summary.clean()) << summary.damage.front().reason;
  EXPECT_TRUE(summary.torn_tails.empty());
  EXPECT_GT(summary.records, 0u);
  // `accelmon simulate --nodes 1 --duration 2m`: one node, a report a second, in order.
  ASSERT_EQ(reports.size(), 120u);
  for (size_t i = 0; i < reports.size(); ++i) {
    EXPECT_EQ(reports[i].substr(0, reports[i].find('/')), "sim-0");
  }
  // Recovery (what a restarted exporter does) reads it too.
  const RecoveredWatermarks recovered = RecoverWatermarks(kVersion1Fixture);
  EXPECT_TRUE(recovered.damage.empty());
  ASSERT_EQ(recovered.watermarks.count("sim-0"), 1u);
}

TEST_F(RecordingDictionaryTest, AWriterContinuesAVersion1RecordingWithVersion2Segments) {
  fs::copy(kVersion1Fixture, dir_, fs::copy_options::recursive);
  const std::vector<std::string> old_reports = ReadAll(dir_);
  const size_t old_segments = Segments().size();
  {
    SegmentWriter writer(Options());  // recovers the watermarks from the version 1 segments
    EXPECT_TRUE(writer.recovered().damage.empty());
    EXPECT_EQ(writer.watermarks().count("sim-0"), 1u);
    for (uint64_t seq = 1; seq <= 80; ++seq) {
      Batch batch;
      batch.Add(Report("lone", seq));
      writer.AppendBatch(batch);
    }
  }
  ReadSummary summary;
  const std::vector<std::string> reports = ReadAll(dir_, &summary);
  EXPECT_TRUE(summary.clean());
  ASSERT_EQ(reports.size(), old_reports.size() + 80);
  EXPECT_TRUE(std::equal(old_reports.begin(), old_reports.end(), reports.begin()));
  const std::vector<std::string> segments = Segments();
  ASSERT_GT(segments.size(), old_segments);
  EXPECT_EQ(HeaderOf(segments[0]).format_version(), 1u);
  EXPECT_EQ(HeaderOf(segments.back()).format_version(), kFormatVersion);
  EXPECT_FALSE(HeaderOf(segments.back()).zstd_dictionary().empty());
}

TEST_F(RecordingDictionaryTest, TheFirstSegmentEndsOnceSampledAndTheNextCarriesTheDictionary) {
  const std::vector<std::string> sent = WriteLoneNode(200);
  const std::vector<std::string> segments = Segments();
  ASSERT_EQ(segments.size(), 2u);
  const v1::SegmentHeader first = HeaderOf(segments[0]);
  const v1::SegmentHeader second = HeaderOf(segments[1]);
  EXPECT_EQ(first.format_version(), kFormatVersion);
  EXPECT_TRUE(first.zstd_dictionary().empty());
  EXPECT_FALSE(second.zstd_dictionary().empty());
  EXPECT_LE(second.zstd_dictionary().size(), Options().dictionary_bytes);
  EXPECT_EQ(stats_.dictionaries, 1u);
  // Every batch record of the second segment uses it; the first segment's plain zstd.
  const auto compressions = [](const std::string& path) {
    std::vector<Compression> out;
    for (const RawRecord& r : RawRecords(path)) {
      if (static_cast<RecordKind>(r.record[0]) == RecordKind::kReportBatch) {
        out.push_back(static_cast<Compression>(r.record[1]));
      }
    }
    return out;
  };
  const std::vector<Compression> without = compressions(segments[0]);
  for (Compression c : without) EXPECT_EQ(c, Compression::kZstd);
  const std::vector<Compression> with = compressions(segments[1]);
  EXPECT_EQ(without.size() + with.size(), 200u);
  ASSERT_GT(with.size(), 100u);
  for (Compression c : with) EXPECT_EQ(c, Compression::kZstdDictionary);

  ReadSummary summary;
  EXPECT_EQ(ReadAll(dir_, &summary), sent);
  EXPECT_TRUE(summary.clean());
  // Smaller per report with the dictionary (the header's dictionary included).
  const double before = static_cast<double>(summary.segments[0].bytes) /
                        static_cast<double>(summary.segments[0].reports);
  const double after = static_cast<double>(summary.segments[1].bytes) /
                       static_cast<double>(summary.segments[1].reports);
  EXPECT_LT(after, before * 0.8) << "bytes per report: " << before << " -> " << after;
}

TEST_F(RecordingDictionaryTest, SizeRotationsCarryAFreshDictionaryIntoEverySegment) {
  RecordingOptions options = Options();
  options.segment_bytes = 16 << 10;
  options.max_bytes = 0;
  std::vector<std::string> sent;
  {
    SegmentWriter writer(options, Watermarks{});
    for (uint64_t seq = 1; seq <= 400; ++seq) {
      Batch batch;
      batch.Add(Report("lone", seq));
      writer.AppendBatch(batch);
      sent.push_back("lone/" + std::to_string(seq));
    }
    EXPECT_GE(writer.stats().dictionaries, 2u);
  }
  const std::vector<std::string> segments = Segments();
  ASSERT_GE(segments.size(), 3u);
  for (size_t i = 1; i < segments.size(); ++i) {
    EXPECT_FALSE(HeaderOf(segments[i]).zstd_dictionary().empty()) << segments[i];
  }
  ReadSummary summary;
  EXPECT_EQ(ReadAll(dir_, &summary), sent);
  EXPECT_TRUE(summary.clean());
}

TEST_F(RecordingDictionaryTest, ADamagedRecordLosesOnlyItselfInADictionarySegment) {
  const std::vector<std::string> sent = WriteLoneNode(120);
  const size_t first_segment_reports = ReadAll(Segments().at(0)).size();
  const std::string path = Segments().at(1);
  const std::vector<RawRecord> records = RawRecords(path);
  ASSERT_GT(records.size(), 50u);
  // A byte in the middle of the 40th batch record's data (past its 7-byte fragment header).
  const RawRecord& victim = records[40];
  std::string data = ReadFile(path);
  data[victim.offset + kHeaderSize + victim.record.size() / 2] ^= 0x5a;
  WriteFile(path, data);

  ReadSummary summary;
  const std::vector<std::string> reports = ReadAll(dir_, &summary);
  ASSERT_EQ(summary.damage.size(), 1u);
  EXPECT_EQ(summary.damage[0].offset, victim.offset);
  // One report a record: exactly that record's report is lost, everything around it is there.
  std::vector<std::string> expected = sent;
  expected.erase(expected.begin() + static_cast<std::ptrdiff_t>(first_segment_reports + 39));
  EXPECT_EQ(reports, expected);
}

TEST_F(RecordingDictionaryTest, ADamagedHeaderMakesItsDictionaryRecordsUnreadableNotTheOthers) {
  const std::vector<std::string> sent = WriteLoneNode(120);
  const size_t first_segment_reports = ReadAll(Segments().at(0)).size();
  const std::string path = Segments().at(1);
  const size_t dictionary_records = RawRecords(path).size() - 1;
  std::string data = ReadFile(path);
  data[kHeaderSize + 20] ^= 0x01;  // inside the header record: its checksum fails
  WriteFile(path, data);

  ReadSummary summary;
  const std::vector<std::string> reports = ReadAll(dir_, &summary);
  // The first segment reads whole; the second's records are each reported, none crash the reader.
  ASSERT_EQ(reports.size(), first_segment_reports);
  EXPECT_TRUE(std::equal(reports.begin(), reports.end(), sent.begin()));
  ASSERT_EQ(summary.damage.size(), 1 + dictionary_records);
  EXPECT_EQ(summary.damage[0].offset, 0u);
  EXPECT_EQ(summary.damage[0].reason, "checksum mismatch");
  for (size_t i = 1; i < summary.damage.size(); ++i) {
    EXPECT_NE(summary.damage[i].reason.find("dictionary"), std::string::npos)
        << summary.damage[i].reason;
    EXPECT_NE(summary.damage[i].reason.find("header was not read"), std::string::npos)
        << summary.damage[i].reason;
  }
}

TEST_F(RecordingDictionaryTest, ADictionaryZstdRefusesIsReportedAndOnlyItsRecordsAreLost) {
  // A header whose dictionary claims zstd's format (its magic number) but is garbage after it.
  v1::SegmentHeader header = NewSegmentHeader("test");
  header.set_zstd_dictionary(std::string("\x37\xa4\x30\xec", 4) + std::string(300, '\x01'));
  std::string good_dictionary;
  {
    std::vector<std::string> samples;
    for (uint64_t seq = 1; seq <= 10; ++seq)
      samples.push_back(Report("n", seq).SerializeAsString());
    good_dictionary = BuildDictionary(samples, 4096);
  }
  DictionaryCompressor compressor;
  std::string error;
  ASSERT_TRUE(compressor.Load(good_dictionary, 3, &error)) << error;
  std::string plain_body;
  AppendReportToBatch(Report("n", 1).SerializeAsString(), &plain_body);
  std::string dict_body;
  AppendReportToBatch(Report("n", 2).SerializeAsString(), &dict_body);

  LogWriter log;
  std::string bytes;
  log.AddRecord(
      EncodeRecord(RecordKind::kSegmentHeader, header.SerializeAsString(), Compression::kNone),
      &bytes);
  log.AddRecord(EncodeRecord(RecordKind::kReportBatch, plain_body, Compression::kZstd), &bytes);
  log.AddRecord(compressor.Encode(RecordKind::kReportBatch, dict_body), &bytes);
  const std::string path = dir_ + "/00000000000000000001.seg";
  WriteFile(path, bytes);

  ReadSummary summary;
  EXPECT_EQ(ReadAll(path, &summary), (std::vector<std::string>{"n/1"}));
  ASSERT_EQ(summary.damage.size(), 2u);
  EXPECT_NE(summary.damage[0].reason.find("dictionary is unusable"), std::string::npos)
      << summary.damage[0].reason;
  EXPECT_NE(summary.damage[1].reason.find("dictionary is unusable"), std::string::npos)
      << summary.damage[1].reason;
}

TEST_F(RecordingDictionaryTest, TheRecordCodecNeedsTheDictionaryForDictionaryRecords) {
  std::vector<std::string> samples;
  for (uint64_t seq = 1; seq <= 40; ++seq) samples.push_back(Report("n", seq).SerializeAsString());
  const std::string dictionary = BuildDictionary(samples, 4096);
  ASSERT_FALSE(dictionary.empty());
  ASSERT_LE(dictionary.size(), 4096u);
  DictionaryCompressor compressor;
  std::string error;
  ASSERT_TRUE(compressor.Load(dictionary, 3, &error)) << error;
  std::string body;
  AppendReportToBatch(Report("n", 41).SerializeAsString(), &body);
  const std::string record = compressor.Encode(RecordKind::kReportBatch, body);
  EXPECT_EQ(static_cast<Compression>(record[1]), Compression::kZstdDictionary);
  EXPECT_LT(record.size(), EncodeRecord(RecordKind::kReportBatch, body, Compression::kZstd).size());

  std::string storage;
  DecodedRecord decoded;
  EXPECT_FALSE(DecodeRecord(record, &storage, &decoded, &error));
  EXPECT_NE(error.find("dictionary"), std::string::npos) << error;

  RecordDictionary loaded;
  ASSERT_TRUE(loaded.Load(dictionary, &error)) << error;
  error.clear();
  ASSERT_TRUE(DecodeRecord(record, &storage, &decoded, &error, &loaded)) << error;
  EXPECT_EQ(decoded.compression, Compression::kZstdDictionary);
  EXPECT_EQ(decoded.body, body);

  // The plain codecs still decode with a dictionary at hand.
  const std::string plain = EncodeRecord(RecordKind::kReportBatch, body, Compression::kZstd);
  ASSERT_TRUE(DecodeRecord(plain, &storage, &decoded, &error, &loaded)) << error;
  EXPECT_EQ(decoded.body, body);

  // Raw content when there is too little to train on: still a usable dictionary.
  const std::string raw = BuildDictionary({samples[0]}, 4096);
  EXPECT_FALSE(raw.empty());
  EXPECT_LE(raw.size(), 4096u);
  EXPECT_TRUE(loaded.Load(raw, &error)) << error;
  EXPECT_TRUE(BuildDictionary({}, 4096).empty());
}

TEST_F(RecordingDictionaryTest, ARestartFindsTheLatestReportsInADictionarySegment) {
  RecordingOptions options = Options();
  options.tail_index = true;
  {
    SegmentWriter writer(options, Watermarks{});
    for (uint64_t seq = 1; seq <= 100; ++seq) {
      Batch batch;
      batch.Add(Report("a", seq));
      batch.Add(Report("b", seq));
      writer.AppendBatch(batch);
      writer.Sync();
    }
  }
  ASSERT_FALSE(HeaderOf(Segments().back()).zstd_dictionary().empty());
  // With the index, and without it (the newest segments are scanned from their start).
  for (const bool with_index : {true, false}) {
    if (!with_index) fs::remove(dir_ + "/" + std::string(kTailIndexFile));
    std::vector<std::pair<uint64_t, std::string>> segments;
    for (const std::string& path : Segments()) {
      segments.emplace_back(*SegmentFileIndex(fs::path(path).filename().string()), path);
    }
    const RecoveredLocations located = RecoverLocations(dir_, segments);
    EXPECT_TRUE(located.damage.empty()) << located.damage.front();
    ASSERT_EQ(located.nodes.size(), 2u);
    const LatestReports latest = ReadLatestReports(dir_, located.nodes, 0);
    EXPECT_TRUE(latest.problems.empty()) << latest.problems.front();
    ASSERT_EQ(latest.reports.size(), 2u);
    EXPECT_EQ(latest.reports[0], Report("a", 100).SerializeAsString()) << with_index;
    EXPECT_EQ(latest.reports[1], Report("b", 100).SerializeAsString()) << with_index;
  }
  const RecoveredWatermarks recovered = RecoverWatermarks(dir_);
  EXPECT_TRUE(recovered.damage.empty());
  EXPECT_EQ(recovered.watermarks.at("a").sequence, 100u);
}

TEST_F(RecordingDictionaryTest, NoDictionaryWhenTurnedOffOrUncompressed) {
  for (const bool uncompressed : {false, true}) {
    fs::remove_all(dir_);
    RecordingOptions options = Options();
    if (uncompressed) {
      options.compression = Compression::kNone;
    } else {
      options.dictionary_bytes = 0;
    }
    {
      SegmentWriter writer(options, Watermarks{});
      for (uint64_t seq = 1; seq <= 60; ++seq) {
        Batch batch;
        batch.Add(Report("lone", seq));
        writer.AppendBatch(batch);
      }
      EXPECT_EQ(writer.stats().dictionaries, 0u);
    }
    ASSERT_EQ(Segments().size(), 1u);
    EXPECT_TRUE(HeaderOf(Segments()[0]).zstd_dictionary().empty());
    EXPECT_EQ(ReadAll(dir_).size(), 60u);
  }
}

}  // namespace
}  // namespace recording_dictionary_test
}  // namespace accelmon::recording
