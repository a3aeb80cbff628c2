#include "recording/segment_writer.h"

#include <fcntl.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>
#include <spdlog/spdlog.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "accelmon/v1/recording.pb.h"
#include "proto/time_format.h"
#include "recording/file_io.h"
#include "recording/log_format.h"
#include "recording/log_reader.h"
#include "recording/recording_reader.h"

namespace accelmon::recording {
namespace {

namespace fs = std::filesystem;
using google::protobuf::internal::WireFormatLite;

constexpr auto kRetentionCheckEvery = std::chrono::minutes(1);

std::string ErrnoText(int err) { return std::strerror(err); }

// The segments of `dir`, oldest (lowest index) first.
std::vector<std::pair<uint64_t, std::string>> ListSegmentFiles(const std::string& dir) {
  std::vector<std::pair<uint64_t, std::string>> found;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (auto index = SegmentFileIndex(name)) found.emplace_back(*index, it->path().string());
  }
  if (ec) throw std::runtime_error("cannot list " + dir + ": " + ec.message());
  std::sort(found.begin(), found.end());
  return found;
}

std::string ReadWholeFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error("cannot open " + path + ": " + ErrnoText(errno));
  std::string data;
  struct stat st {};
  if (::fstat(fd, &st) == 0 && st.st_size > 0) data.reserve(static_cast<size_t>(st.st_size));
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      throw std::runtime_error("cannot read " + path + ": " + ErrnoText(err));
    }
    if (n == 0) break;
    data.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return data;
}

// Calls `on_key` for each report of a ReportBatch body, in order. False when it is malformed.
template <typename OnKey>
bool ForEachReportKey(std::string_view body, OnKey on_key) {
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(body.data()),
                                            static_cast<int>(body.size()));
  while (const uint32_t tag = in.ReadTag()) {
    if (tag != WireFormatLite::MakeTag(1, WireFormatLite::WIRETYPE_LENGTH_DELIMITED)) {
      if (!WireFormatLite::SkipField(&in, tag)) return false;
      continue;
    }
    uint32_t length = 0;
    if (!in.ReadVarint32(&length)) return false;
    const auto position = static_cast<size_t>(in.CurrentPosition());
    if (length > body.size() - position) return false;
    ReportKey key;
    if (!ParseReportKey(body.substr(position, length), &key)) return false;
    if (!in.Skip(static_cast<int>(length))) return false;
    on_key(std::move(key));
  }
  return in.ConsumedEntireMessage();
}

// One segment as recovery sees it.
struct SegmentKeys {
  std::optional<v1::SegmentHeader> header;  // when its first record is a readable header
  std::vector<ReportKey> keys;              // of the reports after it, in order
};

SegmentKeys ReadSegmentKeys(const std::string& path, RecoveredWatermarks* out) {
  const std::string data = ReadWholeFile(path);
  SegmentKeys seg;
  LogReader reader(data, ReadMode::kSalvage);
  std::string_view record;
  std::string scratch;
  std::string storage;
  SegmentDecoder decoder;  // the header's dictionary, for the records after it
  bool first = true;
  while (reader.ReadRecord(&record, &scratch)) {
    DecodedRecord decoded;
    std::string error;
    if (!decoder.Decode(record, &storage, &decoded, &error)) {
      out->damage.push_back(
          fmt::format("{}: record at offset {}: {}", path, reader.record_offset(), error));
    } else if (decoded.kind == RecordKind::kSegmentHeader) {
      v1::SegmentHeader header;
      if (first &&
          header.ParseFromArray(decoded.body.data(), static_cast<int>(decoded.body.size()))) {
        seg.header = std::move(header);
      } else if (!first) {
        out->damage.push_back(
            fmt::format("{}: record at offset {}: a segment header after the first record", path,
                        reader.record_offset()));
      } else {
        out->damage.push_back(fmt::format("{}: record at offset {}: unreadable segment header",
                                          path, reader.record_offset()));
      }
    } else if (decoded.kind == RecordKind::kReportBatch) {
      const size_t before = seg.keys.size();
      if (!ForEachReportKey(decoded.body,
                            [&](ReportKey key) { seg.keys.push_back(std::move(key)); })) {
        seg.keys.resize(before);
        out->damage.push_back(fmt::format("{}: record at offset {}: malformed report batch", path,
                                          reader.record_offset()));
      }
    }
    first = false;
  }
  for (const Damage& d : reader.damage()) {
    out->damage.push_back(
        fmt::format("{}: {} bytes lost at offset {}: {}", path, d.bytes, d.offset, d.reason));
  }
  out->damaged_bytes += reader.damaged_bytes();
  return seg;
}

}  // namespace

