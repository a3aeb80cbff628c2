#include "daemon/agent/spool.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>

#include "accelmon/v1/recording.pb.h"
#include "recording/file_io.h"
#include "recording/log_format.h"
#include "recording/log_reader.h"
#include "recording/record_codec.h"

namespace accelmon {
namespace {

using recording::SyncDirectory;
using recording::WriteAll;

namespace fs = std::filesystem;

constexpr auto kSyncEvery = std::chrono::seconds(1);

// The reports of a ReportBatch body, as the wire bytes of each: field 1 (tag 0x0a), a varint
// length, the bytes. False on anything else.
bool SplitReportBatch(std::string_view body, const std::function<void(std::string_view)>& each) {
  while (!body.empty()) {
    if (body[0] != '\x0a') return false;
    body.remove_prefix(1);
    uint64_t length = 0;
    for (int shift = 0;; shift += 7) {
      if (body.empty() || shift > 63) return false;
      const auto byte = static_cast<uint8_t>(body[0]);
      body.remove_prefix(1);
      length |= uint64_t{byte & 0x7fu} << shift;
      if ((byte & 0x80) == 0) break;
    }
    if (length > body.size()) return false;
    each(body.substr(0, length));
    body.remove_prefix(length);
  }
  return true;
}

std::string ErrnoText() { return std::strerror(errno); }

// "00000000000000000042.seg" -> 42.
std::optional<uint64_t> SegmentIndex(const std::string& name) {
  if (name.size() != 24 || !name.ends_with(".seg")) return std::nullopt;
  uint64_t v = 0;
  for (size_t i = 0; i < 20; ++i) {
    if (name[i] < '0' || name[i] > '9') return std::nullopt;
    v = v * 10 + static_cast<uint64_t>(name[i] - '0');
  }
  return v;
}

std::string SegmentPath(const std::string& dir, uint64_t index) {
  return fmt::format("{}/{:020}.seg", dir, index);
}

}  // namespace

void AppendSpoolSegmentHeader(recording::LogWriter* writer, std::string* out) {
  v1::SegmentHeader header;
  header.set_format_version(recording::kFormatVersion);
  header.set_writer("agent-spool");
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(now);
  header.mutable_created()->set_seconds(seconds.count());
  header.mutable_created()->set_nanos(static_cast<int32_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(now - seconds).count()));
  writer->AddRecord(
      recording::EncodeRecord(recording::RecordKind::kSegmentHeader, header.SerializeAsString(),
                              recording::Compression::kNone),
      out);
}

void AppendSpoolReport(std::string_view serialized_report, recording::LogWriter* writer,
                       std::string* out) {
  std::string body;
  recording::AppendReportToBatch(serialized_report, &body);
  writer->AddRecord(recording::EncodeRecord(recording::RecordKind::kReportBatch, body,
                                            recording::Compression::kNone),
                    out);
}

SegmentScan ScanSegment(const std::string& path,
                        const std::function<void(std::string_view payload)>& on_record,
                        std::string* error) {
  SegmentScan scan;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (error) *error = "cannot open " + path + ": " + ErrnoText();
    return scan;
  }
  std::ostringstream buf;
  buf << in.rdbuf();
  const std::string data = std::move(buf).str();

  recording::LogReader reader(data, recording::ReadMode::kPointInTime);
  std::string_view record;
  std::string scratch;
  std::string storage;
  uint64_t valid_end = 0;
  while (reader.ReadRecord(&record, &scratch)) {
    recording::DecodedRecord decoded;
    std::string why;
    if (!recording::DecodeRecord(record, &storage, &decoded, &why)) {
      scan.damage = fmt::format("{} in the record at offset {}", why, reader.record_offset());
      break;
    }
    if (decoded.kind == recording::RecordKind::kReportBatch) {
      uint64_t reports = 0;
      if (!SplitReportBatch(decoded.body, [&](std::string_view) { ++reports; })) {
        scan.damage = fmt::format("malformed report batch in the record at offset {}",
                                  reader.record_offset());
        break;
      }
      SplitReportBatch(decoded.body, on_record);
      scan.records += reports;
    }
    valid_end = reader.valid_end();
  }
  if (scan.damage.empty() && !reader.damage().empty()) {
    const recording::Damage& damage = reader.damage().front();
    scan.damage = fmt::format("{} at offset {}", damage.reason, damage.offset);
  }
  scan.valid_bytes = valid_end;
  scan.skipped_bytes = data.size() - valid_end;
  return scan;
}

