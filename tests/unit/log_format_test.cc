// The block framing (recording/log_*.h): exact bytes of the writer, and torture tests of both
// readers that say exactly which records each kind of damage may cost.
#include "recording/log_format.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "recording/log_reader.h"
#include "recording/log_writer.h"

namespace accelmon::recording {
namespace log_format_test {
namespace {

// Letters only: never zero (so zeroes are always damage or an unwritten tail) and never a
// fragment type (so a resync scan cannot be fooled by payload bytes).
std::string Payload(size_t size, size_t seed) {
  std::string payload(size, 'a');
  for (size_t i = 0; i < size; ++i) payload[i] = static_cast<char>('a' + (i * 7 + seed) % 26);
  return payload;
}

struct Written {
  std::string record;
  uint64_t start = 0;  // offset of its first fragment
  uint64_t end = 0;    // just past its last fragment
};

class SegmentBuilder {
 public:
  void Add(std::string record) {
    uint64_t start = writer_.offset();
    if (kBlockSize - start % kBlockSize < kHeaderSize) start += kBlockSize - start % kBlockSize;
    EXPECT_EQ(writer_.next_record_offset(), start);
    writer_.AddRecord(record, &bytes_);
    written_.push_back(Written{std::move(record), start, writer_.offset()});
  }
  // One record that ends `left` bytes before the end of the current block.
  void FillBlockLeaving(size_t left) {
    const size_t remaining = kBlockSize - writer_.offset() % kBlockSize;
    ASSERT_GE(remaining, kHeaderSize + left);
    Add(Payload(remaining - kHeaderSize - left, written_.size()));
  }
  uint64_t offset() const { return writer_.offset(); }
  const std::string& bytes() const { return bytes_; }
  const std::vector<Written>& written() const { return written_; }

