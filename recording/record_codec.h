// The bytes inside one record: [kind][compression][body], the body one of the messages of
// proto/accelmon/v1/recording.proto, optionally one zstd frame.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "accelmon/v1/recording.pb.h"
#include "accelmon/v1/telemetry.pb.h"

struct ZSTD_DDict_s;  // zstd.h

namespace accelmon::recording {

enum class RecordKind : uint8_t { kReportBatch = 1, kSegmentHeader = 2, kTailIndex = 3 };
// kZstdDictionary: zstd with the dictionary in the segment's header (format version 2).
enum class Compression : uint8_t { kNone = 0, kZstd = 1, kZstdDictionary = 2 };

// What writers write: 2 (segment headers may carry a zstd dictionary). Readers read every version
// from kOldestFormatVersion up to it.
inline constexpr uint32_t kFormatVersion = 2;
inline constexpr uint32_t kOldestFormatVersion = 1;
// A dictionary in a header larger than this is damage (writers use 32 KiB).
inline constexpr size_t kMaxDictionaryBytes = size_t{1} << 20;
// Far above any real batch; a record that claims to decompress to more is damage.
inline constexpr uint64_t kMaxRecordBody = uint64_t{256} << 20;

// Appends one serialised NodeReport (its wire bytes) to a ReportBatch body under construction.
void AppendReportToBatch(std::string_view serialized_report, std::string* batch_body);

// The same, serialising `report` straight into the body: its bytes are produced once, in place.
void AppendReportToBatch(const v1::NodeReport& report, std::string* batch_body);

// The wire bytes of each report in a ReportBatch body, in order, into `reports` (replacing what it
// held; views into `body`). Fields other than `reports` (a newer writer's additions) are skipped
// and counted in `other_fields`. False when the body is malformed.
bool SplitReportBatch(std::string_view body, std::vector<std::string_view>* reports,
                      uint64_t* other_fields = nullptr);

// The protobuf wire format, for walking a batch without parsing its reports: reads a varint at
// `pos`, or skips one field of wire type `wire_type`, advancing `pos`; false when the data ends
// inside it (or, for SkipField, on a group, which our messages never use).
bool ReadVarint(std::string_view data, size_t& pos, uint64_t& value);
bool SkipField(std::string_view data, size_t& pos, uint64_t wire_type);

// A SegmentHeader of this format version from `writer`, created now; the caller adds watermarks.
v1::SegmentHeader NewSegmentHeader(std::string_view writer);

// The 2-byte prefix of an uncompressed record of `kind`: append the body to it in place (e.g. with
// AppendReportToBatch) for the same record EncodeRecord(kind, body, kNone) returns, without a copy
// of the body.
std::string UncompressedRecordPrefix(RecordKind kind);

// A whole record from a body. zstd `level` only matters for kZstd.
std::string EncodeRecord(RecordKind kind, std::string_view body, Compression compression,
                         int level = 3);

// A segment's zstd dictionary, ready for decompression (reader side).
class RecordDictionary {
 public:
  RecordDictionary() = default;
  // Loads `bytes` (SegmentHeader.zstd_dictionary). False with `error` set when zstd refuses it;
  // the dictionary is then unloaded, and records that need it are unreadable.
  bool Load(std::string_view bytes, std::string* error);
  void Clear() { ddict_.reset(); }
  bool loaded() const { return ddict_ != nullptr; }
  ZSTD_DDict_s* get() const { return ddict_.get(); }

 private:
  struct Free {
    void operator()(ZSTD_DDict_s* d) const;
  };
  std::unique_ptr<ZSTD_DDict_s, Free> ddict_;
};

// Compresses records with one dictionary (writer side): level and dictionary fixed at Load.
class DictionaryCompressor {
 public:
  DictionaryCompressor();
  ~DictionaryCompressor();
  DictionaryCompressor(const DictionaryCompressor&) = delete;
  DictionaryCompressor& operator=(const DictionaryCompressor&) = delete;

  // False with `error` set when zstd refuses the dictionary.
  bool Load(std::string_view dictionary, int level, std::string* error);
  bool loaded() const;
  // A record of `kind` compressed kZstdDictionary (one zstd frame with its content size); falls
  // back to plain zstd, then to none, when compression fails.
  std::string Encode(RecordKind kind, std::string_view body);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// A dictionary of at most `max_bytes` for compressing reports like `samples` (reports' wire
// bytes): zstd's trainer (ZDICT_trainFromBuffer) over them; when it cannot train (too few or too
// similar samples), raw content: the newest samples, up to `max_bytes`. Empty without samples.
std::string BuildDictionary(const std::vector<std::string>& samples, size_t max_bytes);

struct DecodedRecord {
  RecordKind kind{};
  Compression compression{};
  std::string_view body;  // into the record or into `storage`
};

// False with `error` set ("unknown record kind 7", "zstd: ...") when the record is not one we
// can read; the caller treats that as damage of this record only. A record compressed with the
// segment's dictionary needs `dictionary` loaded (from the segment's header): without it, it is
// unreadable ("... the segment header's dictionary was not read").
bool DecodeRecord(std::string_view record, std::string* storage, DecodedRecord* out,
                  std::string* error, const RecordDictionary* dictionary = nullptr);

// Decodes the records of one segment read from its start: the dictionary of its SegmentHeader
// (the first record) is kept for the records after it. For readers that do not otherwise look at
// the header.
class SegmentDecoder {
 public:
  // As DecodeRecord. A SegmentHeader record is also parsed, and its dictionary loaded; a header
  // that does not parse, or whose dictionary zstd refuses, still decodes (the caller judges the
  // header), but the records that need its dictionary will not (dictionary_error() says why).
  bool Decode(std::string_view record, std::string* storage, DecodedRecord* out,
              std::string* error);
  // Uses the dictionary of `header` for the records after it.
  void UseHeader(const v1::SegmentHeader& header);
  const RecordDictionary& dictionary() const { return dictionary_; }
  // Why the header's dictionary could not be loaded; empty when it was, or there was none.
  const std::string& dictionary_error() const { return dictionary_error_; }

 private:
  RecordDictionary dictionary_;
  std::string dictionary_error_;
};

}  // namespace accelmon::recording
