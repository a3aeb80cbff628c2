// Fuzz target (fuzz_target.h): the recording readers and record codec (recording/) on any bytes.
//
// The first byte chooses the input's meaning:
//   even  the rest is a segment, read in both modes;
//   odd   the rest is a recipe: records written by LogWriter (some encoded, some zstd, some zstd
//         with a dictionary), then
//         damaged (bytes flipped, ranges zeroed, the file cut short). Salvage must then return
//         every record the damage did not touch, unchanged, and point-in-time exactly the records
//         before the first one touched.
// Always: no crash or hang, offsets inside the data, damage in order and not overlapping,
// point-in-time records a prefix of salvage records, DecodeRecord on every record (through
// SegmentDecoder, so a header record's zstd dictionary is loaded and used for what follows).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fuzz_target.h"
#include "recording/log_format.h"
#include "recording/log_reader.h"
#include "recording/log_writer.h"
#include "recording/record_codec.h"

namespace {

namespace rec = accelmon::recording;

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

struct Result {
  std::vector<std::pair<uint64_t, std::string>> records;  // offset, record
  std::vector<rec::Damage> damage;
};

Result Read(std::string_view data, rec::ReadMode mode) {
  rec::LogReader reader(data, mode);
  Result result;
  std::string_view record;
  std::string scratch;
  std::string storage;
  rec::SegmentDecoder decoder;
  while (reader.ReadRecord(&record, &scratch)) {
    Check(reader.record_offset() + rec::kHeaderSize <= data.size());
    Check(record.size() <= data.size());
    Check(result.records.empty() || reader.record_offset() > result.records.back().first);
    Check(reader.valid_end() > reader.record_offset() && reader.valid_end() <= data.size());
    result.records.emplace_back(reader.record_offset(), std::string(record));
    if (mode == rec::ReadMode::kSalvage) {
      rec::DecodedRecord decoded;
      std::string error;
      if (!decoder.Decode(record, &storage, &decoded, &error)) Check(!error.empty());
    }
  }
  Check(!reader.ReadRecord(&record, &scratch));  // the end stays the end
  result.damage = reader.damage();
  uint64_t damage_end = 0;
  for (const rec::Damage& d : result.damage) {
    Check(d.offset >= damage_end && d.bytes > 0 && d.offset + d.bytes <= data.size());
    Check(!d.reason.empty());
    damage_end = d.offset + d.bytes;
  }
  Check(mode == rec::ReadMode::kSalvage || result.damage.size() <= 1);
  Check(reader.valid_end() <= data.size() && reader.torn_tail_bytes() <= data.size());
  if (result.damage.empty()) Check(reader.valid_end() + reader.torn_tail_bytes() == data.size());
  return result;
}

// Reads in both modes and checks what holds for any bytes.
std::pair<Result, Result> ReadBoth(std::string_view data) {
  Result point_in_time = Read(data, rec::ReadMode::kPointInTime);
  Result salvage = Read(data, rec::ReadMode::kSalvage);
  Check(point_in_time.records.size() <= salvage.records.size());
  Check(std::equal(point_in_time.records.begin(), point_in_time.records.end(),
                   salvage.records.begin()));
  if (!point_in_time.damage.empty()) {
    Check(!salvage.damage.empty() && salvage.damage[0].offset == point_in_time.damage[0].offset);
  }
  return {std::move(point_in_time), std::move(salvage)};
}

class Bytes {
 public:
  Bytes(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool empty() const { return size_ == 0; }
  uint8_t Next() {
    if (size_ == 0) return 0;
    --size_;
    return *data_++;
  }

 private:
  const uint8_t* data_;
  size_t size_;
};

// The dictionary of recipe records compressed with one: raw content, as BuildDictionary makes
// when it cannot train.
const std::string& FuzzDictionary() {
  static const std::string dictionary = [] {
    std::vector<std::string> samples;
    for (int i = 0; i < 4; ++i) samples.push_back(std::string(300, static_cast<char>('a' + i)));
    return rec::BuildDictionary(samples, 1024);
  }();
  return dictionary;
}

struct Written {
  std::string record;
  std::string body;  // what DecodeRecord must return, for encoded records
  bool encoded = false;
  uint64_t start = 0;
  uint64_t end = 0;
};

void FuzzRecipe(Bytes in) {
  constexpr uint64_t kMaxSegment = 3 * rec::kBlockSize;  // enough to cross blocks, still fast
  rec::LogWriter writer;
  std::string original;
  std::vector<Written> written;
  const int records = in.Next() % 32;
  for (int i = 0; i < records && original.size() < kMaxSegment; ++i) {
    const size_t length = in.Next() | size_t{in.Next()} << 8;
    const uint8_t fill = in.Next();
    const uint8_t flags = in.Next();
    Written w;
    // A pattern of prime length (no byte loop: instrumented loops are slow).
    std::string pattern(251, '\0');
    for (size_t j = 0; j < pattern.size(); ++j) pattern[j] = static_cast<char>(fill + j * 31);
    std::string content;
    while (content.size() < length) {
      content.append(pattern, 0, std::min(pattern.size(), length - content.size()));
    }
    if ((flags & 9) == 9) {
      static rec::DictionaryCompressor* const compressor = [] {
        auto* c = new rec::DictionaryCompressor;
        std::string error;
        Check(c->Load(FuzzDictionary(), 1, &error));
        return c;
      }();
      w.encoded = true;
      w.body = std::move(content);
      w.record = compressor->Encode(rec::RecordKind::kReportBatch, w.body);
    } else if (flags & 1) {
      w.encoded = true;
      w.body = std::move(content);
      w.record = rec::EncodeRecord(
          flags & 2 ? rec::RecordKind::kSegmentHeader : rec::RecordKind::kReportBatch, w.body,
          flags & 4 ? rec::Compression::kZstd : rec::Compression::kNone, 1);
    } else {
      w.record = std::move(content);
    }
    w.start = writer.offset();
    if (rec::kBlockSize - w.start % rec::kBlockSize < rec::kHeaderSize) {
      w.start += rec::kBlockSize - w.start % rec::kBlockSize;
    }
    writer.AddRecord(w.record, &original);
    w.end = writer.offset();
    written.push_back(std::move(w));
  }
  Check(original.size() == writer.offset());

  // Damage, as a crash or a bad disk might.
  std::string data = original;
  uint64_t size = data.size();
  while (!in.empty() && size > 0) {
    const uint8_t op = in.Next();
    const uint64_t offset = (uint64_t{in.Next()} | uint64_t{in.Next()} << 8) * size / 65536;
    const uint8_t value = in.Next();
    switch (op % 3) {
      case 0:
        data[offset] = static_cast<char>(data[offset] ^ (value == 0 ? 1 : value));
        break;
      case 1:
        std::fill(data.begin() + static_cast<std::ptrdiff_t>(offset),
                  data.begin() + static_cast<std::ptrdiff_t>(
                                     std::min(size, offset + (uint64_t{value} + 1) * 64)),
                  '\0');
        break;
      case 2:
        size = offset;
        break;
    }
  }
  data.resize(size);

  auto touched = [&](const Written& w) {
    return w.end > size ||
           std::memcmp(data.data() + w.start, original.data() + w.start, w.end - w.start) != 0;
  };

  const auto [point_in_time, salvage] = ReadBoth(data);
  // Salvage loses nothing the damage did not touch.
  size_t next = 0;
  bool any_touched = false;
  std::vector<std::pair<uint64_t, std::string>> before_first_touch;
  for (const Written& w : written) {
    if (touched(w)) {
      any_touched = true;
      continue;
    }
    if (!any_touched) before_first_touch.emplace_back(w.start, w.record);
    while (next < salvage.records.size() && salvage.records[next].first < w.start) ++next;
    Check(next < salvage.records.size());
    Check(salvage.records[next].first == w.start && salvage.records[next].second == w.record);
    if (w.encoded) {
      static const rec::RecordDictionary* const dictionary = [] {
        auto* d = new rec::RecordDictionary;
        std::string error;
        Check(d->Load(FuzzDictionary(), &error));
        return d;
      }();
      std::string storage;
      rec::DecodedRecord decoded;
      std::string error;
      Check(rec::DecodeRecord(w.record, &storage, &decoded, &error, dictionary) &&
            decoded.body == w.body);
    }
  }
  Check(point_in_time.records == before_first_touch);
  if (!any_touched) {
    Check(salvage.records.size() == written.size() && salvage.damage.empty());
    Check(point_in_time.damage.empty());
  }
}

}  // namespace

ACCELMON_FUZZ_TARGET(recording_reader) {
  if (size == 0) return 0;
  if (data[0] % 2 == 0) {
    ReadBoth(std::string_view(reinterpret_cast<const char*>(data + 1), size - 1));
  } else {
    FuzzRecipe(Bytes(data + 1, size - 1));
  }
  return 0;
}
