// Spool::Read starts near what it wants (a mark at most a block or so before it) and reads no more
// than the window and the limit need: every window of a long segment, with small, block-spanning
// and very large reports, reads back exactly, both as written and after reopening.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "daemon/agent/spool.h"
#include "support/report_sequences.h"
#include "support/temp_dir.h"

namespace accelmon {
namespace spool_read_test {
namespace {

using testing::Range;

namespace fs = std::filesystem;

// Mostly small reports, some spanning blocks, one far larger than any chunk Read starts with.
size_t PaddingOf(uint64_t sequence) {
  if (sequence == 700) return 3 << 20;
  if (sequence % 97 == 0) return 70000;
  if (sequence % 13 == 0) return 5000;
  return sequence % 300;
}

v1::NodeReport Report(uint64_t sequence) {
  v1::NodeReport r;
  r.set_node("node-" + std::string(PaddingOf(sequence), 'x'));
  r.set_agent_instance_id("feedface00000001");
  r.set_sequence(sequence);
  return r;
}

std::vector<uint64_t> Sequences(const std::vector<std::shared_ptr<const v1::NodeReport>>& rs) {
  std::vector<uint64_t> out;
  for (const auto& r : rs) {
    EXPECT_EQ(r->node().size(), 5 + PaddingOf(r->sequence())) << r->sequence();
    out.push_back(r->sequence());
  }
  return out;
}

void ExpectEveryWindowReadsBack(Spool& spool, uint64_t last) {
  for (uint64_t after = 0; after < last; after += 37) {
    SCOPED_TRACE("after " + std::to_string(after));
    for (size_t limit : {size_t{1}, size_t{7}, size_t{256}}) {
      uint64_t scanned = 0;
      const uint64_t expected_last = std::min<uint64_t>(last, after + limit);
      EXPECT_EQ(Sequences(spool.Read(after, UINT64_MAX, limit, &scanned)),
                Range(after + 1, expected_last));
      EXPECT_EQ(scanned, expected_last);
    }
    const uint64_t before = std::min<uint64_t>(last + 1, after + 20);
    EXPECT_EQ(Sequences(spool.Read(after, before, 1000, nullptr)), Range(after + 1, before - 1));
  }
  // The way the uplink reads: chunk after chunk from the watermark.
  std::vector<uint64_t> all;
  for (uint64_t after = 0;;) {
    const auto chunk = Sequences(spool.Read(after, UINT64_MAX, 256, nullptr));
    if (chunk.empty()) break;
    all.insert(all.end(), chunk.begin(), chunk.end());
    after = chunk.back();
  }
  EXPECT_EQ(all, Range(1, last));
}

TEST(SpoolReadTest, EveryWindowOfLongSegmentsReadsBack) {
  const std::string dir = ::accelmon::testing::MakeTempDir("accelmon-spool-read-test");
  const uint64_t last = 1500;
  const SpoolOptions options{
      .dir = dir, .max_bytes = uint64_t{256} << 20, .segment_bytes = uint64_t{4} << 20};
  {
    Spool spool(options, "fresh-id");
    for (uint64_t s = 1; s <= last; ++s) ASSERT_TRUE(spool.Append(Report(s)));
    ASSERT_GE(spool.segments(), 2u);
    ExpectEveryWindowReadsBack(spool, last);
  }
  {
    Spool spool(options, "fresh-id");  // the marks now come from reading the segments at open
    ASSERT_EQ(spool.last_sequence(), last);
    ExpectEveryWindowReadsBack(spool, last);
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace spool_read_test
}  // namespace accelmon
