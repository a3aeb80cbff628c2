#include "recording/record_codec.h"

#include <zdict.h>
#include <zstd.h>

#include <algorithm>
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

void RecordDictionary::Free::operator()(ZSTD_DDict_s* d) const { ZSTD_freeDDict(d); }

bool RecordDictionary::Load(std::string_view bytes, std::string* error) {
  ddict_.reset();
  if (bytes.empty()) {
    *error = "empty zstd dictionary";
    return false;
  }
  if (bytes.size() > kMaxDictionaryBytes) {
    *error = "zstd dictionary of " + std::to_string(bytes.size()) + " bytes, above the limit of " +
             std::to_string(kMaxDictionaryBytes);
    return false;
  }
  // zstd's dictionary format when the bytes begin with its magic number, else raw content. A
  // damaged dictionary in zstd's format is refused here.
  ddict_.reset(ZSTD_createDDict(bytes.data(), bytes.size()));
  if (ddict_ == nullptr) {
    *error = "zstd refuses the dictionary of " + std::to_string(bytes.size()) + " bytes";
    return false;
  }
  return true;
}

struct DictionaryCompressor::Impl {
  ZSTD_CCtx* cctx = nullptr;
  ZSTD_CDict* cdict = nullptr;
  int level = 3;
  ~Impl() {
    ZSTD_freeCDict(cdict);
    ZSTD_freeCCtx(cctx);
  }
};

DictionaryCompressor::DictionaryCompressor() : impl_(std::make_unique<Impl>()) {}
DictionaryCompressor::~DictionaryCompressor() = default;

bool DictionaryCompressor::Load(std::string_view dictionary, int level, std::string* error) {
  ZSTD_freeCDict(impl_->cdict);
  impl_->cdict = nullptr;
  impl_->level = level;
  if (dictionary.empty() || dictionary.size() > kMaxDictionaryBytes) {
    *error = "zstd dictionary of " + std::to_string(dictionary.size()) + " bytes";
    return false;
  }
  if (impl_->cctx == nullptr) impl_->cctx = ZSTD_createCCtx();
  impl_->cdict = ZSTD_createCDict(dictionary.data(), dictionary.size(), level);
  if (impl_->cctx == nullptr || impl_->cdict == nullptr) {
    ZSTD_freeCDict(impl_->cdict);
    impl_->cdict = nullptr;
    *error = "zstd refuses the dictionary of " + std::to_string(dictionary.size()) + " bytes";
    return false;
  }
  return true;
}

bool DictionaryCompressor::loaded() const { return impl_->cdict != nullptr; }

std::string DictionaryCompressor::Encode(RecordKind kind, std::string_view body) {
  if (impl_->cdict == nullptr) return EncodeRecord(kind, body, Compression::kZstd, impl_->level);
  std::string record;
  record.resize(kPrefixSize + ZSTD_compressBound(body.size()));
  record[0] = static_cast<char>(kind);
  record[1] = static_cast<char>(Compression::kZstdDictionary);
  // ZSTD_compress_usingCDict writes the content size (and the dictionary's ID) into the frame.
  const size_t written =
      ZSTD_compress_usingCDict(impl_->cctx, record.data() + kPrefixSize,
                               record.size() - kPrefixSize, body.data(), body.size(), impl_->cdict);
  if (ZSTD_isError(written)) return EncodeRecord(kind, body, Compression::kZstd, impl_->level);
  record.resize(kPrefixSize + written);
  return record;
}

std::string BuildDictionary(const std::vector<std::string>& samples, size_t max_bytes) {
  if (samples.empty() || max_bytes == 0) return {};
  std::string joined;
  std::vector<size_t> sizes;
  sizes.reserve(samples.size());
  for (const std::string& sample : samples) {
    joined.append(sample);
    sizes.push_back(sample.size());
  }
  std::string dictionary(max_bytes, '\0');
  const size_t size = ZDICT_trainFromBuffer(dictionary.data(), dictionary.size(), joined.data(),
                                            sizes.data(), static_cast<unsigned>(sizes.size()));
  if (!ZDICT_isError(size) && size > 0) {
    dictionary.resize(size);
    return dictionary;
  }
  // Raw content: the newest samples, the newest last (zstd prefers matches near the end).
  dictionary.clear();
  size_t from = samples.size();
  size_t total = 0;
  while (from > 0 && total + samples[from - 1].size() <= max_bytes) total += samples[--from].size();
  if (from == samples.size()) return samples.back().substr(samples.back().size() - max_bytes);
  for (size_t i = from; i < samples.size(); ++i) dictionary.append(samples[i]);
  return dictionary;
}

bool DecodeRecord(std::string_view record, std::string* storage, DecodedRecord* out,
                  std::string* error, const RecordDictionary* dictionary) {
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
  if (compression != static_cast<uint8_t>(Compression::kZstd) &&
      compression != static_cast<uint8_t>(Compression::kZstdDictionary)) {
    *error = "unknown compression " + std::to_string(compression);
    return false;
  }
  out->compression = static_cast<Compression>(compression);
  const bool with_dictionary = out->compression == Compression::kZstdDictionary;
  if (with_dictionary && (dictionary == nullptr || !dictionary->loaded())) {
    *error =
        "zstd: compressed with the segment's dictionary, and the dictionary in the segment "
        "header was not read (header missing, damaged or refused)";
    return false;
  }
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
  size_t got = 0;
  if (with_dictionary) {
    // One context per thread, reused: creating one per record costs more than a small record.
    thread_local const std::unique_ptr<ZSTD_DCtx, size_t (*)(ZSTD_DCtx*)> dctx(ZSTD_createDCtx(),
                                                                               ZSTD_freeDCtx);
    if (dctx == nullptr) {
      *error = "zstd: cannot create a decompression context";
      return false;
    }
    got = ZSTD_decompress_usingDDict(dctx.get(), storage->data(), storage->size(), payload.data(),
                                     payload.size(), dictionary->get());
  } else {
    got = ZSTD_decompress(storage->data(), storage->size(), payload.data(), payload.size());
  }
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

bool SegmentDecoder::Decode(std::string_view record, std::string* storage, DecodedRecord* out,
                            std::string* error) {
  if (!DecodeRecord(record, storage, out, error, &dictionary_)) return false;
  if (out->kind == RecordKind::kSegmentHeader) {
    v1::SegmentHeader header;
    if (header.ParseFromArray(out->body.data(), static_cast<int>(out->body.size()))) {
      UseHeader(header);
    } else {
      dictionary_.Clear();
      dictionary_error_ = "the segment header does not parse";
    }
  }
  return true;
}

void SegmentDecoder::UseHeader(const v1::SegmentHeader& header) {
  dictionary_.Clear();
  dictionary_error_.clear();
  if (header.zstd_dictionary().empty()) return;
  dictionary_.Load(header.zstd_dictionary(), &dictionary_error_);
}

}  // namespace accelmon::recording
