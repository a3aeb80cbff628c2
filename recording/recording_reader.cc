#include "recording/recording_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <limits>

#include "accelmon/v1/recording.pb.h"
#include "proto/time_format.h"
#include "recording/jsonl.h"
#include "recording/log_format.h"
#include "recording/record_codec.h"

namespace accelmon::recording {
namespace {

void NoteTime(const v1::NodeReport& report, SegmentSummary& segment) {
  if (!report.has_timestamp()) return;
  const int64_t ns = ToNanos(report.timestamp());
  if (!segment.first_time_ns || ns < *segment.first_time_ns) segment.first_time_ns = ns;
  if (!segment.last_time_ns || ns > *segment.last_time_ns) segment.last_time_ns = ns;
}

SegmentSummary NewSegment(const std::string& path, uint64_t bytes) {
  SegmentSummary segment;
  segment.path = path;
  segment.bytes = bytes;
  return segment;
}

std::string ErrnoText(const std::string& path) { return path + ": " + std::strerror(errno); }

// The whole file into `buffer` (reused from segment to segment, so no allocation per segment
// once the largest has been read). Reading rather than mapping: a segment the exporter truncates
// or deletes under us cannot crash the tool.
bool ReadWholeFile(const std::string& path, std::string& buffer, std::string* error) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *error = ErrnoText(path);
    return false;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    *error = ErrnoText(path);
    ::close(fd);
    return false;
  }
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  buffer.resize(static_cast<size_t>(st.st_size));
  size_t done = 0;
  while (done < buffer.size()) {
    const ssize_t n = ::read(fd, buffer.data() + done, buffer.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      *error = ErrnoText(path);
      ::close(fd);
      return false;
    }
    if (n == 0) break;  // shrank while we read
    done += static_cast<size_t>(n);
  }
  buffer.resize(done);
  ::close(fd);
  return true;
}

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

bool LooksLikeJsonLinesName(std::string_view path) {
  return EndsWith(path, ".jsonl") || EndsWith(path, ".ndjson") || EndsWith(path, ".json");
}

}  // namespace

// One file being read: a segment or a JSON Lines file.
class RecordingReader::Source {
 public:
  virtual ~Source() = default;
  // The next report into `report`; false at the end of this file (or at the first damage when
  // reading point-in-time).
  virtual bool Next(v1::NodeReport& report, ReportOrigin* origin) = 0;
  // Bytes of this file consumed so far.
  virtual uint64_t position() const = 0;
};

namespace {

class SegmentSource final : public RecordingReader::Source {
 public:
  // `data` is the whole segment, owned by the caller and kept until this source is gone.
  SegmentSource(const std::string& path, std::string_view data, ReadMode mode, ReadSummary& summary)
      : path_(path),
        data_(data),
        mode_(mode),
        log_(data, mode),
        summary_(summary),
        segment_index_(summary.segments.size()) {
    summary_.segments.push_back(NewSegment(path_, data.size()));
  }

  bool Next(v1::NodeReport& report, ReportOrigin* origin) override {
    for (;;) {
      if (stopped_) return false;
      if (batch_pos_ < batch_.size()) {
        if (NextFromBatch(report)) {
          if (origin != nullptr) *origin = {.file = path_, .offset = record_offset_, .line = 0};
          return true;
        }
        continue;
      }
      if (!ReadNextRecord()) return false;
    }
  }

  uint64_t position() const override {
    if (finished_) return data_.size();
    return std::min<uint64_t>(record_offset_ + record_size_, data_.size());
  }

 private:
  SegmentSummary& segment() { return summary_.segments[segment_index_]; }

  void AddDamage(uint64_t offset, uint64_t bytes, std::string reason) {
    segment().damaged_bytes += bytes;
    summary_.damage.push_back(DamageReport{
        .file = path_, .offset = offset, .bytes = bytes, .line = 0, .reason = std::move(reason)});
    if (mode_ == ReadMode::kPointInTime) stopped_ = true;
  }

  // Copies what the log reader found since the last call, so damage is listed in file order.
  void CollectLogDamage() {
    const auto& damage = log_.damage();
    for (; log_damage_seen_ < damage.size(); ++log_damage_seen_) {
      const Damage& d = damage[log_damage_seen_];
      segment().damaged_bytes += d.bytes;
      summary_.damage.push_back(DamageReport{
          .file = path_, .offset = d.offset, .bytes = d.bytes, .line = 0, .reason = d.reason});
    }
  }