void Batch::Add(std::string_view serialized_report, ReportKey key) {
  AppendReportToBatch(serialized_report, &body);
  keys.push_back(std::move(key));
}

void Batch::Add(const v1::NodeReport& report) {
  Add(report.SerializeAsString(),
      ReportKey{report.node(), report.agent_instance_id(), report.sequence(),
                report.has_timestamp() ? ToNanos(report.timestamp()) : 0});
}

void Batch::Clear() {
  body.clear();
  keys.clear();
}

RecoveredWatermarks RecoverWatermarks(const std::string& dir) {
  RecoveredWatermarks out;
  std::error_code ec;
  if (!fs::exists(dir, ec)) return out;
  const auto files = ListSegmentFiles(dir);
  // Newest first, until a segment with a header; the headerless newer ones come after it.
  std::vector<SegmentKeys> newer;
  for (auto it = files.rbegin(); it != files.rend(); ++it) {
    SegmentKeys seg = ReadSegmentKeys(it->second, &out);
    if (!seg.header) {
      newer.push_back(std::move(seg));
      continue;
    }
    out.segment = it->second;
    for (const v1::NodeWatermark& w : seg.header->watermarks()) {
      out.watermarks[w.node()] = Watermark{w.agent_instance_id(), w.sequence()};
    }
    newer.push_back(std::move(seg));
    break;
  }
  for (auto it = newer.rbegin(); it != newer.rend(); ++it) {
    for (const ReportKey& key : it->keys) AdvanceWatermark(out.watermarks, key);
    out.reports += it->keys.size();
  }
  return out;
}

SegmentWriter::SegmentWriter(RecordingOptions options, std::optional<Watermarks> watermarks)
    : options_(std::move(options)),
      segment_limit_(options_.max_bytes == 0
                         ? options_.segment_bytes
                         : std::min(options_.segment_bytes,
                                    std::max<uint64_t>(options_.max_bytes / 4, 2 * kBlockSize))) {
  const std::string& dir = options_.dir;
  if (dir.empty()) throw std::runtime_error("no recording directory given");
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir, ec)) {
    throw std::runtime_error("cannot create recording directory " + dir + ": " +
                             (ec ? ec.message() : "not a directory"));
  }
  const std::string lock_path = dir + "/lock";
  lock_fd_ = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock_fd_ < 0) {
    throw std::runtime_error("cannot open " + lock_path + ": " + ErrnoText(errno));
  }
  if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    ::close(lock_fd_);
    lock_fd_ = -1;
    if (err == EWOULDBLOCK) {
      throw std::runtime_error("recording directory " + dir + " is in use by another process (" +
                               lock_path + " is locked)");
    }
    throw std::runtime_error("cannot lock " + lock_path + ": " + ErrnoText(err));
  }
  try {
    if (watermarks) {
      watermarks_ = std::move(*watermarks);
    } else {
      if (options_.tail_index) {
        recovered_locations_ = RecoverLocations(dir, ListSegmentFiles(dir));
        latest_ = recovered_locations_.nodes;
      }
      if (recovered_locations_.watermarks) {
        // The index's watermarks and the reports after it: the newest segment is not read.
        recovered_.watermarks = *recovered_locations_.watermarks;
        recovered_.segment = dir + "/" + std::string(kTailIndexFile);
        recovered_.reports = recovered_locations_.reports_scanned;
        recovered_.damage = recovered_locations_.damage;
      } else {
        recovered_ = RecoverWatermarks(dir);
      }
      watermarks_ = recovered_.watermarks;
    }
    const auto now = std::chrono::steady_clock::now();
    for (const auto& [node, mark] : watermarks_) last_appended_.emplace(node, now);
    ScanDirectory();
    EnforceRetention();
    OpenSegment();
  } catch (...) {
    if (fd_ >= 0) ::close(fd_);
    ::close(lock_fd_);
    throw;
  }
}