bool WriteSpoolState(const std::string& dir, const SpoolState& state, std::string* error) {
  const std::string path = dir + "/state";
  const std::string tmp = path + ".tmp";
  const std::string text = fmt::format("accelmon-spool 1\ninstance {}\nacknowledged {}\n",
                                       state.instance_id, state.acknowledged);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    if (error) *error = "cannot write " + tmp + ": " + ErrnoText();
    return false;
  }
  const bool ok = WriteAll(fd, text) && ::fdatasync(fd) == 0;
  const std::string reason = ErrnoText();
  ::close(fd);
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    if (error) *error = "cannot write " + path + ": " + (ok ? ErrnoText() : reason);
    return false;
  }
  SyncDirectory(dir);
  return true;
}

SpoolState ReadSpoolState(const std::string& dir, std::string* error) {
  const std::string path = dir + "/state";
  std::ifstream in(path);
  if (!in) {
    if (error) *error = path + " is missing";
    return {};
  }
  std::string magic, version, key_instance, instance, key_ack;
  uint64_t acknowledged = 0;
  if (!(in >> magic >> version >> key_instance >> instance >> key_ack >> acknowledged) ||
      magic != "accelmon-spool" || version != "1" || key_instance != "instance" ||
      key_ack != "acknowledged" || instance.empty()) {
    if (error) *error = path + " is not a valid spool state file";
    return {};
  }
  return {instance, acknowledged};
}

Spool::Spool(SpoolOptions options, const std::string& fresh_instance_id)
    : options_(std::move(options)),
      segment_bytes_(
          std::max<uint64_t>(4096, std::min(options_.segment_bytes, options_.max_bytes / 4))) {
  const std::string& dir = options_.dir;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir, ec)) {
    throw std::runtime_error("cannot create spool directory " + dir + ": " +
                             (ec ? ec.message() : "not a directory"));
  }
  const std::string lock_path = dir + "/lock";
  lock_fd_ = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock_fd_ < 0) throw std::runtime_error("cannot open " + lock_path + ": " + ErrnoText());
  if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    ::close(lock_fd_);
    throw std::runtime_error("spool directory " + dir + " is in use by another agent");
  }

  std::string state_error;
  SpoolState state = ReadSpoolState(dir, &state_error);
  const bool had_state = !state.instance_id.empty();

  std::vector<std::pair<uint64_t, std::string>> found;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (auto index = SegmentIndex(name)) found.emplace_back(*index, entry.path().string());
  }
  std::sort(found.begin(), found.end());

  std::string last_instance;
  for (const auto& [index, path] : found) {
    Segment seg{.index = index, .path = path};
    std::string read_error;
    const SegmentScan scan = ScanSegment(
        path,
        [&](std::string_view payload) {
          v1::NodeReport report;
          if (!report.ParseFromArray(payload.data(), static_cast<int>(payload.size()))) return;
          if (seg.first_sequence == 0) seg.first_sequence = report.sequence();
          seg.last_sequence = std::max(seg.last_sequence, report.sequence());
          last_instance = report.agent_instance_id();
        },
        &read_error);
    if (!read_error.empty()) {
      spdlog::warn("spool: {}; ignored", read_error);
      continue;
    }
    seg.records = scan.records;
    seg.bytes = scan.valid_bytes + scan.skipped_bytes;
    skipped_at_open_ += scan.skipped_bytes;
    if (!scan.damage.empty()) {
      spdlog::warn("spool: {}: {}; skipped the remaining {} bytes of this segment", path,
                   scan.damage, scan.skipped_bytes);
    } else if (scan.skipped_bytes > 0) {
      spdlog::info("spool: {} ends in a torn record ({} bytes, an interrupted write); ignored",
                   path, scan.skipped_bytes);
    }
    last_sequence_ = std::max(last_sequence_.load(), seg.last_sequence);
    total_bytes_ += seg.bytes;
    segments_.push_back(std::move(seg));
  }

  if (had_state) {
    instance_id_ = state.instance_id;
    acknowledged_ = state.acknowledged;
  } else if (!last_instance.empty()) {
    // The state file was lost: keep the records' instance and re-send them all (the exporter
    // drops what it already has).
    spdlog::warn("spool: {}; continuing instance {} from the spooled reports", state_error,
                 last_instance);
    instance_id_ = last_instance;
  } else {
    instance_id_ = fresh_instance_id;
  }
  persisted_acknowledged_ = acknowledged_;
  dropped_through_ = acknowledged_;
  // Deleted segments are always at or below the persisted watermark, so sequences continue after
  // it even when no segment is left.
  last_sequence_ = std::max(last_sequence_.load(), acknowledged_);

  std::lock_guard lock(mu_);
  PersistLocked();  // the instance id is on disk before any report that carries it
  last_persist_ = std::chrono::steady_clock::now();
}

