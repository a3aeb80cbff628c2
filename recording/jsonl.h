// The JSON Lines interchange format: one NodeReport per line in protobuf's JSON mapping
// (lowerCamelCase names; original field names are accepted on input). Only the fields a report
// holds are written, so a value that was absent stays absent after export and import.
#pragma once

#include <cstdint>
#include <fstream>
#include <istream>
#include <string>
#include <string_view>

#include "accelmon/v1/telemetry.pb.h"

namespace accelmon::recording {

// Appends reports as JSON lines. Reuses its buffers from one report to the next; not thread-safe
// (one writer per thread).
class JsonlWriter {
 public:
  // Appends `report` and a '\n' to `out`. Map entries come out sorted by key, so the same report
  // always gives the same bytes.
  void Append(const v1::NodeReport& report, std::string* out);

  // The line without the '\n'.
  std::string ToLine(const v1::NodeReport& report);

 private:
  std::string wire_;  // the report's binary encoding, which the JSON printer reads
};

struct JsonlReaderOptions {
  // Off: a field this version does not know is an error (most often a typo). On: it is dropped,
  // for lines written by a newer accelmon.
  bool ignore_unknown_fields = false;
};

// Parses one JSON line into `report` (cleared first). False with `error` set to the reason when
// it cannot.
bool ParseJsonLine(std::string_view line, v1::NodeReport* report, std::string* error,
                   const JsonlReaderOptions& options = {});

// Reads a JSON Lines stream line by line. A bad line is reported ("FILE:LINE: reason") and
// costs only itself: the next call goes on with the line after it. Blank lines (also "\r\n"
// ones) are skipped. Not thread-safe.
class JsonlReader {
 public:
  enum class Result { kReport, kBadLine, kEnd };

  // Reads `in`, which must outlive the reader; `name` stands for it in errors ("-" for stdin).
  JsonlReader(std::istream& in, std::string name, JsonlReaderOptions options = {});
  // Opens the file at `path`. Throws std::runtime_error with the path and strerror when it
  // cannot.
  explicit JsonlReader(const std::string& path, JsonlReaderOptions options = {});

  JsonlReader(const JsonlReader&) = delete;
  JsonlReader& operator=(const JsonlReader&) = delete;

  // kReport: `report` holds the next line's report. kBadLine: error() says why; `report` is
  // unspecified. kEnd: the stream is exhausted (or failed to read: see read_failed()).
  Result Next(v1::NodeReport* report);

  // Of the line Next() returned last: its 1-based number, its byte offset in the stream and its
  // length in bytes without the line break.
  uint64_t line_number() const { return line_number_; }
  uint64_t line_offset() const { return line_offset_; }
  uint64_t line_bytes() const { return line_.size(); }

  // After kBadLine: "FILE:LINE: reason", and the reason alone.
  const std::string& error() const { return error_; }
  const std::string& reason() const { return reason_; }

  const std::string& name() const { return name_; }
  uint64_t reports() const { return reports_; }
  uint64_t bad_lines() const { return bad_lines_; }
  // Bytes consumed so far, line breaks included.
  uint64_t bytes_read() const { return next_offset_; }
  // True when reading stopped because of an I/O error, not at the end of the data.
  bool read_failed() const { return in_.bad(); }

 private:
  std::ifstream file_;  // only when the reader opened the file itself
  std::istream& in_;
  const std::string name_;
  const JsonlReaderOptions options_;
  std::string line_;
  std::string wire_;  // the line's binary encoding, reused
  std::string error_;
  std::string reason_;
  uint64_t line_number_ = 0;
  uint64_t line_offset_ = 0;
  uint64_t next_offset_ = 0;
  uint64_t reports_ = 0;
  uint64_t bad_lines_ = 0;
};

}  // namespace accelmon::recording
