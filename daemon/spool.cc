#include "daemon/spool.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/file.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>

namespace accelmon {
namespace {

namespace fs = std::filesystem;

constexpr size_t kHeaderBytes = 8;
// Far above any real report; a larger length is damage, not a record.
constexpr uint32_t kMaxRecordBytes = 64u << 20;
constexpr auto kSyncEvery = std::chrono::seconds(1);

void PutLe32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint32_t GetLe32(const char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

uint32_t Crc32(std::string_view data) {
  return static_cast<uint32_t>(crc32(crc32(0L, Z_NULL, 0),
                                     reinterpret_cast<const Bytef*>(data.data()),
                                     static_cast<uInt>(data.size())));
}

std::string ErrnoText() { return std::strerror(errno); }

bool WriteAll(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

void SyncDirectory(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

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

std::string EncodeSpoolRecord(std::string_view payload) {
  std::string out;
  out.reserve(kHeaderBytes + payload.size());
  PutLe32(out, static_cast<uint32_t>(payload.size()));
  PutLe32(out, Crc32(payload));
  out.append(payload);
  return out;
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

  size_t offset = 0;
  while (offset < data.size()) {
    const size_t left = data.size() - offset;
    if (left < kHeaderBytes) break;  // torn header: an interrupted write
    const uint32_t length = GetLe32(data.data() + offset);
    const uint32_t crc = GetLe32(data.data() + offset + 4);
    if (length > kMaxRecordBytes) {
      scan.damage = fmt::format("implausible record length {} at offset {}", length, offset);
      break;
    }
    if (left - kHeaderBytes < length) break;  // torn payload: an interrupted write
    const std::string_view payload(data.data() + offset + kHeaderBytes, length);
    if (Crc32(payload) != crc) {
      scan.damage = fmt::format("checksum mismatch in the record at offset {}", offset);
      break;
    }
    on_record(payload);
    ++scan.records;
    offset += kHeaderBytes + length;
  }
  scan.valid_bytes = offset;
  scan.skipped_bytes = data.size() - offset;
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
}

void Spool::SyncLocked() {
  if (fd_ >= 0 && dirty_) ::fdatasync(fd_);
  dirty_ = false;
  last_sync_ = std::chrono::steady_clock::now();
}

bool Spool::Append(const v1::NodeReport& report) {
  const std::string record = EncodeSpoolRecord(report.SerializeAsString());
  std::lock_guard lock(mu_);
  if (fd_ >= 0 && segments_.back().records > 0 &&
      segments_.back().bytes + record.size() > segment_bytes_) {
    SyncLocked();
    ::close(fd_);
    fd_ = -1;
  }
  if (fd_ < 0) OpenNewSegmentLocked();
  bool ok = fd_ >= 0;
  if (ok) {
    Segment& seg = segments_.back();
    ok = WriteAll(fd_, record);
    if (!ok) {
      // Cut a partial record off so that later appends stay readable.
      const std::string reason = ErrnoText();
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
      if (seg.first_sequence == 0) seg.first_sequence = report.sequence();
      seg.last_sequence = report.sequence();
      ++seg.records;
      seg.bytes += record.size();
      total_bytes_ += record.size();
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