Spool::~Spool() {
  Close();
  if (lock_fd_ >= 0) ::close(lock_fd_);
}

uint64_t Spool::acknowledged() const {
  std::lock_guard lock(mu_);
  return acknowledged_;
}

uint64_t Spool::unacknowledged() const {
  std::lock_guard lock(mu_);
  const uint64_t settled = std::max(acknowledged_, dropped_through_);
  const uint64_t last = last_sequence_.load();
  return last > settled ? last - settled : 0;
}

uint64_t Spool::dropped_reports() const {
  std::lock_guard lock(mu_);
  return dropped_;
}

uint64_t Spool::dropped_through() const {
  std::lock_guard lock(mu_);
  return dropped_through_;
}

uint64_t Spool::bytes() const {
  std::lock_guard lock(mu_);
  return total_bytes_;
}

size_t Spool::segments() const {
  std::lock_guard lock(mu_);
  return segments_.size();
}

void Spool::OpenNewSegmentLocked() {
  const uint64_t index = segments_.empty() ? 1 : segments_.back().index + 1;
  Segment seg{.index = index, .path = SegmentPath(options_.dir, index)};
  // O_TRUNC: a file of this name can only be one that held no readable record.
  fd_ = ::open(seg.path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) return;
  segments_.push_back(std::move(seg));
  writer_ = recording::LogWriter();
  header_pending_ = true;
}

void Spool::SyncLocked() {
  if (fd_ >= 0 && dirty_) ::fdatasync(fd_);
  dirty_ = false;
  last_sync_ = std::chrono::steady_clock::now();
}

bool Spool::Append(const v1::NodeReport& report) {
  const std::string serialized = report.SerializeAsString();
  // The framed size is at most the record plus a header per block touched and a block's padding.
  const uint64_t framed_bound =
      serialized.size() + 16 +
      recording::kHeaderSize * (serialized.size() / recording::kBlockSize + 3);
  std::lock_guard lock(mu_);
  if (fd_ >= 0 && segments_.back().records > 0 &&
      segments_.back().bytes + framed_bound > segment_bytes_) {
    SyncLocked();
    ::close(fd_);
    fd_ = -1;
  }
  if (fd_ < 0) OpenNewSegmentLocked();
  bool ok = fd_ >= 0;
  if (ok) {
    Segment& seg = segments_.back();
    // The segment's header and the report in one write(2).
    std::string bytes;
    if (header_pending_) AppendSpoolSegmentHeader(&writer_, &bytes);
    AppendSpoolReport(serialized, &writer_, &bytes);
    ok = WriteAll(fd_, bytes);
    if (!ok) {
      // Cut a partial record off so that later appends stay readable.
      const std::string reason = ErrnoText();
      writer_ = recording::LogWriter(seg.bytes);
      if (::ftruncate(fd_, static_cast<off_t>(seg.bytes)) != 0) {
        // Unknown tail: start a fresh segment for the next report.
        ::close(fd_);
        fd_ = -1;
      }
      errno = 0;
      if (!append_failing_) {
        spdlog::error("spool: cannot write to {}: {}; keeping reports in memory only", seg.path,
                      reason);
      }
    } else {
      header_pending_ = false;
      if (seg.first_sequence == 0) seg.first_sequence = report.sequence();
      seg.last_sequence = report.sequence();
      ++seg.records;
      seg.bytes += bytes.size();
      total_bytes_ += bytes.size();
      last_sequence_ = std::max(last_sequence_.load(), report.sequence());
      dirty_ = true;
    }
  } else if (!append_failing_) {
    spdlog::error("spool: cannot create a segment in {}: {}; keeping reports in memory only",
                  options_.dir, ErrnoText());
  }
  if (ok && append_failing_) spdlog::info("spool: writing to {} again", options_.dir);
  append_failing_ = !ok;

  const auto now = std::chrono::steady_clock::now();
  if (now - last_sync_ >= kSyncEvery) SyncLocked();
  while (total_bytes_ > options_.max_bytes && segments_.size() > 1) DropOldestLocked();
  return ok;
}