SegmentWriter::~SegmentWriter() {
  CloseSegment();
  if (options_.tail_index && index_dirty_ && synced_) WriteIndex();
  if (lock_fd_ >= 0) ::close(lock_fd_);
}

std::string SegmentWriter::current_segment() const {
  return fd_ >= 0 ? segments_.back().path : std::string();
}

void SegmentWriter::ScanDirectory() {
  segments_.clear();
  for (const auto& [index, path] : ListSegmentFiles(options_.dir)) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) continue;  // gone meanwhile
    Segment seg;
    seg.index = index;
    seg.path = path;
    seg.bytes = static_cast<uint64_t>(st.st_size);
    seg.newest = std::chrono::system_clock::time_point(
        std::chrono::duration_cast<std::chrono::system_clock::duration>(
            std::chrono::seconds(st.st_mtim.tv_sec) +
            std::chrono::nanoseconds(st.st_mtim.tv_nsec)));
    segments_.push_back(std::move(seg));
    next_index_ = std::max(next_index_, index + 1);
  }
  stats_.segments = segments_.size();
  stats_.bytes = 0;
  for (const Segment& seg : segments_) stats_.bytes += seg.bytes;
}

void SegmentWriter::ForgetSilentNodes() {
  if (options_.forget_watermarks_after.count() <= 0) return;
  const auto horizon = std::chrono::steady_clock::now() - options_.forget_watermarks_after;
  size_t forgotten = 0;
  for (auto it = last_appended_.begin(); it != last_appended_.end();) {
    if (it->second >= horizon) {
      ++it;
      continue;
    }
    watermarks_.erase(it->first);
    it = last_appended_.erase(it);
    ++forgotten;
  }
  if (forgotten > 0) {
    index_dirty_ = true;
    spdlog::debug("recording: forgot the watermarks of {} node(s) silent for over {} ms", forgotten,
                  options_.forget_watermarks_after.count());
  }
}

void SegmentWriter::OpenSegment() {
  const uint64_t index = next_index_;
  const std::string path = SegmentFilePath(options_.dir, index);
  // O_EXCL: a writer never touches a segment it did not create.
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error("cannot create " + path + ": " + ErrnoText(errno));
  ++next_index_;

  ForgetSilentNodes();
  v1::SegmentHeader header = NewSegmentHeader(options_.writer);
  for (const auto& [node, mark] : watermarks_) {
    v1::NodeWatermark* w = header.add_watermarks();
    w->set_node(node);
    w->set_agent_instance_id(mark.agent_instance_id);
    w->set_sequence(mark.sequence);
  }
  header.set_zstd_dictionary(dictionary_);
  const std::string record = EncodeRecord(RecordKind::kSegmentHeader, header.SerializeAsString(),
                                          options_.compression, options_.zstd_level);
  LogWriter log(0);
  framed_.clear();
  log.AddRecord(record, &framed_);
  // The header is synced with the new name, so a segment that exists always begins with one.
  if (!WriteAll(fd, framed_) || ::fdatasync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    ::unlink(path.c_str());
    throw std::runtime_error("cannot write " + path + ": " + ErrnoText(err));
  }
  SyncDirectory(options_.dir);

  fd_ = fd;
  log_ = log;
  dirty_ = false;
  current_has_batches_ = false;
  std::string error;
  if (!dictionary_.empty() && !compressor_.Load(dictionary_, options_.zstd_level, &error)) {
    // Not expected (zstd made it): the records go plain zstd, which any reader reads.
    spdlog::warn("recording: {}: records without the dictionary", error);
  }
  samples_.clear();
  sample_bytes_ = 0;
  segments_.push_back(Segment{.index = index,
                              .path = path,
                              .bytes = log.offset(),
                              .newest = std::chrono::system_clock::now()});
  ++stats_.segments;
  stats_.bytes += log.offset();
  stats_.bytes_written += log.offset();
  spdlog::debug("recording: began segment {} ({} node watermarks)", path, watermarks_.size());
}

