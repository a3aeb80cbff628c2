#include "recording/log_reader.h"

#include <algorithm>
#include <string>
#include <utility>

#include "recording/log_format.h"

namespace accelmon::recording {
namespace {

// Storage writes whole sectors: after a crash, data the kernel never wrote reads back as zeroes
// from a sector boundary on. A bad fragment that runs into such zeroes at the end of the file is
// an unwritten tail, not damage.
constexpr uint64_t kSectorSize = 512;

uint32_t DecodeFixed32(const char* p) {
  const auto* u = reinterpret_cast<const unsigned char*>(p);
  return uint32_t{u[0]} | uint32_t{u[1]} << 8 | uint32_t{u[2]} << 16 | uint32_t{u[3]} << 24;
}

uint64_t DecodeFixed16(const char* p) {
  const auto* u = reinterpret_cast<const unsigned char*>(p);
  return uint64_t{u[0]} | uint64_t{u[1]} << 8;
}

uint64_t BlockEnd(uint64_t offset) { return (offset / kBlockSize + 1) * kBlockSize; }

}  // namespace

struct LogReader::Fragment {
  uint64_t offset = 0;
  FragmentType type = FragmentType::kZero;
  std::string_view data;
  std::string reason;  // why, for Next::kBad
};

LogReader::LogReader(std::string_view data, ReadMode mode, uint64_t offset)
    : data_(data),
      mode_(mode),
      base_(offset),
      end_(offset + data.size()),
      pos_(offset),
      record_offset_(offset),
      valid_end_(offset),
      accounted_(offset) {
  zero_from_ = end_;
  while (zero_from_ > base_ && *At(zero_from_ - 1) == '\0') --zero_from_;
}

uint64_t LogReader::damaged_bytes() const {
  uint64_t total = 0;
  for (const Damage& d : damage_) total += d.bytes;
  return total;
}

bool LogReader::ValidFragmentAt(uint64_t offset, uint64_t limit) const {
  if (offset + kHeaderSize > limit) return false;
  const char* header = At(offset);
  const auto type = static_cast<uint8_t>(header[6]);
  if (type == 0 || type > kMaxFragmentType) return false;
  const uint64_t length = DecodeFixed16(header + 4);
  if (offset + kHeaderSize + length > limit) return false;
  return DecodeFixed32(header) == FragmentChecksum(static_cast<FragmentType>(type),
                                                   std::string_view(header + kHeaderSize, length));
}

uint64_t LogReader::FindNextFragment(uint64_t after, uint64_t limit) const {
  // A damaged header's length cannot be trusted, so look at every offset: a false match needs a
  // 32-bit checksum to agree by chance.
  for (uint64_t offset = after + 1; offset + kHeaderSize <= limit; ++offset) {
    if (ValidFragmentAt(offset, limit)) return offset;
  }
  return limit;
}

LogReader::Next LogReader::Problem(Fragment* fragment, uint64_t extent_end, std::string reason) {
  const uint64_t limit = std::min(BlockEnd(fragment->offset), end_);
  const uint64_t next = FindNextFragment(fragment->offset, limit);
  if (next == limit) {
    // Nothing good follows in this block: a crash mid-write looks like this, either cut off by the
    // end of the file or running into the zeroes of pages never written.
    const bool cut_off = extent_end > end_;
    const bool unwritten = zero_from_ <= fragment->offset ||
                           (zero_from_ + kSectorSize - 1) / kSectorSize * kSectorSize < extent_end;
    if (cut_off || unwritten) return Next::kTorn;
  }
  pos_ = next;
  fragment->reason = std::move(reason);
  return Next::kBad;
}

LogReader::Next LogReader::NextFragment(Fragment* fragment) {
  const uint64_t size = end_;
  while (true) {
    if (pos_ >= size) return Next::kEnd;
    const uint64_t block_end = BlockEnd(pos_);
    if (block_end - pos_ < kHeaderSize) {  // the zero padding that ends a block
      pos_ = std::min(block_end, size);
      continue;
    }
    fragment->offset = pos_;
    if (size - pos_ < kHeaderSize) return Next::kTorn;
    const char* header = At(pos_);
    const uint32_t checksum = DecodeFixed32(header);
    const uint64_t length = DecodeFixed16(header + 4);
    const auto type = static_cast<uint8_t>(header[6]);
    const uint64_t end = pos_ + kHeaderSize + length;
    if (type == 0 && length == 0 && checksum == 0) {
      // Writers never leave a header's worth of a block unused, so zeroes here are lost data
      // unless they run to the end of the file.
      return Problem(fragment, pos_ + kHeaderSize, "zeroes where a fragment belongs");
    }
    if (type == 0 || type > kMaxFragmentType) {
      return Problem(fragment, pos_ + kHeaderSize, "bad fragment type " + std::to_string(type));
    }
    if (end > block_end) {
      return Problem(fragment, pos_ + kHeaderSize, "fragment length past end of block");
    }
    if (end > size) return Problem(fragment, end, "fragment length past end of file");
    fragment->type = static_cast<FragmentType>(type);
    fragment->data = std::string_view(header + kHeaderSize, length);
    if (checksum != FragmentChecksum(fragment->type, fragment->data)) {
      return Problem(fragment, end, "checksum mismatch");
    }
    pos_ = end;
    return Next::kFragment;
  }
}

bool LogReader::Lose(uint64_t offset, uint64_t end, std::string reason) {
  if (mode_ == ReadMode::kPointInTime) {
    // Nothing after the first damage is read: all of it is lost.
    damage_.push_back(Damage{offset, end_ - offset, std::move(reason)});
    stopped_ = true;
    return false;
  }
  accounted_ = end;
  if (!damage_.empty()) {
    // Damage continuing the previous one (perhaps after a block's padding) is one region.
    Damage& last = damage_.back();
    const uint64_t last_end = last.offset + last.bytes;
    if (offset == last_end ||
        (offset > last_end && offset - last_end < kHeaderSize && offset % kBlockSize == 0)) {
      last.bytes = end - last.offset;
      return true;
    }
  }
  damage_.push_back(Damage{offset, end - offset, std::move(reason)});
  return true;
}

void LogReader::EndTorn() {
  torn_tail_bytes_ = end_ - accounted_;
  stopped_ = true;
}

bool LogReader::ReadRecord(std::string_view* record, std::string* scratch) {
  scratch->clear();
  bool in_record = false;
  uint64_t record_start = 0;
  Fragment fragment;
  while (!stopped_) {
    switch (NextFragment(&fragment)) {
      case Next::kEnd:
      case Next::kTorn:
        EndTorn();
        return false;
      case Next::kBad:
        if (!Lose(in_record ? record_start : fragment.offset, pos_, fragment.reason)) return false;
        in_record = false;
        scratch->clear();
        continue;
      case Next::kFragment:
        break;
    }
    switch (fragment.type) {
      case FragmentType::kFull:
      case FragmentType::kFirst:
        if (in_record) {
          if (!Lose(record_start, fragment.offset, "record without its last fragment")) {
            return false;
          }
          in_record = false;
        }
        if (fragment.type == FragmentType::kFull) {
          *record = fragment.data;
          record_offset_ = fragment.offset;
          valid_end_ = accounted_ = pos_;
          return true;
        }
        scratch->assign(fragment.data);
        in_record = true;
        record_start = fragment.offset;
        break;
      case FragmentType::kMiddle:
      case FragmentType::kLast:
        if (!in_record) {
          if (!Lose(fragment.offset, pos_, "fragment without the start of its record")) {
            return false;
          }
          continue;
        }
        scratch->append(fragment.data);
        if (fragment.type == FragmentType::kLast) {
          *record = *scratch;
          record_offset_ = record_start;
          valid_end_ = accounted_ = pos_;
          return true;
        }
        break;
      case FragmentType::kZero:  // NextFragment never returns one
        break;
    }
  }
  return false;
}

}  // namespace accelmon::recording
