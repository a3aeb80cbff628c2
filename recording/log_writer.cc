#include "recording/log_writer.h"

#include <algorithm>

#include "recording/log_format.h"

namespace accelmon::recording {
namespace {

void AppendFragment(FragmentType type, std::string_view data, std::string* out) {
  const uint32_t crc = FragmentChecksum(type, data);
  const auto length = static_cast<uint16_t>(data.size());
  const char header[kHeaderSize] = {
      static_cast<char>(crc & 0xff),
      static_cast<char>((crc >> 8) & 0xff),
      static_cast<char>((crc >> 16) & 0xff),
      static_cast<char>((crc >> 24) & 0xff),
      static_cast<char>(length & 0xff),
      static_cast<char>(length >> 8),
      static_cast<char>(type),
  };
  out->append(header, kHeaderSize);
  out->append(data);
}

}  // namespace

uint64_t LogWriter::next_record_offset() const {
  const uint64_t leftover = kBlockSize - offset_ % kBlockSize;
  return leftover < kHeaderSize ? offset_ + leftover : offset_;
}

void LogWriter::AddRecord(std::string_view record, std::string* out) {
  // Worst case: padding, then one header per block touched.
  out->reserve(out->size() + record.size() + kHeaderSize * (record.size() / kBlockSize + 2) +
               kHeaderSize);
  bool begin = true;
  do {
    size_t leftover = kBlockSize - offset_ % kBlockSize;
    if (leftover < kHeaderSize) {
      // Too small for a header: zero padding, and the record starts in the next block.
      out->append(leftover, '\0');
      offset_ += leftover;
      leftover = kBlockSize;
    }
    // May be 0 when exactly a header fits: an empty FIRST fragment, as in LevelDB.
    const size_t length = std::min(record.size(), leftover - kHeaderSize);
    const bool end = length == record.size();
    const FragmentType type = begin && end ? FragmentType::kFull
                              : begin      ? FragmentType::kFirst
                              : end        ? FragmentType::kLast
                                           : FragmentType::kMiddle;
    AppendFragment(type, record.substr(0, length), out);
    offset_ += kHeaderSize + length;
    record.remove_prefix(length);
    begin = false;
  } while (!record.empty());
}

}  // namespace accelmon::recording