  // Reads records until one holds reports; false at the end of the segment.
  bool ReadNextRecord() {
    std::string_view record;
    const bool got = log_.ReadRecord(&record, &scratch_);
    CollectLogDamage();
    if (!got) {
      Finish();
      return false;
    }
    record_offset_ = log_.record_offset();
    record_size_ = record.size();
    DecodedRecord decoded;
    std::string error;
    if (!DecodeRecord(record, &storage_, &decoded, &error, &dictionary_)) {
      if (decoded.compression == Compression::kZstdDictionary && !dictionary_error_.empty()) {
        error += ": " + dictionary_error_;
      }
      AddDamage(record_offset_, record.size(), "undecodable record: " + error);
      return !stopped_;
    }
    const bool first = !seen_record_;
    seen_record_ = true;
    if (decoded.kind == RecordKind::kSegmentHeader) {
      ReadHeader(decoded.body, first);
      return !stopped_;
    }
    ++segment().records;
    ++summary_.records;
    batch_ = decoded.body;
    batch_pos_ = 0;
    return true;
  }

  void ReadHeader(std::string_view body, bool first) {
    v1::SegmentHeader header;
    if (!header.ParseFromArray(body.data(), static_cast<int>(body.size()))) {
      AddDamage(record_offset_, record_size_, "segment header does not parse");
      return;
    }
    if (header.format_version() < kOldestFormatVersion ||
        header.format_version() > kFormatVersion) {
      // A newer writer's format: nothing after this point can be read safely.
      AddDamage(record_offset_, data_.size() - record_offset_,
                "segment format version " + std::to_string(header.format_version()) +
                    " (this accelmon reads versions " + std::to_string(kOldestFormatVersion) +
                    " to " + std::to_string(kFormatVersion) + ")");
      stopped_ = true;
      return;
    }
    if (!first) return;
    segment().header = true;
    segment().writer = header.writer();
    dictionary_error_ = "the segment header carries no dictionary";
    if (!header.zstd_dictionary().empty()) {
      dictionary_error_.clear();
      std::string error;
      if (!dictionary_.Load(header.zstd_dictionary(), &error)) {
        // The header's other fields are fine; the records compressed with the dictionary are
        // each reported unreadable as they come.
        dictionary_error_ = "the segment header's zstd dictionary is unusable (" + error + ")";
        AddDamage(record_offset_, record_size_, dictionary_error_);
      }
    }
  }

  // Parses the next report of the current batch; false when the batch had none left or the one
  // found is unreadable (counted as damage).
  bool NextFromBatch(v1::NodeReport& report) {
    while (batch_pos_ < batch_.size()) {
      uint64_t tag = 0;
      const size_t field_start = batch_pos_;
      if (!ReadVarint(batch_, batch_pos_, tag)) return BatchBroken(field_start);
      if (tag != ((1u << 3) | 2u)) {  // not field 1 (reports): skip what a newer writer added
        if (!SkipField(batch_, batch_pos_, tag & 7u)) return BatchBroken(field_start);
        continue;
      }
      uint64_t length = 0;
      if (!ReadVarint(batch_, batch_pos_, length) || length > batch_.size() - batch_pos_) {
        return BatchBroken(field_start);
      }
      const char* bytes = batch_.data() + batch_pos_;
      batch_pos_ += length;
      ++report_index_;
      if (!report.ParseFromArray(bytes, static_cast<int>(length))) {
        AddDamage(record_offset_, length,
                  "report " + std::to_string(report_index_) + " of the batch does not parse");
        return false;
      }
      ++segment().reports;
      ++summary_.reports;
      segment().report_bytes += length;
      NoteTime(report, segment());
      return true;
    }
    report_index_ = 0;
    return false;
  }

  bool BatchBroken(size_t at) {
    AddDamage(record_offset_, batch_.size() - at,
              "report batch malformed at byte " + std::to_string(at) + " of the record");
    batch_pos_ = batch_.size();
    report_index_ = 0;
    return false;
  }

