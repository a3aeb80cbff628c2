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
#include <iterator>
#include <stdexcept>

#include "accelmon/v1/recording.pb.h"
#include "recording/file_io.h"
#include "recording/log_format.h"
#include "recording/log_reader.h"
#include "recording/record_codec.h"
#include "recording/recording_reader.h"
#include "recording/segment_writer.h"

// The on-disk format is the one spools always had (docs/recording-format.md, "Agent spool"): a
// spool directory written before this reader existed is read exactly as before.

namespace accelmon {
namespace {

using recording::SyncDirectory;
using recording::WriteAll;

namespace fs = std::filesystem;

constexpr auto kSyncEvery = std::chrono::seconds(1);

std::string ErrnoText() { return std::strerror(errno); }

// What one point-in-time pass over some of a segment's bytes found.
struct BytesScan {
  uint64_t reports = 0;
  uint64_t valid_end = 0;  // segment offset just past the last good record
  std::string damage;      // why and where reading stopped early; empty otherwise
  bool stopped = false;    // on_report asked to stop
};

// Reads the records of `data`, the segment from `offset` (a record boundary) on, calling
// `on_report` with each report's wire bytes and the offset of its record; it returns false to
// stop. Stops at the first damage. `reports` is the scratch for a batch's reports.
template <typename OnReport>
BytesScan ScanBytes(std::string_view data, uint64_t offset, OnReport on_report) {
  BytesScan scan;
  scan.valid_end = offset;
  recording::LogReader reader(data, recording::ReadMode::kPointInTime, offset);
  std::string_view record;
  std::string scratch;
  std::string storage;
  std::vector<std::string_view> reports;
  while (reader.ReadRecord(&record, &scratch)) {
    recording::DecodedRecord decoded;
    std::string why;
    if (!recording::DecodeRecord(record, &storage, &decoded, &why)) {
      scan.damage = fmt::format("{} in the record at offset {}", why, reader.record_offset());
      return scan;
    }
    if (decoded.kind == recording::RecordKind::kReportBatch) {
      // The spool writes nothing but reports into a batch: any other field is damage too.
      uint64_t other_fields = 0;
      if (!recording::SplitReportBatch(decoded.body, &reports, &other_fields) || other_fields > 0) {
        scan.damage = fmt::format("malformed report batch in the record at offset {}",
                                  reader.record_offset());
        return scan;
      }
      scan.reports += reports.size();
      scan.valid_end = reader.valid_end();
      for (const std::string_view report : reports) {
        if (!on_report(report, reader.record_offset())) {
          scan.stopped = true;
          return scan;
        }
      }
    }
    scan.valid_end = reader.valid_end();
  }
  if (!reader.damage().empty()) {
    const recording::Damage& damage = reader.damage().front();
    scan.damage = fmt::format("{} at offset {}", damage.reason, damage.offset);
  }
  return scan;
}

}  // namespace

void AppendSpoolSegmentHeader(recording::LogWriter* writer, std::string* out) {
  writer->AddRecord(
      recording::EncodeRecord(recording::RecordKind::kSegmentHeader,
                              recording::NewSegmentHeader("agent-spool").SerializeAsString(),
                              recording::Compression::kNone),
      out);
}

void AppendSpoolReport(std::string_view serialized_report, recording::LogWriter* writer,
                       std::string* out) {
  std::string record = recording::UncompressedRecordPrefix(recording::RecordKind::kReportBatch);
  recording::AppendReportToBatch(serialized_report, &record);
  writer->AddRecord(record, out);
}

SegmentScan ScanSegment(const std::string& path,
                        const std::function<void(std::string_view payload)>& on_record,
                        std::string* error) {
  SegmentScan scan;
  std::string data;
  if (!recording::ReadFileRange(path, 0, &data)) {
    if (error) *error = "cannot read " + path + ": " + ErrnoText();
    return scan;
  }
  const BytesScan bytes = ScanBytes(data, 0, [&](std::string_view payload, uint64_t) {
    on_record(payload);
    return true;
  });
  scan.records = bytes.reports;
  scan.valid_bytes = bytes.valid_end;
  scan.skipped_bytes = data.size() - bytes.valid_end;
  scan.damage = bytes.damage;
  return scan;
}

void Spool::Segment::AddMark(uint64_t sequence, uint64_t offset) {
  if (marks.empty() || offset >= marks.back().second + recording::kBlockSize) {
    marks.emplace_back(sequence, offset);
  }
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

  std::vector<std::string> found;
  try {
    found = recording::ListSegments(dir);
  } catch (const std::exception& e) {
    ::close(lock_fd_);
    throw std::runtime_error(std::string("cannot list spool directory ") + e.what());
  }

  // Each segment is read once, here; later reads start at a mark near what they want.
  std::string last_instance;
  std::string data;
  for (const std::string& path : found) {
    const auto index = recording::SegmentFileIndex(fs::path(path).filename().string());
    Segment seg{.index = index.value_or(0), .path = path};
    if (!recording::ReadFileRange(path, 0, &data)) {
      spdlog::warn("spool: cannot read {}: {}; ignored", path, ErrnoText());
      continue;
    }
    const BytesScan scan = ScanBytes(data, 0, [&](std::string_view payload, uint64_t offset) {
      recording::ReportKey key;
      if (!recording::ParseReportKey(payload, &key)) return true;
      if (seg.first_sequence == 0) seg.first_sequence = key.sequence;
      seg.last_sequence = std::max(seg.last_sequence, key.sequence);
      seg.AddMark(key.sequence, offset);
      last_instance = std::move(key.agent_instance_id);
      return true;
    });
    const uint64_t skipped = data.size() - scan.valid_end;
    seg.records = scan.reports;
    seg.bytes = data.size();
    seg.readable_end = scan.valid_end;
    skipped_at_open_ += skipped;
    if (!scan.damage.empty()) {
      spdlog::warn("spool: {}: {}; skipped the remaining {} bytes of this segment", path,
                   scan.damage, skipped);
    } else if (skipped > 0) {
      spdlog::info("spool: {} ends in a torn record ({} bytes, an interrupted write); ignored",
                   path, skipped);
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
  const uint64_t settled = std::max(acknowledged_, dropped_through_) + holes_.size();
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

size_t Spool::tail_reports() const {
  std::lock_guard lock(mu_);
  return tail_.size();
}

uint64_t Spool::tail_bytes() const {
  std::lock_guard lock(mu_);
  return tail_bytes_;
}

void Spool::OpenNewSegmentLocked() {
  const uint64_t index = segments_.empty() ? 1 : segments_.back().index + 1;
  Segment seg{.index = index, .path = recording::SegmentFilePath(options_.dir, index)};
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

bool Spool::Append(const v1::NodeReport& report) { return AppendShared(report, nullptr); }

void Spool::Append(std::shared_ptr<const v1::NodeReport> report) {
  const v1::NodeReport& r = *report;
  AppendShared(r, std::move(report));
}

bool Spool::AppendShared(const v1::NodeReport& report,
                         std::shared_ptr<const v1::NodeReport> shared) {
  // Serialised once, straight into its record: a ReportBatch holding just this report.
  std::string record = recording::UncompressedRecordPrefix(recording::RecordKind::kReportBatch);
  recording::AppendReportToBatch(report, &record);
  // The framed size is at most the record plus a header per block touched and a block's padding
  // (AppendReportToBatch left the report's size cached).
  const auto serialized_size = static_cast<uint64_t>(report.GetCachedSize());
  const uint64_t framed_bound =
      serialized_size + 16 + recording::kHeaderSize * (serialized_size / recording::kBlockSize + 3);
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
    framed_.clear();
    if (header_pending_) AppendSpoolSegmentHeader(&writer_, &framed_);
    const uint64_t record_offset = writer_.next_record_offset();
    writer_.AddRecord(record, &framed_);
    ok = WriteAll(fd_, framed_);
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
        spdlog::error("spool: cannot write to {}: {}; keeping reports in memory until it can",
                      seg.path, reason);
      }
    } else {
      header_pending_ = false;
      if (seg.first_sequence == 0) seg.first_sequence = report.sequence();
      seg.last_sequence = report.sequence();
      seg.AddMark(report.sequence(), record_offset);
      ++seg.records;
      seg.bytes += framed_.size();
      seg.readable_end = seg.bytes;
      total_bytes_ += framed_.size();
      last_sequence_ = std::max(last_sequence_.load(), report.sequence());
      dirty_ = true;
    }
  } else if (!append_failing_) {
    spdlog::error(
        "spool: cannot create a segment in {}: {}; keeping reports in memory until it can",
        options_.dir, ErrnoText());
  }
  if (ok && append_failing_) spdlog::info("spool: writing to {} again", options_.dir);
  append_failing_ = !ok;
  if (!ok && report.sequence() > std::max(acknowledged_, dropped_through_)) {
    // In memory, in sequence order with the rest, until acknowledged or dropped for room.
    if (shared == nullptr) shared = std::make_shared<const v1::NodeReport>(report);
    const uint64_t sequence = report.sequence();
    const auto at =
        std::upper_bound(tail_.begin(), tail_.end(), sequence,
                         [](uint64_t s, const TailEntry& e) { return s < e.report->sequence(); });
    tail_.insert(at, TailEntry{.report = std::move(shared), .bytes = serialized_size});
    tail_bytes_ += serialized_size;
    last_sequence_ = std::max(last_sequence_.load(), sequence);
  }

  const auto now = std::chrono::steady_clock::now();
  if (now - last_sync_ >= kSyncEvery) SyncLocked();
  EnforceLimitLocked();
  return ok;
}

void Spool::EnforceLimitLocked() {
  while (total_bytes_ + tail_bytes_ > options_.max_bytes) {
    // Never the segment being written.
    const bool segment_droppable = segments_.size() > 1 || (fd_ < 0 && !segments_.empty());
    const uint64_t settled = std::max(acknowledged_, dropped_through_);
    if (segment_droppable) {
      const Segment& front = segments_.front();
      const bool settled_segment = front.records == 0 || front.last_sequence <= settled;
      // The oldest first: the oldest segment's first unsettled report or the tail's first.
      if (settled_segment || tail_.empty() ||
          std::max(front.first_sequence, settled + 1) < tail_.front().report->sequence()) {
        DropOldestLocked();
        continue;
      }
    }
    if (tail_.empty()) break;
    DropTailFrontLocked();
  }
}

void Spool::DropTailFrontLocked() {
  const uint64_t sequence = tail_.front().report->sequence();
  tail_bytes_ -= tail_.front().bytes;
  tail_.pop_front();
  ++dropped_;
  if (!tail_dropping_) {
    spdlog::warn("spool: over {} bytes; dropping the oldest reports kept in memory",
                 options_.max_bytes);
  }
  tail_dropping_ = !tail_.empty();
  // Settled through it unless an older unsettled report is still on disk.
  const uint64_t settled = std::max(acknowledged_, dropped_through_);
  bool older_on_disk = false;
  for (const Segment& seg : segments_) {
    if (seg.records > 0 && seg.last_sequence > settled) {
      older_on_disk = std::max(seg.first_sequence, settled + 1) < sequence;
      break;
    }
  }
  if (older_on_disk) {
    holes_.push_back(sequence);
  } else {
    dropped_through_ = std::max(dropped_through_, sequence);
    SettleTailLocked();
  }
}

void Spool::SettleTailLocked() {
  while (!tail_.empty() &&
         tail_.front().report->sequence() <= std::max(acknowledged_, dropped_through_)) {
    if (tail_.front().report->sequence() > acknowledged_) ++dropped_;
    tail_bytes_ -= tail_.front().bytes;
    tail_.pop_front();
  }
  if (tail_.empty()) tail_dropping_ = false;
  const uint64_t settled = std::max(acknowledged_, dropped_through_);
  while (!holes_.empty() && holes_.front() <= settled) holes_.pop_front();
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
  SettleTailLocked();
  spdlog::warn("spool: over {} bytes; dropped the oldest segment with {} unacknowledged report(s)",
               options_.max_bytes, lost);
}

void Spool::PersistLocked() {
  std::string error;
  const bool persisted = WriteSpoolState(options_.dir, {instance_id_, acknowledged_}, &error);
  if (persisted) {
    persisted_acknowledged_ = acknowledged_;
    if (state_failing_) spdlog::info("spool: state written again");
  } else if (!state_failing_) {
    spdlog::warn(
        "spool: {}; acknowledged segments are deleted all the same (retried with the "
        "next acknowledgement)",
        error);
  }
  state_failing_ = !persisted;
  // Acknowledged segments go even when the state cannot be written: on a full disk, deleting
  // them is what frees it. Until the state is written the newest segment stays, so that after a
  // crash sequences continue after its last record, never from the older persisted watermark
  // (which would reuse sequences the exporter has seen).
  while (!segments_.empty()) {
    const Segment& seg = segments_.front();
    const bool active = fd_ >= 0 && segments_.size() == 1;
    const bool newest_unpersisted = !persisted && segments_.size() == 1;
    if (active || newest_unpersisted || seg.last_sequence > acknowledged_) break;
    ::unlink(seg.path.c_str());
    total_bytes_ -= seg.bytes;
    segments_.erase(segments_.begin());
  }
}

void Spool::PersistSoonLocked() {
  const auto now = std::chrono::steady_clock::now();
  if (acknowledged_ != persisted_acknowledged_ && now - last_persist_ >= kSyncEvery) {
    last_persist_ = now;
    PersistLocked();
  }
}

void Spool::Acknowledge(uint64_t sequence) {
  std::lock_guard lock(mu_);
  acknowledged_ = std::max(acknowledged_, sequence);
  SettleTailLocked();
  PersistSoonLocked();
}

void Spool::GiveUp(uint64_t sequence) {
  std::lock_guard lock(mu_);
  const bool hole = std::find(holes_.begin(), holes_.end(), sequence) != holes_.end();
  if (sequence > std::max(acknowledged_, dropped_through_) && !hole) ++dropped_;
  acknowledged_ = std::max(acknowledged_, sequence);
  // Its own tail entry, if it has one, is counted dropped above already.
  while (!tail_.empty() && tail_.front().report->sequence() <= acknowledged_) {
    tail_bytes_ -= tail_.front().bytes;
    tail_.pop_front();
  }
  SettleTailLocked();
  PersistSoonLocked();
}

std::vector<std::shared_ptr<const v1::NodeReport>> Spool::Read(uint64_t after, uint64_t before,
                                                               size_t limit,
                                                               uint64_t* scanned_through) {
  // Sequences increase through the segments, so each segment that may hold some of the window is
  // read from its last mark at or before after + 1, up to its readable end, and no further than
  // the window or the limit needs.
  struct Plan {
    std::string path;
    uint64_t from = 0;
    uint64_t end = 0;
    uint64_t record_bytes = 0;  // on average
  };
  std::vector<Plan> plans;
  std::vector<std::shared_ptr<const v1::NodeReport>> from_tail;
  uint64_t last = 0;
  {
    std::lock_guard lock(mu_);
    auto it =
        std::upper_bound(tail_.begin(), tail_.end(), after,
                         [](uint64_t a, const TailEntry& e) { return a < e.report->sequence(); });
    for (; it != tail_.end() && it->report->sequence() < before && from_tail.size() < limit; ++it) {
      from_tail.push_back(it->report);
    }
    for (const Segment& seg : segments_) {
      if (seg.records == 0 || seg.last_sequence <= after || seg.first_sequence >= before) continue;
      const auto mark = std::upper_bound(
          seg.marks.begin(), seg.marks.end(), after,
          [](uint64_t a, const std::pair<uint64_t, uint64_t>& m) { return a + 1 < m.first; });
      plans.push_back(Plan{.path = seg.path,
                           .from = mark == seg.marks.begin() ? 0 : std::prev(mark)->second,
                           .end = seg.readable_end,
                           .record_bytes = seg.bytes / seg.records + 1});
    }
    last = last_sequence_.load();
  }
  std::vector<std::shared_ptr<const v1::NodeReport>> out;
  std::string data;
  bool past_window = false;
  for (const Plan& plan : plans) {
    if (out.size() >= limit || past_window) break;
    // Enough bytes for what is still wanted, plus the way from the mark; doubled when a record
    // is longer than that.
    const uint64_t wanted = limit - out.size();
    uint64_t chunk = wanted >= plan.end / plan.record_bytes
                         ? plan.end
                         : plan.record_bytes * (wanted + 1) + 2 * recording::kBlockSize;
    uint64_t offset = plan.from;
    while (offset < plan.end && out.size() < limit && !past_window) {
      const uint64_t length = std::min(chunk, plan.end - offset);
      // A segment deleted meanwhile holds nothing we need.
      if (!recording::ReadFileRange(plan.path, offset, &data, length)) break;
      const BytesScan scan = ScanBytes(data, offset, [&](std::string_view payload, uint64_t) {
        auto report = std::make_shared<v1::NodeReport>();
        if (!report->ParseFromArray(payload.data(), static_cast<int>(payload.size()))) {
          return true;
        }
        if (report->sequence() >= before) {
          past_window = true;
          return false;
        }
        if (report->sequence() > after) out.push_back(std::move(report));
        return out.size() < limit;
      });
      // Damage (the file changed since it was read at open) or a shorter file ends the segment.
      if (scan.stopped || !scan.damage.empty() || data.size() < length) break;
      if (scan.valid_end == offset) {
        // Not one whole record in the chunk: a record longer than it.
        if (length == plan.end - offset) break;
        chunk *= 2;
        continue;
      }
      offset = scan.valid_end;  // the chunk ended inside the next record, or at plan.end
    }
  }
  if (!from_tail.empty()) {
    // Each holds the first `limit` of its own: the first `limit` of both together are among them.
    std::vector<std::shared_ptr<const v1::NodeReport>> merged;
    merged.reserve(std::min(limit, out.size() + from_tail.size()));
    auto a = out.begin();
    auto b = from_tail.begin();
    while (merged.size() < limit && (a != out.end() || b != from_tail.end())) {
      if (b == from_tail.end() || (a != out.end() && (*a)->sequence() <= (*b)->sequence())) {
        if (b != from_tail.end() && (*a)->sequence() == (*b)->sequence()) ++b;
        merged.push_back(std::move(*a++));
      } else {
        merged.push_back(std::move(*b++));
      }
    }
    out = std::move(merged);
  }
  if (scanned_through != nullptr) {
    *scanned_through = out.size() >= limit && !out.empty()
                           ? out.back()->sequence()
                           : std::min(last, before == 0 ? 0 : before - 1);
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
