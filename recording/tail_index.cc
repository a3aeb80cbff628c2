#include "recording/tail_index.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "accelmon/v1/recording.pb.h"
#include "proto/time_format.h"
#include "recording/file_io.h"
#include "recording/log_reader.h"
#include "recording/log_writer.h"
#include "recording/record_codec.h"
#include "recording/segment_names.h"

namespace accelmon::recording {
namespace {

// A record is read from its offset with this much first; a larger one (a batch near the 4 MiB
// split size) takes the rest of the file.
constexpr uint64_t kFirstRead = uint64_t{1} << 20;

std::string IndexPath(const std::string& dir) { return dir + "/" + std::string(kTailIndexFile); }

// Calls `on_report(wire, key)` for each report of a ReportBatch record; false when malformed.
// `decoder` holds the segment header's dictionary (a header record passing by is taken in).
template <typename OnReport>
bool ForEachReport(std::string_view record, std::string* storage, SegmentDecoder& decoder,
                   OnReport on_report) {
  DecodedRecord decoded;
  std::string error;
  if (!decoder.Decode(record, storage, &decoded, &error)) return false;
  if (decoded.kind != RecordKind::kReportBatch) return true;
  std::vector<std::string_view> reports;
  if (!SplitReportBatch(decoded.body, &reports)) return false;
  for (std::string_view wire : reports) {
    ReportKey key;
    if (!ParseReportKey(wire, &key)) return false;
    on_report(wire, key);
  }
  return true;
}

// The header (the first record) of the segment at `path`, into `decoder`, for a reader that
// begins later in the segment. False when it cannot be read: the records that need its
// dictionary are then unreadable.
bool ReadSegmentHeader(const std::string& path, SegmentDecoder& decoder) {
  std::string data;
  std::string_view record;
  std::string scratch;
  std::string storage;
  DecodedRecord decoded;
  std::string error;
  // A header holds the dictionary and every node's watermark: this much is nearly always it.
  for (const uint64_t limit : {kFirstRead, UINT64_MAX}) {
    if (!ReadFileRange(path, 0, &data, limit)) return false;
    LogReader reader(data, ReadMode::kPointInTime);
    if (reader.ReadRecord(&record, &scratch)) {
      return decoder.Decode(record, &storage, &decoded, &error) &&
             decoded.kind == RecordKind::kSegmentHeader;
    }
    if (data.size() < limit) return false;
  }
  return false;
}

// The reports of one segment's records from `offset` on, in order, with where each record is.
struct SegmentScan {
  std::vector<std::pair<uint64_t, ReportKey>> keys;  // record offset, key
  uint64_t records = 0;
};

SegmentScan ScanSegment(const std::string& path, uint64_t offset, RecoveredLocations& out) {
  SegmentScan scan;
  std::string data;
  if (!ReadFileRange(path, offset, &data)) {
    out.damage.push_back(fmt::format("cannot read {}: {}", path, std::strerror(errno)));
    return scan;
  }
  LogReader reader(data, ReadMode::kSalvage, offset);
  std::string_view record;
  std::string scratch;
  std::string storage;
  SegmentDecoder decoder;
  if (offset > 0) ReadSegmentHeader(path, decoder);
  while (reader.ReadRecord(&record, &scratch)) {
    ++scan.records;
    const uint64_t at = reader.record_offset();
    const size_t before = scan.keys.size();
    if (!ForEachReport(record, &storage, decoder, [&](std::string_view, const ReportKey& key) {
          scan.keys.emplace_back(at, key);
        })) {
      scan.keys.resize(before);
      out.damage.push_back(fmt::format("{}: record at offset {} is unreadable", path, at));
    }
  }
  for (const Damage& d : reader.damage()) {
    out.damage.push_back(
        fmt::format("{}: {} bytes lost at offset {}: {}", path, d.bytes, d.offset, d.reason));
  }
  return scan;
}

// Moves `out` past the reports of `scan` (of segment `segment`), in order.
void Apply(const SegmentScan& scan, uint64_t segment, RecoveredLocations& out) {
  out.records_scanned += scan.records;
  out.reports_scanned += scan.keys.size();
  for (const auto& [at, key] : scan.keys) {
    out.nodes[key.node] = ReportLocation{.segment = segment, .offset = at, .time_ns = key.time_ns};
    if (out.watermarks) AdvanceWatermark(*out.watermarks, key);
  }
}

// The index file's contents; an empty optional with `problem` set when it cannot be used.
std::optional<v1::TailIndex> ReadIndex(const std::string& dir, std::string* problem) {
  std::string data;
  if (!ReadFileRange(IndexPath(dir), 0, &data)) {
    *problem = errno == ENOENT ? "no " + std::string(kTailIndexFile)
                               : "cannot read " + IndexPath(dir) + ": " + std::strerror(errno);
    return std::nullopt;
  }
  LogReader reader(data, ReadMode::kPointInTime);
  std::string_view record;
  std::string scratch;
  std::string storage;
  DecodedRecord decoded;
  std::string error;
  v1::TailIndex index;
  if (!reader.ReadRecord(&record, &scratch) || !DecodeRecord(record, &storage, &decoded, &error) ||
      decoded.kind != RecordKind::kTailIndex ||
      !index.ParseFromArray(decoded.body.data(), static_cast<int>(decoded.body.size()))) {
    *problem = IndexPath(dir) + " is damaged" + (error.empty() ? "" : " (" + error + ")");
    return std::nullopt;
  }
  return index;
}

}  // namespace

bool WriteTailIndex(const std::string& dir, const ReportLocations& nodes,
                    const Watermarks& watermarks, uint64_t segment, uint64_t end_offset) {
  v1::TailIndex index;
  index.set_segment(segment);
  index.set_end_offset(end_offset);
  for (const auto& [node, mark] : watermarks) {
    v1::NodeWatermark* w = index.add_watermarks();
    w->set_node(node);
    w->set_agent_instance_id(mark.agent_instance_id);
    w->set_sequence(mark.sequence);
  }
  for (const auto& [node, at] : nodes) {
    v1::NodeLocation* n = index.add_nodes();
    n->set_node(node);
    n->set_segment(at.segment);
    n->set_offset(at.offset);
    *n->mutable_timestamp() = TimestampFromNanos(at.time_ns);
  }
  const std::string record =
      EncodeRecord(RecordKind::kTailIndex, index.SerializeAsString(), Compression::kNone);
  std::string framed;
  LogWriter(0).AddRecord(record, &framed);
  const std::string path = IndexPath(dir);
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  const bool written = WriteAll(fd, framed);
  const int err = errno;
  ::close(fd);
  if (!written || std::rename(tmp.c_str(), path.c_str()) != 0) {
    if (written) return false;  // errno from rename
    ::unlink(tmp.c_str());
    errno = err;
    return false;
  }
  return true;
}

RecoveredLocations RecoverLocations(const std::string& dir,
                                    const std::vector<std::pair<uint64_t, std::string>>& segments) {
  RecoveredLocations out;
  if (segments.empty()) return out;
  const std::optional<v1::TailIndex> index = ReadIndex(dir, &out.index_problem);
  if (!index) {
    // The newest two segments that hold reports (every start begins a segment, so the newest
    // ones may hold only a header), newest first, applied oldest first.
    std::vector<std::pair<uint64_t, SegmentScan>> scans;
    for (auto it = segments.rbegin(); it != segments.rend() && scans.size() < 2; ++it) {
      SegmentScan scan = ScanSegment(it->second, 0, out);
      if (!scan.keys.empty()) scans.emplace_back(it->first, std::move(scan));
    }
    for (auto it = scans.rbegin(); it != scans.rend(); ++it) Apply(it->second, it->first, out);
    return out;
  }
  for (const v1::NodeLocation& n : index->nodes()) {
    out.nodes[n.node()] = ReportLocation{
        .segment = n.segment(), .offset = n.offset(), .time_ns = ToNanos(n.timestamp())};
  }
  out.watermarks.emplace();
  for (const v1::NodeWatermark& w : index->watermarks()) {
    (*out.watermarks)[w.node()] = Watermark{w.agent_instance_id(), w.sequence()};
  }
  for (const auto& [segment, path] : segments) {
    if (segment < index->segment()) continue;
    const uint64_t from = segment == index->segment() ? index->end_offset() : 0;
    Apply(ScanSegment(path, from, out), segment, out);
  }
  return out;
}

LatestReports ReadLatestReports(const std::string& dir, const ReportLocations& locations,
                                int64_t oldest_ns) {
  LatestReports out;
  // The nodes to read, by record: a record holds the latest report of many nodes.
  std::map<std::pair<uint64_t, uint64_t>, std::vector<std::string_view>> by_record;
  for (const auto& [node, at] : locations) {
    if (at.time_ns < oldest_ns) {
      ++out.too_old;
      continue;
    }
    by_record[{at.segment, at.offset}].push_back(node);
  }
  std::map<std::string, std::string, std::less<>> found;
  std::string data;
  std::string scratch;
  std::string storage;
  SegmentDecoder decoder;  // of the segment `decoder_of`
  std::optional<uint64_t> decoder_of;
  for (const auto& [where, wanted] : by_record) {
    const auto [segment, offset] = where;
    const std::vector<std::string_view>& nodes = wanted;  // a lambda below cannot capture a binding
    const std::string path = SegmentFilePath(dir, segment);
    if (decoder_of != segment) {
      decoder = SegmentDecoder();
      decoder_of = segment;
      ReadSegmentHeader(path, decoder);
    }
    std::string_view record;
    bool read = false;
    for (const uint64_t limit : {kFirstRead, UINT64_MAX}) {
      if (!ReadFileRange(path, offset, &data, limit)) break;
      LogReader reader(data, ReadMode::kPointInTime, offset);
      if (reader.ReadRecord(&record, &scratch)) {
        read = true;
        break;
      }
      if (data.size() < limit) break;  // the whole rest of the file: no record there
    }
    if (!read) {
      out.problems.push_back(
          fmt::format("{}: no record at offset {} (the latest report of {} "
                      "node(s), {} first)",
                      path, offset, nodes.size(), nodes.front()));
      continue;
    }
    ++out.records_read;
    // A batch may hold several reports of a node: the last one is its latest.
    const bool ok =
        ForEachReport(record, &storage, decoder, [&](std::string_view wire, const ReportKey& k) {
          if (std::binary_search(nodes.begin(), nodes.end(), std::string_view(k.node))) {
            found[k.node] = std::string(wire);
          }
        });
    if (!ok) {
      out.problems.push_back(
          fmt::format("{}: record at offset {} is damaged (the latest report of {} node(s))", path,
                      offset, nodes.size()));
    }
  }
  out.reports.reserve(found.size());
  for (auto& [node, wire] : found) out.reports.push_back(std::move(wire));
  return out;
}

}  // namespace accelmon::recording