void SegmentWriter::CloseSegment() {
  if (fd_ < 0) return;
  if (dirty_ && ::fdatasync(fd_) != 0) {
    spdlog::warn("recording: cannot sync {}: {}", segments_.back().path, ErrnoText(errno));
    synced_ = false;  // the index must not claim what may be lost
  } else {
    synced_ = true;
  }
  ::close(fd_);
  fd_ = -1;
  dirty_ = false;
}

void SegmentWriter::WriteFramed(const std::string& bytes) {
  Segment& seg = segments_.back();
  if (WriteAll(fd_, bytes)) return;
  const int err = errno;
  // Cut the partial record off so that later appends stay readable; failing that, the next
  // append begins a new segment and this one ends in a torn tail, which readers accept.
  if (::ftruncate(fd_, static_cast<off_t>(seg.bytes)) != 0) {
    ::close(fd_);
    fd_ = -1;
    dirty_ = false;
  }
  throw std::runtime_error("cannot write " + seg.path + ": " + ErrnoText(err));
}

bool SegmentWriter::SamplesReady() const {
  return sample_bytes_ >= options_.dictionary_sample_bytes && !samples_.empty();
}

void SegmentWriter::SampleReports(const Batch& batch) {
  if (options_.compression != Compression::kZstd || options_.dictionary_bytes == 0) return;
  if (SamplesReady() || !SplitReportBatch(batch.body, &split_)) return;
  for (const std::string_view report : split_) {
    samples_.emplace_back(report);
    sample_bytes_ += report.size();
    if (SamplesReady()) break;
  }
}

void SegmentWriter::MakeDictionary() {
  if (!SamplesReady()) return;  // keep the one we have, if any
  const auto start = std::chrono::steady_clock::now();
  std::string dictionary = BuildDictionary(samples_, options_.dictionary_bytes);
  if (dictionary.empty()) return;
  dictionary_ = std::move(dictionary);
  ++stats_.dictionaries;
  stats_.dictionary_bytes = dictionary_.size();
  spdlog::debug("recording: zstd dictionary of {} bytes from {} reports in {} ms",
                dictionary_.size(), samples_.size(),
                std::chrono::duration_cast<std::chrono::milliseconds>(
                    std::chrono::steady_clock::now() - start)
                    .count());
}

void SegmentWriter::AppendBatch(const Batch& batch) {
  if (batch.empty()) return;
  SampleReports(batch);
  // The first segment after a start has no dictionary: once the samples are in, the next one
  // begins with it.
  const bool for_dictionary = fd_ >= 0 && current_has_batches_ && !compressor_.loaded() &&
                              SamplesReady() && dictionary_.empty();
  const auto encode = [&] {
    return compressor_.loaded() ? compressor_.Encode(RecordKind::kReportBatch, batch.body)
                                : EncodeRecord(RecordKind::kReportBatch, batch.body,
                                               options_.compression, options_.zstd_level);
  };
  std::string record = for_dictionary ? std::string() : encode();
  // Framed for the current segment first, to see whether it still fits.
  LogWriter framing = log_;
  framed_.clear();
  framing.AddRecord(record, &framed_);
  const bool full = fd_ >= 0 && current_has_batches_ && framing.offset() > segment_limit_;
  if (full || for_dictionary || fd_ < 0) {
    const std::string closed = fd_ >= 0 ? segments_.back().path : std::string();
    if (full || for_dictionary) MakeDictionary();
    CloseSegment();
    OpenSegment();
    if (full || for_dictionary) {
      spdlog::debug("recording: rotated {} -> {}{}", closed, segments_.back().path,
                    for_dictionary ? " (to begin using a zstd dictionary)" : "");
    }
    EnforceRetention();
    record = encode();
    framing = log_;
    framed_.clear();
    framing.AddRecord(record, &framed_);
  }
  WriteFramed(framed_);
  synced_ = false;
  if (options_.tail_index) {
    const uint64_t index = segments_.back().index;
    const uint64_t offset = segments_.back().bytes;  // the record starts here, or after padding
    for (const ReportKey& key : batch.keys) {
      latest_[key.node] =
          ReportLocation{.segment = index, .offset = offset, .time_ns = key.time_ns};
    }
    index_dirty_ = true;
  }
  log_ = framing;
  dirty_ = true;
  current_has_batches_ = true;
  Segment& seg = segments_.back();
  stats_.bytes += framing.offset() - seg.bytes;
  stats_.bytes_written += framing.offset() - seg.bytes;
  seg.bytes = framing.offset();
  seg.newest = std::chrono::system_clock::now();
  ++stats_.records_written;
  stats_.reports_written += batch.keys.size();
  const auto now = std::chrono::steady_clock::now();
  for (const ReportKey& key : batch.keys) {
    AdvanceWatermark(watermarks_, key);
    if (options_.forget_watermarks_after.count() > 0) last_appended_[key.node] = now;
  }
  if (std::chrono::steady_clock::now() - last_retention_check_ >= kRetentionCheckEvery) {
    EnforceRetention();
  }
}