  void Finish() {
    finished_ = true;
    if (log_.torn_tail_bytes() > 0) {
      segment().torn_tail_bytes = log_.torn_tail_bytes();
      summary_.torn_tails.push_back(TornTail{.file = path_,
                                             .offset = data_.size() - log_.torn_tail_bytes(),
                                             .bytes = log_.torn_tail_bytes()});
    }
    if (mode_ == ReadMode::kPointInTime && !log_.damage().empty()) stopped_ = true;
  }

  const std::string& path_;  // in the reader's list of files, which outlives every origin
  const std::string_view data_;
  const ReadMode mode_;
  LogReader log_;
  ReadSummary& summary_;
  const size_t segment_index_;
  std::string scratch_;  // a fragmented record, reassembled
  std::string storage_;  // a decompressed record body
  // From the segment's header: for the records compressed with it.
  RecordDictionary dictionary_;
  std::string dictionary_error_ = "the segment's header was not read";
  std::string_view batch_;
  size_t batch_pos_ = 0;
  uint64_t report_index_ = 0;
  uint64_t record_offset_ = 0;
  uint64_t record_size_ = 0;
  size_t log_damage_seen_ = 0;
  bool seen_record_ = false;
  bool stopped_ = false;
  bool finished_ = false;
};

class JsonLinesSource final : public RecordingReader::Source {
 public:
  JsonLinesSource(const std::string& path, ReadMode mode, ReadSummary& summary)
      : path_(path), mode_(mode), summary_(summary), lines_(Open(path_)) {
    summary_.segments.push_back(NewSegment(path_, summary_.bytes));
  }

  bool Next(v1::NodeReport& report, ReportOrigin* origin) override {
    SegmentSummary& file = summary_.segments.back();
    while (!stopped_) {
      switch (lines_->Next(&report)) {
        case JsonlReader::Result::kEnd:
          if (lines_->read_failed()) {
            AddDamage(lines_->bytes_read(), 0, 0,
                      "read error: " + std::string(std::strerror(errno)));
          }
          return false;
        case JsonlReader::Result::kBadLine:
          AddDamage(lines_->line_offset(), lines_->line_bytes(), lines_->line_number(),
                    lines_->reason());
          continue;
        case JsonlReader::Result::kReport:
          ++file.records;
          ++file.reports;
          ++summary_.records;
          ++summary_.reports;
          file.report_bytes += lines_->line_bytes();
          NoteTime(report, file);
          if (origin != nullptr) {
            *origin = {
                .file = path_, .offset = lines_->line_offset(), .line = lines_->line_number()};
          }
          return true;
      }
    }
    return false;
  }

  uint64_t position() const override { return lines_->bytes_read(); }

 private:
  static std::unique_ptr<JsonlReader> Open(const std::string& path) {
    if (path == "-") return std::make_unique<JsonlReader>(std::cin, "-");
    try {
      return std::make_unique<JsonlReader>(path);
    } catch (const std::runtime_error& e) {
      throw RecordingError(e.what());
    }
  }

  void AddDamage(uint64_t offset, uint64_t bytes, uint64_t line, std::string reason) {
    summary_.segments.back().damaged_bytes += bytes;
    summary_.damage.push_back(DamageReport{.file = path_,
                                           .offset = offset,
                                           .bytes = bytes,
                                           .line = line,
                                           .reason = std::move(reason)});
    if (mode_ == ReadMode::kPointInTime) stopped_ = true;
  }

  const std::string& path_;  // in the reader's list of files, which outlives every origin
  const ReadMode mode_;
  ReadSummary& summary_;
  std::unique_ptr<JsonlReader> lines_;
  bool stopped_ = false;
};

// Does `path` begin with a segment header record? Reads its first block only.
bool BeginsWithSegmentHeader(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  std::string block(kBlockSize, '\0');
  const ssize_t n = ::pread(fd, block.data(), block.size(), 0);
  ::close(fd);
  if (n <= 0) return false;
  block.resize(static_cast<size_t>(n));
  LogReader log(block, ReadMode::kPointInTime);
  std::string_view record;
  std::string scratch;
  std::string storage;
  std::string error;
  DecodedRecord decoded;
  return log.ReadRecord(&record, &scratch) && DecodeRecord(record, &storage, &decoded, &error) &&
         decoded.kind == RecordKind::kSegmentHeader;
}

// The first non-blank byte of `path` opens a JSON object (or the file is empty).
bool LooksLikeJsonLines(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return false;
  int c = 0;
  while ((c = std::fgetc(f)) != EOF && (c == ' ' || c == '\t' || c == '\r' || c == '\n')) {
  }
  std::fclose(f);
  return c == EOF || c == '{';
}

uint64_t FileSize(const std::string& path) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  return ec ? 0 : size;
}

}  // namespace

