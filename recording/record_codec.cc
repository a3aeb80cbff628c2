#include "recording/record_codec.h"

#include <zstd.h>

#include <chrono>
#include <string>

#include "proto/time_format.h"

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

bool ReadVarint(std::string_view data, size_t& pos, uint64_t& value) {
  value = 0;
  for (int shift = 0; shift < 64 && pos < data.size(); shift += 7) {
    const auto byte = static_cast<uint8_t>(data[pos++]);
    value |= uint64_t{byte & 0x7fu} << shift;
    if ((byte & 0x80) == 0) return true;
  }
  return false;
}

bool SkipField(std::string_view data, size_t& pos, uint64_t wire_type) {
  uint64_t n = 0;
  switch (wire_type) {
    case 0:
      return ReadVarint(data, pos, n);
    case 1:
      n = 8;
      break;
    case 2:
      if (!ReadVarint(data, pos, n)) return false;
      break;
    case 5:
      n = 4;
      break;
    default:
      return false;  // groups are not used by our messages
  }
  if (n > data.size() - pos) return false;
  pos += n;
  return true;
}

void AppendReportToBatch(const v1::NodeReport& report, std::string* batch_body) {
  const size_t size = report.ByteSizeLong();
  batch_body->push_back('\x0a');
  AppendVarint(size, batch_body);
  const size_t at = batch_body->size();
  batch_body->resize(at + size);
  report.SerializeWithCachedSizesToArray(reinterpret_cast<uint8_t*>(batch_body->data() + at));
}

bool SplitReportBatch(std::string_view body, std::vector<std::string_view>* reports,
                      uint64_t* other_fields) {
  reports->clear();
  if (other_fields != nullptr) *other_fields = 0;
  size_t pos = 0;
  while (pos < body.size()) {
    uint64_t tag = 0;
    if (!ReadVarint(body, pos, tag)) return false;
    if ((tag >> 3) == 0) return false;
    if (tag == ((1u << 3) | 2u)) {
      uint64_t n = 0;
      if (!ReadVarint(body, pos, n) || n > body.size() - pos) return false;
      reports->push_back(body.substr(pos, n));
      pos += n;
    } else {
      if (!SkipField(body, pos, tag & 7u)) return false;
      if (other_fields != nullptr) ++*other_fields;
    }
  }
  return true;
}

v1::SegmentHeader NewSegmentHeader(std::string_view writer) {
  v1::SegmentHeader header;
  header.set_format_version(kFormatVersion);
  header.set_writer(std::string(writer));
  *header.mutable_created() = TimestampFromTimePoint(std::chrono::system_clock::now());
  return header;
}

std::string UncompressedRecordPrefix(RecordKind kind) {
  return std::string{static_cast<char>(kind), static_cast<char>(Compression::kNone)};
}

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
      kind != static_cast<uint8_t>(RecordKind::kSegmentHeader) &&
      kind != static_cast<uint8_t>(RecordKind::kTailIndex)) {
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