void SegmentWriter::Sync() {
  if (fd_ < 0 || !dirty_) return;
  if (::fdatasync(fd_) == 0) {
    dirty_ = false;
    synced_ = true;
    const auto now = std::chrono::steady_clock::now();
    if (options_.tail_index && index_dirty_ && now - last_index_write_ >= std::chrono::seconds(1)) {
      last_index_write_ = now;
      WriteIndex();
    }
    return;
  }
  const int err = errno;
  // After a failed fdatasync the kernel may have dropped the dirty pages: nothing more goes to
  // this file.
  ::close(fd_);
  fd_ = -1;
  dirty_ = false;
  throw std::runtime_error("cannot sync " + segments_.back().path + ": " + ErrnoText(err));
}

void SegmentWriter::EnforceRetention() {
  last_retention_check_ = std::chrono::steady_clock::now();
  const auto now = std::chrono::system_clock::now();
  // The segment being written is never deleted.
  const auto deletable = [&] { return segments_.size() > (fd_ >= 0 ? 1u : 0u); };
  bool deleted = false;
  if (options_.retention.count() > 0) {
    while (deletable() && now - segments_.front().newest > options_.retention) {
      spdlog::debug("recording: deleting {}: its newest record is older than {} ms",
                    segments_.front().path, options_.retention.count());
      DeleteOldest();
      deleted = true;
    }
  }
  if (options_.max_bytes > 0) {
    while (deletable() && stats_.bytes > options_.max_bytes) {
      spdlog::debug("recording: deleting {}: the recording is over {} bytes",
                    segments_.front().path, options_.max_bytes);
      DeleteOldest();
      deleted = true;
    }
  }
  if (deleted) SyncDirectory(options_.dir);
}

void SegmentWriter::WriteIndex() {
  if (!segments_.empty()) {
    const uint64_t oldest = segments_.front().index;
    std::erase_if(latest_, [&](const auto& node) { return node.second.segment < oldest; });
  }
  // Called only when everything appended is synced: the records end where the segments end,
  // and the watermarks are theirs.
  const uint64_t segment = segments_.empty() ? 0 : segments_.back().index;
  const uint64_t end = segments_.empty() ? 0 : segments_.back().bytes;
  if (WriteTailIndex(options_.dir, latest_, watermarks_, segment, end)) {
    index_dirty_ = false;
    if (index_failing_) spdlog::info("recording: writing {} again", kTailIndexFile);
    index_failing_ = false;
  } else if (!index_failing_) {
    index_failing_ = true;
    spdlog::warn("recording: cannot write {}/{}: {} (a restart will read more of the recording)",
                 options_.dir, kTailIndexFile, ErrnoText(errno));
  }
}

void SegmentWriter::DeleteOldest() {
  const Segment seg = segments_.front();
  segments_.erase(segments_.begin());
  if (::unlink(seg.path.c_str()) != 0 && errno != ENOENT) {
    // Forgotten all the same: retrying every minute would only repeat the warning.
    spdlog::warn("recording: cannot delete {}: {}", seg.path, ErrnoText(errno));
  }
  --stats_.segments;
  stats_.bytes -= seg.bytes;
  ++stats_.segments_deleted;
}

}  // namespace accelmon::recording
