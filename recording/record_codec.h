// The bytes inside one record: [kind][compression][body], the body one of the messages of
// proto/accelmon/v1/recording.proto, optionally one zstd frame.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "accelmon/v1/recording.pb.h"
#include "accelmon/v1/telemetry.pb.h"

namespace accelmon::recording {

enum class RecordKind : uint8_t { kReportBatch = 1, kSegmentHeader = 2, kTailIndex = 3 };
enum class Compression : uint8_t { kNone = 0, kZstd = 1 };

inline constexpr uint32_t kFormatVersion = 1;
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

struct DecodedRecord {
  RecordKind kind{};
  Compression compression{};
  std::string_view body;  // into the record or into `storage`
};

// False with `error` set ("unknown record kind 7", "zstd: ...") when the record is not one we
// can read; the caller treats that as damage of this record only.
bool DecodeRecord(std::string_view record, std::string* storage, DecodedRecord* out,
                  std::string* error);

}  // namespace accelmon::recording
