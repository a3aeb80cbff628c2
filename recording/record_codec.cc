#include "recording/record_codec.h"

#include <zstd.h>

#include <string>

namespace accelmon::recording {
namespace {

constexpr size_t kPrefixSize = 2;  // kind, compression
// zstd's largest block; the smallest block (an RLE block: 3-byte header, 1 byte) expands to it.
constexpr uint64_t kZstdBlockSizeMax = uint64_t{128} << 10;

void AppendVarint(uint64_t value, std::string* out) {
  while (value >= 0x80) {
    out->push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out->push_back(static_cast<char>(value));
}

}  // namespace

void AppendReportToBatch(std::string_view serialized_report, std::string* batch_body) {
  // ReportBatch.reports is field 1, wire type 2 (length-delimited): tag byte 0x0a.
  batch_body->push_back('\x0a');
  AppendVarint(serialized_report.size(), batch_body);
  batch_body->append(serialized_report);
}

std::string EncodeRecord(RecordKind kind, std::string_view body, Compression compression,
                         int level) {
  std::string record;
  record.push_back(static_cast<char>(kind));
  record.push_back(static_cast<char>(compression));
  if (compression != Compression::kZstd) {
    record.append(body);
    return record;
  }
  record.resize(kPrefixSize + ZSTD_compressBound(body.size()));
  // ZSTD_compress writes the content size into the frame header, which DecodeRecord needs.
  const size_t written = ZSTD_compress(record.data() + kPrefixSize, record.size() - kPrefixSize,
                                       body.data(), body.size(), level);
  if (ZSTD_isError(written)) {
    // Only a bad level or allocation failure gets here: store the body uncompressed instead.
    record.resize(kPrefixSize);
    record[1] = static_cast<char>(Compression::kNone);
    record.append(body);
    return record;
  }
  record.resize(kPrefixSize + written);
  return record;
}

bool DecodeRecord(std::string_view record, std::string* storage, DecodedRecord* out,
                  std::string* error) {
  if (record.size() < kPrefixSize) {
    *error =
        "record of " + std::to_string(record.size()) + " bytes, shorter than its 2-byte prefix";
    return false;
  }
  const auto kind = static_cast<uint8_t>(record[0]);
  const auto compression = static_cast<uint8_t>(record[1]);
  if (kind != static_cast<uint8_t>(RecordKind::kReportBatch) &&
      kind != static_cast<uint8_t>(RecordKind::kSegmentHeader)) {
    *error = "unknown record kind " + std::to_string(kind);
    return false;
  }
  out->kind = static_cast<RecordKind>(kind);
  const std::string_view payload = record.substr(kPrefixSize);
  if (compression == static_cast<uint8_t>(Compression::kNone)) {
    out->compression = Compression::kNone;
    out->body = payload;
    return true;
  }
  if (compression != static_cast<uint8_t>(Compression::kZstd)) {
    *error = "unknown compression " + std::to_string(compression);
    return false;
  }
  out->compression = Compression::kZstd;
  const unsigned long long size = ZSTD_getFrameContentSize(payload.data(), payload.size());
  if (size == ZSTD_CONTENTSIZE_ERROR) {
    *error = "zstd: not a zstd frame";
    return false;
  }
  if (size == ZSTD_CONTENTSIZE_UNKNOWN) {
    *error = "zstd: frame without a content size";
    return false;
  }
  if (size > kMaxRecordBody) {
    *error = "zstd: content size " + std::to_string(size) + " above the limit of " +
             std::to_string(kMaxRecordBody);
    return false;
  }
  // Refuse before allocating when the frame is cut short, has bytes after it, or claims more
  // content than its blocks could possibly hold.
  const size_t frame_size = ZSTD_findFrameCompressedSize(payload.data(), payload.size());
  if (ZSTD_isError(frame_size)) {
    *error = std::string("zstd: damaged frame: ") + ZSTD_getErrorName(frame_size);
    return false;
  }
  if (frame_size != payload.size()) {
    *error = "zstd: " + std::to_string(payload.size() - frame_size) + " bytes after the frame";
    return false;
  }
  if (size > (frame_size / 4 + 1) * kZstdBlockSizeMax) {
    *error = "zstd: content size " + std::to_string(size) + " impossible for a frame of " +
             std::to_string(frame_size) + " bytes";
    return false;
  }
  storage->resize(size);
  const size_t got =
      ZSTD_decompress(storage->data(), storage->size(), payload.data(), payload.size());
  if (ZSTD_isError(got)) {
    *error = std::string("zstd: ") + ZSTD_getErrorName(got);
    return false;
  }
  if (got != size) {
    *error = "zstd: decompressed " + std::to_string(got) + " bytes, the frame said " +
             std::to_string(size);
    return false;
  }
  out->body = *storage;
  return true;
}

}  // namespace accelmon::recording
