// Reads records back out of the block format of log_format.h, from one segment's bytes.
//
// Two modes:
//   kPointInTime  stops at the first damaged record: what a spool or a recovering writer needs,
//                 since nothing after damage can be trusted to be in order.
//   kSalvage      reports the damage (offset, bytes lost, why), skips to the next fragment whose
//                 checksum verifies in the same block (else to the next block) and goes on: what
//                 post-mortem tools need, losing only the records that touch the damage.
// In both, a torn tail (the file ends inside a record, as after a crash mid-write, or the rest of
// the file is zeroes the crash never wrote) is a clean end: it is reported in torn_tail_bytes(),
// never as damage. docs/recording-format.md says exactly what counts as torn and as damaged.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace accelmon::recording {

enum class ReadMode { kPointInTime, kSalvage };

struct Damage {
  uint64_t offset = 0;  // in the segment
  uint64_t bytes = 0;   // lost, from offset
  std::string reason;   // e.g. "checksum mismatch", "fragment length past end of block"
};

class LogReader {
 public:
  // `data`: the segment from byte `offset` to its end, which must outlive the reader. `offset` is
  // 0 (the whole segment) or where an earlier read stopped at a record boundary (a
  // record_offset() or valid_end()), so that a reader need not re-read what it has seen. Every
  // offset the reader reports is in the segment, not in `data`.
  LogReader(std::string_view data, ReadMode mode, uint64_t offset = 0);

  // The next whole record, pointing into `data` or (when fragmented) into `scratch`. False at
  // the end: of the data, at a torn tail, or in kPointInTime at the first damage.
  bool ReadRecord(std::string_view* record, std::string* scratch);

  // Offset of the first fragment of the record ReadRecord returned last.
  uint64_t record_offset() const { return record_offset_; }
  // Offset just past the last good record: where a writer may resume appending.
  uint64_t valid_end() const { return valid_end_; }
  // Damage met so far, in file order, adjacent regions merged (at most one in kPointInTime, where
  // it runs to the end of the data).
  const std::vector<Damage>& damage() const { return damage_; }
  uint64_t damaged_bytes() const;
  // Bytes after the last good record (or damage) that hold no whole record: an incomplete record
  // or unwritten zeroes at the end of the file. 0 when the file ended cleanly; known once
  // ReadRecord has returned false. Without damage, valid_end() + torn_tail_bytes() is the size.
  uint64_t torn_tail_bytes() const { return torn_tail_bytes_; }

 private:
  struct Fragment;
  enum class Next { kFragment, kEnd, kTorn, kBad };

  Next NextFragment(Fragment* fragment);
  Next Problem(Fragment* fragment, uint64_t extent_end, std::string reason);
  uint64_t FindNextFragment(uint64_t after, uint64_t limit) const;
  bool ValidFragmentAt(uint64_t offset, uint64_t limit) const;
  // Records lost bytes [offset, end); false when the reader must stop (kPointInTime).
  bool Lose(uint64_t offset, uint64_t end, std::string reason);
  void EndTorn();

  // The bytes at `offset` of the segment.
  const char* At(uint64_t offset) const { return data_.data() + (offset - base_); }

  std::string_view data_;
  ReadMode mode_;
  uint64_t base_ = 0;  // the segment offset of data_[0]
  uint64_t end_ = 0;   // of the data: base_ + data_.size()
  uint64_t pos_ = 0;
  uint64_t record_offset_ = 0;
  uint64_t valid_end_ = 0;
  uint64_t torn_tail_bytes_ = 0;
  // Everything before this is a good record, damage already reported, or padding.
  uint64_t accounted_ = 0;
  // Every byte from here to the end of the data is zero.
  uint64_t zero_from_ = 0;
  bool stopped_ = false;
  std::vector<Damage> damage_;
};

}  // namespace accelmon::recording
