#include "collectors/buddyinfo.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <vector>

#include "proto/buddy_zone.h"

namespace accelmon::collectors {
namespace buddyinfo_test {
namespace {

const std::string kFixtures = ACCELMON_FIXTURES_DIR;

std::vector<uint64_t> Blocks(const v1::BuddyZone& zone) {
  return {zone.free_blocks().begin(), zone.free_blocks().end()};
}

v1::BuddyZone ZoneWith(std::vector<uint64_t> blocks) {
  v1::BuddyZone zone;
  for (uint64_t b : blocks) zone.add_free_blocks(b);
  return zone;
}

TEST(Buddyinfo, ReadsFixtureWithTwoNumaNodes) {
  BuddyinfoCollector collector(PathResolver(kFixtures + "/host/proc", kFixtures + "/host/sys"));
  v1::NodeReport report;
  collector.Collect(report);
  // tests/fixtures/host/proc/buddyinfo: this machine's node 0, plus a hand-written node 1.
  const auto& zones = report.host().buddyinfo();
  ASSERT_EQ(zones.size(), 4);
  EXPECT_EQ(zones[0].numa_node(), 0u);
  EXPECT_EQ(zones[0].zone(), "DMA");
  EXPECT_EQ(Blocks(zones[0]), (std::vector<uint64_t>{0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 3}));
  EXPECT_EQ(zones[1].zone(), "DMA32");
  EXPECT_EQ(zones[1].free_blocks(10), 752u);
  EXPECT_EQ(zones[2].numa_node(), 0u);
  EXPECT_EQ(zones[2].zone(), "Normal");
  EXPECT_EQ(Blocks(zones[2]),
            (std::vector<uint64_t>{28311, 21974, 16585, 9139, 3615, 1114, 419, 114, 25, 2, 9}));
  EXPECT_EQ(zones[3].numa_node(), 1u);
  EXPECT_EQ(zones[3].zone(), "Normal");
  EXPECT_EQ(Blocks(zones[3]),
            (std::vector<uint64_t>{31207, 18344, 12021, 7410, 2968, 987, 311, 96, 19, 3, 5}));
  for (const auto& zone : zones) {
    EXPECT_EQ(zone.page_size_bytes(), static_cast<uint64_t>(::sysconf(_SC_PAGESIZE)));
  }
}

TEST(Buddyinfo, ParserLeavesPageSizeAbsent) {
  v1::HostTelemetry host;
  EXPECT_EQ(ParseBuddyinfo("Node 0, zone   Normal      1      2 \n", host), 0u);
  ASSERT_EQ(host.buddyinfo_size(), 1);
  EXPECT_FALSE(host.buddyinfo(0).has_page_size_bytes()) << "the text does not say it";
}

TEST(Buddyinfo, SkipsMalformedLinesAndKeepsTheRest) {
  v1::HostTelemetry host;
  const std::string text =
      "Node 0, zone      DMA      0      0      1 \n"
      "Node 0, zone    DMA32      4   many      2 \n"  // not a number
      "Node x, zone   Normal      1      2      3 \n"  // bad node
      "Node 0, zone   Normal\n"                        // no counts
      "Node 0, area   Normal      1      2      3 \n"  // not "zone"
      "Node 4294967296, zone Normal 1\n"               // node beyond uint32
      "Node 0, zone   Normal     -1      2      3 \n"  // negative
      "\n"
      "Node 2, zone  Movable      7      8      9";  // no final newline
  EXPECT_EQ(ParseBuddyinfo(text, host), 6u);
  ASSERT_EQ(host.buddyinfo_size(), 2);
  EXPECT_EQ(host.buddyinfo(0).zone(), "DMA");
  EXPECT_EQ(Blocks(host.buddyinfo(0)), (std::vector<uint64_t>{0, 0, 1}));
  EXPECT_EQ(host.buddyinfo(1).numa_node(), 2u);
  EXPECT_EQ(host.buddyinfo(1).zone(), "Movable");
  EXPECT_EQ(Blocks(host.buddyinfo(1)), (std::vector<uint64_t>{7, 8, 9}));
}

TEST(Buddyinfo, CountersNear2To64ParseExactly) {
  v1::HostTelemetry host;
  EXPECT_EQ(ParseBuddyinfo("Node 0, zone Normal 18446744073709551000 18446744073709551615\n", host),
            0u);
  ASSERT_EQ(host.buddyinfo_size(), 1);
  EXPECT_EQ(host.buddyinfo(0).free_blocks(0), 18446744073709551000ULL);
  EXPECT_EQ(host.buddyinfo(0).free_blocks(1), 18446744073709551615ULL);
}

TEST(Buddyinfo, MissingFileIsAnErrorNamingThePath) {
  BuddyinfoCollector collector(PathResolver("/nonexistent/proc", "/nonexistent/sys"));
  v1::NodeReport report;
  try {
    collector.Collect(report);
    FAIL() << "expected CollectorError";
  } catch (const CollectorError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/proc/buddyinfo"), std::string::npos);
  }
  EXPECT_EQ(report.host().buddyinfo_size(), 0);
}

TEST(UnusableFreeIndex, WorkedExampleByHand) {
  // Orders 0..3 with 4, 2, 1, 1 free blocks: 4*1 + 2*2 + 1*4 + 1*8 = 20 free pages.
  const v1::BuddyZone zone = ZoneWith({4, 2, 1, 1});
  EXPECT_DOUBLE_EQ(*UnusableFreeIndex(zone, 0), 0.0);        // any free page serves order 0
  EXPECT_DOUBLE_EQ(*UnusableFreeIndex(zone, 1), 4.0 / 20);   // the 4 single pages cannot
  EXPECT_DOUBLE_EQ(*UnusableFreeIndex(zone, 2), 8.0 / 20);   // + the 2 blocks of 2 pages
  EXPECT_DOUBLE_EQ(*UnusableFreeIndex(zone, 3), 12.0 / 20);  // + the block of 4; the 8 serves
  EXPECT_EQ(UnusableFreeIndex(zone, 4), std::nullopt) << "beyond the zone's orders";
}

TEST(UnusableFreeIndex, WorkedExampleFromFixtureDmaZone) {
  // Node 0 DMA in the fixture: 1 block of order 8, 1 of order 9, 3 of order 10.
  // Free: 256 + 512 + 3*1024 = 3840 pages. Order 9 cannot use the 256; order 10 not 256 + 512.
  const v1::BuddyZone zone = ZoneWith({0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 3});
  EXPECT_DOUBLE_EQ(*UnusableFreeIndex(zone, 8), 0.0);
  EXPECT_DOUBLE_EQ(*UnusableFreeIndex(zone, 9), 256.0 / 3840);
  EXPECT_DOUBLE_EQ(*UnusableFreeIndex(zone, 10), 768.0 / 3840);
}

TEST(UnusableFreeIndex, NoFreeMemoryOrNoOrdersIsUnknown) {
  EXPECT_EQ(UnusableFreeIndex(ZoneWith({0, 0, 0}), 1), std::nullopt);
  EXPECT_EQ(UnusableFreeIndex(ZoneWith({}), 0), std::nullopt);
}

TEST(UnusableFreeIndex, HugeCountsAndManyOrdersDoNotOverflow) {
  std::vector<uint64_t> blocks(100, 18446744073709551615ULL);
  const auto index = UnusableFreeIndex(ZoneWith(blocks), 99);
  ASSERT_TRUE(index.has_value());
  EXPECT_GE(*index, 0.0);
  EXPECT_LE(*index, 1.0);
  EXPECT_EQ(UnusableFreeIndex(ZoneWith(std::vector<uint64_t>(2000, 1)), 5), std::nullopt);
}

}  // namespace
}  // namespace buddyinfo_test
}  // namespace accelmon::collectors
