// Frames records into the block format of log_format.h. It only produces bytes; the caller owns
// the file and decides when to write(2) and fdatasync, so the exporter can group-commit and the
// spool can append one report per write.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace accelmon::recording {

class LogWriter {
 public:
  // `file_size`: the length of the file the bytes will be appended to (0 for a new file), so a
  // reopened segment continues in the right place of its current block.
  explicit LogWriter(uint64_t file_size = 0) : offset_(file_size) {}

  // Appends the framed fragments of one record (and any zero padding that ends a block) to `out`.
  // `record` may be empty. The caller must append `out` to the file in full before the next call.
  void AddRecord(std::string_view record, std::string* out);

  // Where the file ends once everything returned so far is written.
  uint64_t offset() const { return offset_; }
  // Where the next record's first fragment will begin: offset(), or the next block when the rest
  // of this one is too small for a header (the LogReader's record_offset() of that record).
  uint64_t next_record_offset() const;

 private:
  uint64_t offset_;
};

}  // namespace accelmon::recording