 private:
  LogWriter writer_;
  std::string bytes_;
  std::vector<Written> written_;
};

using Records = std::vector<std::pair<uint64_t, std::string>>;  // offset, record

struct ReadResult {
  Records records;
  std::vector<Damage> damage;
  uint64_t valid_end = 0;
  uint64_t torn = 0;
};

ReadResult ReadAll(std::string_view data, ReadMode mode) {
  LogReader reader(data, mode);
  ReadResult result;
  std::string_view record;
  std::string scratch;
  while (reader.ReadRecord(&record, &scratch)) {
    result.records.emplace_back(reader.record_offset(), std::string(record));
  }
  result.damage = reader.damage();
  result.valid_end = reader.valid_end();
  result.torn = reader.torn_tail_bytes();
  return result;
}

template <typename Keep>
Records Expected(const std::vector<Written>& written, Keep keep) {
  Records records;
  for (const Written& w : written) {
    if (keep(w)) records.emplace_back(w.start, w.record);
  }
  return records;
}

std::string Fragment(FragmentType type, std::string_view data) {
  const uint32_t crc = FragmentChecksum(type, data);
  std::string out;
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((crc >> (8 * i)) & 0xff));
  out.push_back(static_cast<char>(data.size() & 0xff));
  out.push_back(static_cast<char>(data.size() >> 8));
  out.push_back(static_cast<char>(type));
  out.append(data);
  return out;
}

// About 3.3 blocks: empty, small and medium records, a block ending in padding, and one record
// spanning three blocks (FIRST, MIDDLE, LAST) whose end shares the last block with more records.
SegmentBuilder TortureSegment() {
  SegmentBuilder b;
  std::mt19937 rng(7);
  b.Add("");
  for (int i = 0; i < 30; ++i) b.Add(Payload(rng() % 300 + 1, b.written().size()));
  b.Add(Payload(2000, 1));
  b.FillBlockLeaving(3);
  for (int i = 0; i < 5; ++i) b.Add(Payload(rng() % 300 + 1, b.written().size()));
  b.Add(Payload(2 * kBlockSize + 1000, 2));
  for (int i = 0; i < 20; ++i) b.Add(Payload(rng() % 300 + 1, b.written().size()));
  b.Add("");
  b.Add(Payload(3000, 3));
  for (int i = 0; i < 10; ++i) b.Add(Payload(rng() % 300 + 1, b.written().size()));
  return b;
}

TEST(LogFormatTest, ChecksumIsLevelDbMaskedCrc32OfTypeAndData) {
  const std::string typed = std::string("\x01", 1) + "hello";
  const auto crc =
      static_cast<uint32_t>(crc32_z(0, reinterpret_cast<const Bytef*>(typed.data()), typed.size()));
  EXPECT_EQ(FragmentChecksum(FragmentType::kFull, "hello"),
            ((crc >> 15) | (crc << 17)) + 0xa282ead8u);
  EXPECT_NE(FragmentChecksum(FragmentType::kFull, "hello"),
            FragmentChecksum(FragmentType::kLast, "hello"));
}

TEST(LogFormatTest, WriterHeaderIsChecksumLengthAndTypeLittleEndian) {
  LogWriter writer;
  std::string out;
  writer.AddRecord("abc", &out);
  writer.AddRecord("", &out);
  ASSERT_EQ(out.size(), 2 * kHeaderSize + 3);
  EXPECT_EQ(out, Fragment(FragmentType::kFull, "abc") + Fragment(FragmentType::kFull, ""));
  const uint32_t crc = FragmentChecksum(FragmentType::kFull, "abc");
  EXPECT_EQ(static_cast<uint8_t>(out[0]), crc & 0xff);
  EXPECT_EQ(static_cast<uint8_t>(out[3]), crc >> 24);
  EXPECT_EQ(out.substr(4, 3), std::string("\x03\x00\x01", 3));
  EXPECT_EQ(writer.offset(), out.size());
}

TEST(LogFormatTest, BlockTailTooSmallForAHeaderIsZeroPadding) {
  for (size_t left = 1; left < kHeaderSize; ++left) {
    LogWriter writer(kBlockSize - left);
    std::string out;
    writer.AddRecord("xy", &out);
    EXPECT_EQ(out, std::string(left, '\0') + Fragment(FragmentType::kFull, "xy")) << left;
    EXPECT_EQ(writer.offset(), kBlockSize + kHeaderSize + 2);
  }
  // Exactly a header left: an empty FIRST fragment, the data in the next block (as LevelDB).
  LogWriter writer(kBlockSize - kHeaderSize);
  std::string out;
  writer.AddRecord("xy", &out);
  EXPECT_EQ(out, Fragment(FragmentType::kFirst, "") + Fragment(FragmentType::kLast, "xy"));
}

TEST(LogFormatTest, LargeRecordIsFragmentedAcrossBlocks) {
  const std::string big = Payload(3 * kBlockSize, 5);
  LogWriter writer;
  std::string out;
  writer.AddRecord(big, &out);
  const size_t per_block = kBlockSize - kHeaderSize;
  EXPECT_EQ(out.substr(0, kHeaderSize + per_block),
            Fragment(FragmentType::kFirst, big.substr(0, per_block)));
  EXPECT_EQ(out.substr(kBlockSize, kHeaderSize + per_block),
            Fragment(FragmentType::kMiddle, big.substr(per_block, per_block)));
  EXPECT_EQ(out.substr(3 * kBlockSize), Fragment(FragmentType::kLast, big.substr(3 * per_block)));
  for (ReadMode mode : {ReadMode::kPointInTime, ReadMode::kSalvage}) {
    const ReadResult result = ReadAll(out, mode);
    EXPECT_EQ(result.records, (Records{{0, big}}));
    EXPECT_TRUE(result.damage.empty());
    EXPECT_EQ(result.valid_end, out.size());
    EXPECT_EQ(result.torn, 0u);
  }
}

TEST(LogFormatTest, ReopenedWriterContinuesTheSameBytes) {
  const SegmentBuilder whole = TortureSegment();
  for (size_t split : {size_t{1}, size_t{31}, size_t{37}, whole.written().size() - 1}) {
    LogWriter first;
    std::string bytes;
    for (size_t i = 0; i < split; ++i) first.AddRecord(whole.written()[i].record, &bytes);
    LogWriter reopened(bytes.size());
    for (size_t i = split; i < whole.written().size(); ++i) {
      reopened.AddRecord(whole.written()[i].record, &bytes);
    }
    EXPECT_EQ(bytes, whole.bytes()) << split;
  }
}

TEST(LogFormatTest, IntactSegmentReadsBackInBothModes) {
  const SegmentBuilder b = TortureSegment();
  ASSERT_GT(b.bytes().size(), 3 * kBlockSize);
  const Written& big = b.written()[38];  // FIRST in block 1, MIDDLE in 2, LAST in the last block
  ASSERT_EQ(big.start / kBlockSize, 1u);
  ASSERT_EQ(big.end / kBlockSize, 3u);
  for (ReadMode mode : {ReadMode::kPointInTime, ReadMode::kSalvage}) {
    const ReadResult result = ReadAll(b.bytes(), mode);
    EXPECT_EQ(result.records, Expected(b.written(), [](const Written&) { return true; }));
    EXPECT_TRUE(result.damage.empty());
    EXPECT_EQ(result.valid_end, b.bytes().size());
    EXPECT_EQ(result.torn, 0u);
  }
  for (ReadMode mode : {ReadMode::kPointInTime, ReadMode::kSalvage}) {
    const ReadResult empty = ReadAll("", mode);
    EXPECT_TRUE(empty.records.empty() && empty.damage.empty());
    EXPECT_EQ(empty.torn, 0u);
  }
}

// Reading from a record boundary (what an earlier read returned) sees the records from there, at
// the same offsets, as reading the whole segment does; damage and the torn tail too.
TEST(LogFormatTest, ReadingFromAnOffsetIsTheRestOfAWholeRead) {
  const SegmentBuilder b = TortureSegment();
  const std::string& bytes = b.bytes();
  for (const Written& w : b.written()) {
    const uint64_t from = w.start;
    SCOPED_TRACE("from " + std::to_string(from));
    for (ReadMode mode : {ReadMode::kPointInTime, ReadMode::kSalvage}) {
      LogReader reader(std::string_view(bytes).substr(from), mode, from);
      Records records;
      std::string_view record;
      std::string scratch;
      while (reader.ReadRecord(&record, &scratch)) {
        records.emplace_back(reader.record_offset(), std::string(record));
      }
      EXPECT_EQ(records, Expected(b.written(), [&](const Written& x) { return x.start >= from; }));
      EXPECT_TRUE(reader.damage().empty());
      EXPECT_EQ(reader.valid_end(), bytes.size());
      EXPECT_EQ(reader.torn_tail_bytes(), 0u);
    }
  }

  // A flipped byte and a cut: offsets in the segment, not in the bytes given.
  const Written& damaged = b.written()[40];
  const Written& from = b.written()[35];
  std::string copy = bytes.substr(0, bytes.size() - 3);
  copy[damaged.start + kHeaderSize] ^= 0x01;
  LogReader reader(std::string_view(copy).substr(from.start), ReadMode::kPointInTime, from.start);
  std::string_view record;
  std::string scratch;
  uint64_t last = 0;
  while (reader.ReadRecord(&record, &scratch)) last = reader.record_offset();
  EXPECT_LT(last, damaged.start);
  ASSERT_EQ(reader.damage().size(), 1u);
  EXPECT_EQ(reader.damage()[0].offset, damaged.start);
  EXPECT_EQ(reader.damage()[0].bytes, copy.size() - damaged.start);
  EXPECT_EQ(reader.valid_end(), damaged.start);

  LogReader torn(std::string_view(copy).substr(b.written().back().start), ReadMode::kSalvage,
                 b.written().back().start);
  EXPECT_FALSE(torn.ReadRecord(&record, &scratch));
  EXPECT_TRUE(torn.damage().empty());
  EXPECT_EQ(torn.valid_end(), b.written().back().start);
  EXPECT_EQ(torn.torn_tail_bytes(), copy.size() - b.written().back().start);
}

// Every byte of the last block flipped in turn: salvage loses exactly the record holding it and
// says where; point-in-time returns exactly the records before it.
TEST(LogFormatTest, FlipEveryByteOfTheLastBlock) {
  const SegmentBuilder b = TortureSegment();
  const std::string& clean = b.bytes();
  const std::vector<Written>& written = b.written();
  const uint64_t size = clean.size();
  const uint64_t last_block = (size - 1) / kBlockSize * kBlockSize;
  std::string data = clean;
  for (uint64_t x = last_block; x < size; ++x) {
    data[x - 1] = clean[x - 1];  // undo the previous flip
    data[x] = static_cast<char>(clean[x] ^ 0xff);
    const auto hit = std::find_if(written.begin(), written.end(),
                                  [x](const Written& w) { return w.start <= x && x < w.end; });
    ASSERT_NE(hit, written.end()) << x;  // the last block holds no padding
    const Written& lost = *hit;
    const uint64_t before_end = hit == written.begin() ? 0 : std::prev(hit)->end;
    auto not_lost = [&](const Written& w) { return w.start != lost.start; };
    auto before = [&](const Written& w) { return w.end <= lost.start; };

    // The one ambiguity: a length byte of the file's last fragment that now points past the end
    // of the file looks exactly like a write cut short by a crash.
    const uint64_t last_fragment = std::max(lost.start, (lost.end - 1) / kBlockSize * kBlockSize);
    const uint64_t length = static_cast<uint8_t>(data[last_fragment + 4]) |
                            uint64_t{static_cast<uint8_t>(data[last_fragment + 5])} << 8;
    const uint64_t fragment_end = last_fragment + kHeaderSize + length;
    const bool torn = lost.end == size && (x == last_fragment + 4 || x == last_fragment + 5) &&
                      fragment_end > size && fragment_end <= last_block + kBlockSize;

    const ReadResult salvage = ReadAll(data, ReadMode::kSalvage);
    EXPECT_EQ(salvage.records, Expected(written, not_lost)) << x;
    const ReadResult pit = ReadAll(data, ReadMode::kPointInTime);
    EXPECT_EQ(pit.records, Expected(written, before)) << x;
    EXPECT_EQ(pit.valid_end, before_end) << x;
    if (torn) {
      EXPECT_TRUE(salvage.damage.empty()) << x;
      EXPECT_EQ(salvage.torn, size - lost.start) << x;
      EXPECT_TRUE(pit.damage.empty()) << x;
      EXPECT_EQ(pit.torn, size - lost.start) << x;
      continue;
    }
    ASSERT_EQ(salvage.damage.size(), 1u) << x;
    EXPECT_EQ(salvage.damage[0].offset, lost.start) << x;
    EXPECT_EQ(salvage.damage[0].bytes, lost.end - lost.start) << x;
    EXPECT_FALSE(salvage.damage[0].reason.empty());
    EXPECT_EQ(salvage.torn, 0u) << x;
    ASSERT_EQ(pit.damage.size(), 1u) << x;
    EXPECT_EQ(pit.damage[0].offset, lost.start) << x;
    EXPECT_EQ(pit.damage[0].bytes, size - lost.start) << x;
    EXPECT_EQ(pit.torn, 0u) << x;
  }
}

// Cut anywhere: the records wholly before the cut come back, the rest is a torn tail, never
// damage. Every offset of the last block and around every fragment and block boundary, and a
// stride elsewhere (a full sweep reads about size^2 bytes).
TEST(LogFormatTest, ASegmentCutAtAnyByteReadsBackItsWholeRecordsAsTorn) {
  const SegmentBuilder b = TortureSegment();
  const std::vector<Written>& written = b.written();
  const uint64_t size = b.bytes().size();
  std::vector<uint64_t> cuts;
  for (uint64_t cut = 0; cut <= size; cut += 61) cuts.push_back(cut);
  for (uint64_t cut = (size - 1) / kBlockSize * kBlockSize; cut <= size; ++cut) cuts.push_back(cut);
  std::vector<uint64_t> boundaries;
  for (uint64_t block = 0; block <= size; block += kBlockSize) boundaries.push_back(block);
  for (const Written& w : written) {
    for (uint64_t fragment = w.start; fragment < w.end;
         fragment = (fragment / kBlockSize + 1) * kBlockSize) {
      boundaries.push_back(fragment);
    }
    boundaries.push_back(w.end);
  }
  for (uint64_t boundary : boundaries) {
    for (uint64_t cut = boundary > 10 ? boundary - 10 : 0; cut <= std::min(boundary + 10, size);
         ++cut) {
      cuts.push_back(cut);
    }
  }
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  for (uint64_t cut : cuts) {
    const std::string_view data = std::string_view(b.bytes()).substr(0, cut);
    auto whole = [cut](const Written& w) { return w.end <= cut; };
    uint64_t valid_end = 0;
    for (const Written& w : written) {
      if (whole(w)) valid_end = w.end;
    }
    for (ReadMode mode : {ReadMode::kPointInTime, ReadMode::kSalvage}) {
      const ReadResult result = ReadAll(data, mode);
      ASSERT_EQ(result.records, Expected(written, whole)) << cut;
      ASSERT_TRUE(result.damage.empty()) << cut << ": " << result.damage[0].reason;
      ASSERT_EQ(result.valid_end, valid_end) << cut;
      ASSERT_EQ(result.torn, cut - valid_end) << cut;
    }
  }
}

// A zeroed block with records after it is damage: salvage loses exactly the records touching the
// block and says how many bytes; point-in-time stops there.
TEST(LogFormatTest, ZeroedBlockInTheMiddle) {
  const SegmentBuilder b = TortureSegment();
  const std::vector<Written>& written = b.written();
  const uint64_t size = b.bytes().size();
  for (uint64_t block = 0; (block + 1) * kBlockSize < size; ++block) {
    const uint64_t from = block * kBlockSize;
    const uint64_t to = from + kBlockSize;
    std::string data = b.bytes();
    std::fill(data.begin() + static_cast<std::ptrdiff_t>(from),
              data.begin() + static_cast<std::ptrdiff_t>(to), '\0');
    auto touches = [&](const Written& w) { return w.start < to && w.end > from; };
    const auto first_lost = std::find_if(written.begin(), written.end(), touches);
    const auto first_kept_after =
        std::find_if(first_lost, written.end(), [&](const Written& w) { return !touches(w); });
    ASSERT_NE(first_kept_after, written.end());
    const uint64_t last_lost_end = std::prev(first_kept_after)->end;

    const ReadResult salvage = ReadAll(data, ReadMode::kSalvage);
    EXPECT_EQ(salvage.records, Expected(written, [&](const Written& w) { return !touches(w); }))
        << block;
    ASSERT_EQ(salvage.damage.size(), 1u) << block;
    const Damage& damage = salvage.damage[0];
    EXPECT_EQ(damage.offset, first_lost->start) << block;
    // Up to the end of the last lost record, or past the padding after it.
    EXPECT_GE(damage.offset + damage.bytes, last_lost_end) << block;
    EXPECT_LE(damage.offset + damage.bytes, first_kept_after->start) << block;
    EXPECT_EQ(salvage.torn, 0u);
    EXPECT_EQ(salvage.valid_end, size);

    const ReadResult pit = ReadAll(data, ReadMode::kPointInTime);
    EXPECT_EQ(pit.records, Expected(written, [&](const Written& w) { return w.end <= from; }));
    ASSERT_EQ(pit.damage.size(), 1u);
    EXPECT_EQ(pit.damage[0].offset, first_lost->start);
    EXPECT_EQ(pit.damage[0].bytes, size - first_lost->start);
  }
}

// A zeroed page inside a block: salvage finds the next fragment in the same block.
TEST(LogFormatTest, ZeroedPageInsideABlockCostsOnlyTheRecordsOnIt) {
  const SegmentBuilder b = TortureSegment();
  const std::vector<Written>& written = b.written();
  const uint64_t from = 4096;
  const uint64_t to = 8192;
  std::string data = b.bytes();
  std::fill(data.begin() + from, data.begin() + to, '\0');
  auto touches = [&](const Written& w) { return w.start < to && w.end > from; };
  const ReadResult salvage = ReadAll(data, ReadMode::kSalvage);
  EXPECT_EQ(salvage.records, Expected(written, [&](const Written& w) { return !touches(w); }));
  ASSERT_EQ(salvage.damage.size(), 1u);
  const auto first_lost = std::find_if(written.begin(), written.end(), touches);
  const auto first_kept_after =
      std::find_if(first_lost, written.end(), [&](const Written& w) { return !touches(w); });
  EXPECT_EQ(salvage.damage[0].offset, first_lost->start);
  EXPECT_EQ(salvage.damage[0].offset + salvage.damage[0].bytes, first_kept_after->start);
}

// A crash loses what was not synced: either the file is cut back to the synced size, or it keeps
// its size and the pages written after the sync read back as zeroes. Both are a torn tail.
TEST(LogFormatTest, CrashDropsOnlyUnsyncedData) {
  const SegmentBuilder b = TortureSegment();
  const std::vector<Written>& written = b.written();
  const uint64_t size = b.bytes().size();
  constexpr uint64_t kPage = 4096;
  for (const Written& synced : written) {
    const uint64_t sync = synced.end;
    const std::string_view cut = std::string_view(b.bytes()).substr(0, sync);
    const uint64_t page_end = std::min((sync + kPage - 1) / kPage * kPage, size);
    std::string zeroed = b.bytes();
    std::fill(zeroed.begin() + static_cast<std::ptrdiff_t>(page_end), zeroed.end(), '\0');
    for (ReadMode mode : {ReadMode::kPointInTime, ReadMode::kSalvage}) {
      const ReadResult after_cut = ReadAll(cut, mode);
      EXPECT_EQ(after_cut.records,
                Expected(written, [&](const Written& w) { return w.end <= sync; }));
      EXPECT_TRUE(after_cut.damage.empty()) << sync;
      EXPECT_EQ(after_cut.torn, 0u);

      // The page holding the sync point was written whole; later ones never were.
      const ReadResult after_zero = ReadAll(zeroed, mode);
      EXPECT_EQ(after_zero.records,
                Expected(written, [&](const Written& w) { return w.end <= page_end; }))
          << sync;
      EXPECT_TRUE(after_zero.damage.empty()) << sync << ": " << after_zero.damage[0].reason;
      EXPECT_EQ(after_zero.valid_end + after_zero.torn, size) << sync;
    }
  }
}

TEST(LogFormatTest, AllZeroFileIsAnUnwrittenTail) {
  const std::string zeroes(2 * kBlockSize + 100, '\0');
  for (ReadMode mode : {ReadMode::kPointInTime, ReadMode::kSalvage}) {
    const ReadResult result = ReadAll(zeroes, mode);
    EXPECT_TRUE(result.records.empty());
    EXPECT_TRUE(result.damage.empty());
    EXPECT_EQ(result.torn, zeroes.size());
  }
}

TEST(LogFormatTest, GarbageIsOneDamagedRegion) {
  std::string garbage(3 * kBlockSize + 1000, '\0');
  std::mt19937 rng(3);
  for (char& c : garbage) c = static_cast<char>(rng() % 255 + 1);
  const ReadResult salvage = ReadAll(garbage, ReadMode::kSalvage);
  EXPECT_TRUE(salvage.records.empty());
  ASSERT_EQ(salvage.damage.size(), 1u);
  EXPECT_EQ(salvage.damage[0].offset, 0u);
  EXPECT_EQ(salvage.damage[0].bytes, garbage.size());
}

TEST(LogFormatTest, FragmentsOutOfOrderAreDamage) {
  const std::string full = Fragment(FragmentType::kFull, "kept");
  struct Case {
    std::string bad;
    std::string reason;
  };
  const std::vector<Case> cases = {
      {Fragment(FragmentType::kMiddle, "orphan"), "fragment without the start of its record"},
      {Fragment(FragmentType::kLast, "orphan"), "fragment without the start of its record"},
      {Fragment(FragmentType::kFirst, "unfinished"), "record without its last fragment"},
      {Fragment(FragmentType::kFirst, "a") + Fragment(FragmentType::kMiddle, "b"),
       "record without its last fragment"},
  };
  for (const Case& c : cases) {
    const std::string data = c.bad + full;
    const ReadResult salvage = ReadAll(data, ReadMode::kSalvage);
    EXPECT_EQ(salvage.records, (Records{{c.bad.size(), "kept"}}));
    ASSERT_EQ(salvage.damage.size(), 1u);
    EXPECT_EQ(salvage.damage[0].offset, 0u);
    EXPECT_EQ(salvage.damage[0].bytes, c.bad.size());
    EXPECT_EQ(salvage.damage[0].reason, c.reason);
    const ReadResult pit = ReadAll(data, ReadMode::kPointInTime);
    EXPECT_TRUE(pit.records.empty());
    ASSERT_EQ(pit.damage.size(), 1u);
    EXPECT_EQ(pit.damage[0].offset, 0u);
    EXPECT_EQ(pit.damage[0].bytes, data.size());
    EXPECT_EQ(pit.valid_end, 0u);
  }
}

TEST(LogFormatTest, BadHeadersAreDamageWithAReason) {
  const std::string first = Fragment(FragmentType::kFull, "first");
  const std::string last = Fragment(FragmentType::kFull, "last");
  std::string bad_type = Fragment(FragmentType::kFull, "xxxx");
  bad_type[6] = 9;
  std::string past_block = Fragment(FragmentType::kFull, "xxxx");
  past_block[4] = '\xff';
  past_block[5] = '\x7f';
  std::string bad_crc = Fragment(FragmentType::kFull, "xxxx");
  bad_crc[kHeaderSize] = 'y';
  const std::string zeroes(100, '\0');
  const std::vector<std::pair<std::string, std::string>> cases = {
      {bad_type, "bad fragment type 9"},
      {past_block, "fragment length past end of block"},
      {bad_crc, "checksum mismatch"},
      {zeroes, "zeroes where a fragment belongs"},
  };
  for (const auto& [bad, reason] : cases) {
    const std::string data = first + bad + last;
    const ReadResult salvage = ReadAll(data, ReadMode::kSalvage);
    EXPECT_EQ(salvage.records, (Records{{0, "first"}, {first.size() + bad.size(), "last"}}));
    ASSERT_EQ(salvage.damage.size(), 1u) << reason;
    EXPECT_EQ(salvage.damage[0].offset, first.size());
    EXPECT_EQ(salvage.damage[0].bytes, bad.size());
    EXPECT_EQ(salvage.damage[0].reason, reason);
    const ReadResult pit = ReadAll(data, ReadMode::kPointInTime);
    EXPECT_EQ(pit.records, (Records{{0, "first"}}));
    ASSERT_EQ(pit.damage.size(), 1u);
    EXPECT_EQ(pit.damage[0].reason, reason);
    EXPECT_EQ(pit.valid_end, first.size());
  }
}

TEST(LogFormatTest, LengthPastEndOfFileFollowedByRecordsIsDamage) {
  const std::string first = Fragment(FragmentType::kFull, "first");
  std::string bad = Fragment(FragmentType::kFull, "xxxx");
  bad[4] = 100;  // 100 bytes: past the end of this small file, yet a good fragment follows
  const std::string last = Fragment(FragmentType::kFull, "last");
  const ReadResult salvage = ReadAll(first + bad + last, ReadMode::kSalvage);
  EXPECT_EQ(salvage.records, (Records{{0, "first"}, {first.size() + bad.size(), "last"}}));
  ASSERT_EQ(salvage.damage.size(), 1u);
  EXPECT_EQ(salvage.damage[0].reason, "fragment length past end of file");
  EXPECT_EQ(salvage.torn, 0u);
}

}  // namespace
}  // namespace log_format_test
}  // namespace accelmon::recording