uint64_t ReadSummary::damaged_bytes() const {
  uint64_t total = 0;
  for (const DamageReport& d : damage) total += d.bytes;
  return total;
}

std::vector<std::string> ListSegments(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (IsSegmentFileName(name)) names.push_back(name);
  }
  if (ec) throw RecordingError(dir + ": " + ec.message());
  // Zero-padded indexes: name order is index order.
  std::sort(names.begin(), names.end());
  std::vector<std::string> paths;
  paths.reserve(names.size());
  for (const std::string& name : names)
    paths.push_back((std::filesystem::path(dir) / name).string());
  return paths;
}

RecordingReader::RecordingReader(const std::string& input, ReaderOptions options)
    : input_(input), options_(options) {
  std::error_code dir_ec;
  if (input == "-" || (options_.json_lines && !std::filesystem::is_directory(input, dir_ec))) {
    summary_.format = InputFormat::kJsonLines;
    files_.push_back(input);
    if (input != "-") summary_.bytes = FileSize(input);
    OpenNext();
    return;
  }
  std::error_code ec;
  const auto status = std::filesystem::status(input, ec);
  if (ec || !std::filesystem::exists(status)) {
    throw RecordingError(input + ": " + (ec ? ec.message() : "no such file or directory"));
  }
  if (std::filesystem::is_directory(status)) {
    summary_.format = InputFormat::kDirectory;
    files_ = ListSegments(input);
    if (files_.empty()) {
      throw RecordingError(input +
                           ": not a recording (no segment files NNNNNNNNNNNNNNNNNNNN.seg in it)");
    }
  } else if (EndsWith(input, ".seg")) {
    summary_.format = InputFormat::kSegment;
    files_.push_back(input);
  } else if (LooksLikeJsonLinesName(input) || LooksLikeJsonLines(input)) {
    summary_.format = InputFormat::kJsonLines;
    files_.push_back(input);
  } else if (BeginsWithSegmentHeader(input)) {
    summary_.format = InputFormat::kSegment;
    files_.push_back(input);
  } else {
    throw RecordingError(input +
                         ": not a recording (neither a segment file nor JSON Lines, one "
                         "NodeReport per line)");
  }
  for (const std::string& file : files_) summary_.bytes += FileSize(file);
  // A JSON Lines file that cannot be opened is an error now, not a damaged read later.
  if (summary_.format == InputFormat::kJsonLines) OpenNext();
}

RecordingReader::~RecordingReader() = default;

bool RecordingReader::OpenNext() {
  if (source_) bytes_before_source_ += source_->position();
  source_.reset();
  while (next_file_ < files_.size()) {
    const std::string& path = files_[next_file_++];
    if (summary_.format == InputFormat::kJsonLines) {
      source_ = std::make_unique<JsonLinesSource>(path, options_.mode, summary_);
      return true;
    }
    std::string error;
    if (!ReadWholeFile(path, buffer_, &error)) {
      // Listed, then gone or unreadable (retention deleting the oldest segment, say).
      const uint64_t size = FileSize(path);
      summary_.segments.push_back(NewSegment(path, size));
      summary_.damage.push_back(
          DamageReport{.file = path, .offset = 0, .bytes = size, .line = 0, .reason = error});
      if (options_.mode == ReadMode::kPointInTime) return false;
      continue;
    }
    source_ = std::make_unique<SegmentSource>(path, buffer_, options_.mode, summary_);
    return true;
  }
  return false;
}

const v1::NodeReport* RecordingReader::Next(ReportOrigin* origin) {
  while (!stopped_) {
    if (source_ && source_->Next(report_, origin)) return &report_;
    if (source_ && options_.mode == ReadMode::kPointInTime && !summary_.damage.empty()) {
      stopped_ = true;
      break;
    }
    if (!OpenNext()) {
      stopped_ = true;
      break;
    }
  }
  return nullptr;
}

void RecordingReader::Drain() {
  while (Next() != nullptr) {
  }
}

uint64_t RecordingReader::bytes_done() const {
  return bytes_before_source_ + (source_ ? source_->position() : 0);
}

}  // namespace accelmon::recording
