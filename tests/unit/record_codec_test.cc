// The bytes inside a record (recording/record_codec.h): batches built from wire bytes parse as a
// ReportBatch, both compressions round-trip, and every malformed record is refused with a reason.
#include "recording/record_codec.h"

#include <gtest/gtest.h>
#include <zstd.h>

#include <string>
#include <vector>

#include "accelmon/v1/recording.pb.h"

namespace accelmon::recording {
namespace record_codec_test {
namespace {

v1::NodeReport Report(uint64_t sequence, size_t padding) {
  v1::NodeReport report;
  report.set_node("node-" + std::to_string(sequence));
  report.set_agent_instance_id("instance");
  report.set_sequence(sequence);
  report.set_agent_version(std::string(padding, 'v'));
  return report;
}

TEST(RecordCodecTest, BatchFromWireBytesParsesAsReportBatch) {
  std::string body;
  std::vector<v1::NodeReport> reports;
  // Lengths with one-, two- and three-byte varints.
  for (size_t padding : {size_t{0}, size_t{200}, size_t{20000}}) {
    reports.push_back(Report(reports.size() + 1, padding));
    AppendReportToBatch(reports.back().SerializeAsString(), &body);
  }
  v1::ReportBatch batch;
  ASSERT_TRUE(batch.ParseFromString(body));
  ASSERT_EQ(batch.reports_size(), 3);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(batch.reports(i).SerializeAsString(), reports[i].SerializeAsString());
  }
  // The same bytes protobuf itself would write.
  EXPECT_EQ(body, batch.SerializeAsString());
}

TEST(RecordCodecTest, ReportSerialisedIntoTheBatchIsTheSameBytes) {
  std::string from_wire, in_place;
  for (size_t padding : {size_t{0}, size_t{200}, size_t{20000}}) {
    const v1::NodeReport report = Report(padding + 1, padding);
    AppendReportToBatch(report.SerializeAsString(), &from_wire);
    AppendReportToBatch(report, &in_place);
  }
  EXPECT_EQ(in_place, from_wire);

  std::string record = UncompressedRecordPrefix(RecordKind::kReportBatch);
  record += in_place;
  EXPECT_EQ(record, EncodeRecord(RecordKind::kReportBatch, in_place, Compression::kNone));
}

TEST(RecordCodecTest, SplitReportBatchGivesEachReportsWireBytes) {
  std::string body;
  std::vector<std::string> wire;
  for (size_t padding : {size_t{0}, size_t{200}, size_t{20000}}) {
    wire.push_back(Report(wire.size() + 1, padding).SerializeAsString());
    AppendReportToBatch(wire.back(), &body);
  }
  std::vector<std::string_view> reports;
  uint64_t other = 7;
  ASSERT_TRUE(SplitReportBatch(body, &reports, &other));
  EXPECT_EQ(std::vector<std::string>(reports.begin(), reports.end()), wire);
  EXPECT_EQ(other, 0u);
  ASSERT_TRUE(SplitReportBatch("", &reports, &other));
  EXPECT_TRUE(reports.empty());

  // A newer writer's field is skipped and counted; a cut or bad body is refused.
  ASSERT_TRUE(SplitReportBatch(body + std::string("\x12\x02zz\x18\x05", 6), &reports, &other));
  EXPECT_EQ(reports.size(), 3u);
  EXPECT_EQ(other, 2u);
  EXPECT_FALSE(SplitReportBatch(body.substr(0, body.size() - 1), &reports));
  EXPECT_FALSE(SplitReportBatch(std::string("\x0a\x80", 2), &reports));
  EXPECT_FALSE(SplitReportBatch(std::string("\x0b", 1), &reports));  // a group
}

TEST(RecordCodecTest, NewSegmentHeader) {
  const v1::SegmentHeader header = NewSegmentHeader("agent-spool");
  EXPECT_EQ(header.format_version(), kFormatVersion);
  EXPECT_EQ(header.writer(), "agent-spool");
  EXPECT_GT(header.created().seconds(), 1'700'000'000);
  EXPECT_EQ(header.watermarks_size(), 0);
}

TEST(RecordCodecTest, UncompressedRecordIsPrefixAndBody) {
  const std::string record = EncodeRecord(RecordKind::kSegmentHeader, "body", Compression::kNone);
  EXPECT_EQ(record, std::string("\x02\x00", 2) + "body");
  std::string storage;
  DecodedRecord decoded;
  std::string error;
  ASSERT_TRUE(DecodeRecord(record, &storage, &decoded, &error)) << error;
  EXPECT_EQ(decoded.kind, RecordKind::kSegmentHeader);
  EXPECT_EQ(decoded.compression, Compression::kNone);
  EXPECT_EQ(decoded.body, "body");
}

TEST(RecordCodecTest, ZstdRecordsShrinkAndDecodeToTheSameBody) {
  std::string body;
  for (uint64_t s = 1; s <= 100; ++s) AppendReportToBatch(Report(s, 50).SerializeAsString(), &body);
  const std::string record = EncodeRecord(RecordKind::kReportBatch, body, Compression::kZstd);
  EXPECT_EQ(record[0], 1);
  EXPECT_EQ(record[1], 1);
  EXPECT_LT(record.size(), body.size() / 4);
  std::string storage;
  DecodedRecord decoded;
  std::string error;
  ASSERT_TRUE(DecodeRecord(record, &storage, &decoded, &error)) << error;
  EXPECT_EQ(decoded.kind, RecordKind::kReportBatch);
  EXPECT_EQ(decoded.compression, Compression::kZstd);
  EXPECT_EQ(decoded.body, body);
  // An empty body too.
  const std::string empty = EncodeRecord(RecordKind::kReportBatch, "", Compression::kZstd);
  ASSERT_TRUE(DecodeRecord(empty, &storage, &decoded, &error)) << error;
  EXPECT_EQ(decoded.body, "");
}

std::string Decode(const std::string& record) {
  std::string storage;
  DecodedRecord decoded;
  std::string error;
  EXPECT_FALSE(DecodeRecord(record, &storage, &decoded, &error));
  return error;
}

TEST(RecordCodecTest, MalformedRecordsAreRefusedWithAReason) {
  EXPECT_EQ(Decode(""), "record of 0 bytes, shorter than its 2-byte prefix");
  EXPECT_EQ(Decode("\x01"), "record of 1 bytes, shorter than its 2-byte prefix");
  EXPECT_EQ(Decode(std::string("\x07\x00", 2)), "unknown record kind 7");
  EXPECT_EQ(Decode(std::string("\x01\x09", 2)), "unknown compression 9");
  EXPECT_EQ(Decode(std::string("\x01\x01", 2) + "not zstd"), "zstd: not a zstd frame");

  const std::string body(5000, 'x');
  const std::string good = EncodeRecord(RecordKind::kReportBatch, body, Compression::kZstd);
  EXPECT_EQ(Decode(good.substr(0, good.size() - 3)).rfind("zstd: damaged frame", 0), 0u);
  EXPECT_EQ(Decode(good + "xy"), "zstd: 2 bytes after the frame");
  std::string flipped = good;
  flipped[flipped.size() / 2] = static_cast<char>(flipped[flipped.size() / 2] ^ 0x55);
  EXPECT_EQ(Decode(flipped).rfind("zstd: ", 0), 0u);

  // A frame without a content size, as a streaming compressor may write.
  std::string streamed(ZSTD_compressBound(body.size()), '\0');
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag, 0);
  ZSTD_outBuffer out{streamed.data(), streamed.size(), 0};
  ZSTD_inBuffer in{body.data(), body.size(), 0};
  ASSERT_EQ(ZSTD_compressStream2(cctx, &out, &in, ZSTD_e_end), 0u);
  ZSTD_freeCCtx(cctx);
  streamed.resize(out.pos);
  EXPECT_EQ(Decode(std::string("\x01\x01", 2) + streamed), "zstd: frame without a content size");

  // A frame header claiming more than the limit: magic, single-segment with an 8-byte size.
  std::string huge("\x01\x01\x28\xb5\x2f\xfd\xe0", 7);
  for (int i = 0; i < 8; ++i) huge.push_back(static_cast<char>(i == 4 ? 1 : 0));  // 2^32
  EXPECT_EQ(Decode(huge), "zstd: content size 4294967296 above the limit of 268435456");
}

}  // namespace
}  // namespace record_codec_test
}  // namespace accelmon::recording