void Spool::DropOldestLocked() {
  const Segment seg = segments_.front();
  const uint64_t settled = std::max(acknowledged_, dropped_through_);
  uint64_t lost = 0;
  if (seg.last_sequence > settled) {
    lost = seg.first_sequence > settled ? seg.records
                                        : std::min(seg.records, seg.last_sequence - settled);
  }
  ::unlink(seg.path.c_str());
  segments_.erase(segments_.begin());
  total_bytes_ -= seg.bytes;
  dropped_ += lost;
  dropped_through_ = std::max(dropped_through_, seg.last_sequence);
  spdlog::warn("spool: over {} bytes; dropped the oldest segment with {} unacknowledged report(s)",
               options_.max_bytes, lost);
}

void Spool::PersistLocked() {
  std::string error;
  if (!WriteSpoolState(options_.dir, {instance_id_, acknowledged_}, &error)) {
    spdlog::warn("spool: {}", error);
    return;
  }
  persisted_acknowledged_ = acknowledged_;
  // Only segments at or below the persisted watermark go: after a crash, sequences continue
  // after max(watermark, newest spooled record).
  while (!segments_.empty()) {
    const Segment& seg = segments_.front();
    const bool active = fd_ >= 0 && segments_.size() == 1;
    if (active || seg.last_sequence > persisted_acknowledged_) break;
    ::unlink(seg.path.c_str());
    total_bytes_ -= seg.bytes;
    segments_.erase(segments_.begin());
  }
}

void Spool::Acknowledge(uint64_t sequence) {
  std::lock_guard lock(mu_);
  acknowledged_ = std::max(acknowledged_, sequence);
  const auto now = std::chrono::steady_clock::now();
  if (acknowledged_ != persisted_acknowledged_ && now - last_persist_ >= kSyncEvery) {
    last_persist_ = now;
    PersistLocked();
  }
}

std::vector<std::shared_ptr<const v1::NodeReport>> Spool::Read(uint64_t after, uint64_t before,
                                                               size_t limit,
                                                               uint64_t* scanned_through) {
  std::vector<Segment> segments;
  uint64_t last = 0;
  {
    std::lock_guard lock(mu_);
    segments = segments_;
    last = last_sequence_.load();
  }
  std::vector<std::shared_ptr<const v1::NodeReport>> out;
  for (const Segment& seg : segments) {
    if (out.size() >= limit) break;
    if (seg.records == 0 || seg.last_sequence <= after || seg.first_sequence >= before) continue;
    std::string error;  // a segment deleted meanwhile holds nothing we need
    ScanSegment(
        seg.path,
        [&](std::string_view payload) {
          if (out.size() >= limit) return;
          auto report = std::make_shared<v1::NodeReport>();
          if (!report->ParseFromArray(payload.data(), static_cast<int>(payload.size()))) return;
          if (report->sequence() > after && report->sequence() < before) {
            out.push_back(std::move(report));
          }
        },
        &error);
  }
  if (scanned_through != nullptr) {
    *scanned_through =
        out.size() >= limit ? out.back()->sequence() : std::min(last, before == 0 ? 0 : before - 1);
  }
  return out;
}

void Spool::Close() {
  std::lock_guard lock(mu_);
  if (fd_ >= 0) {
    SyncLocked();
    ::close(fd_);
    fd_ = -1;
  }
  PersistLocked();
}

}  // namespace accelmon
