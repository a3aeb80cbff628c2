// Rendezvous hashing: the same ranking on every machine, an even spread, and little movement when
// the exporter list changes.
#include "daemon/agent/rendezvous.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

namespace accelmon {
namespace rendezvous_test {
namespace {

std::vector<std::string> Exporters(int n) {
  std::vector<std::string> list;
  for (int i = 0; i < n; ++i) list.push_back("exporter-" + std::to_string(i) + ".example.org:9478");
  return list;
}

std::string Node(int i) { return "gpu-node-" + std::to_string(i); }

TEST(RendezvousTest, WeightIsFixedArithmetic) {
  // Pinned (and the same as the Python in tests/e2e/scale_out_test.sh): a change here would move
  // every node of every fleet on upgrade.
  EXPECT_EQ(RendezvousWeight("", ""), 0xf6011dda53e84b8dULL);
  EXPECT_EQ(RendezvousWeight("node-a", "127.0.0.1:9478"), 0x6433552ddf83dc53ULL);
  EXPECT_NE(RendezvousWeight("node-a", "h:1"), RendezvousWeight("node-a", "h:2"));
  // The separator keeps ("ab", "c") and ("a", "bc") apart.
  EXPECT_NE(RendezvousWeight("ab", "c"), RendezvousWeight("a", "bc"));
}

TEST(RendezvousTest, RankingDoesNotDependOnListOrder) {
  const auto list = Exporters(4);
  const std::vector<std::string> reversed(list.rbegin(), list.rend());
  for (int i = 0; i < 100; ++i)
    EXPECT_EQ(RankByRendezvous(Node(i), list), RankByRendezvous(Node(i), reversed));
}

TEST(RendezvousTest, DropsDuplicates) {
  EXPECT_EQ(RankByRendezvous("n", {"a:1", "a:1"}), std::vector<std::string>{"a:1"});
  EXPECT_EQ(RankByRendezvous("n", {"a:1", "b:1", "a:1"}).size(), 2u);
  EXPECT_TRUE(RankByRendezvous("n", {}).empty());
}

TEST(RendezvousTest, SpreadsTenThousandNodesEvenly) {
  constexpr int kNodes = 10'000;
  for (int exporters = 2; exporters <= 4; ++exporters) {
    const auto list = Exporters(exporters);
    std::map<std::string, int> per_exporter;
    for (int i = 0; i < kNodes; ++i) ++per_exporter[RankByRendezvous(Node(i), list).front()];
    ASSERT_EQ(per_exporter.size(), static_cast<size_t>(exporters));
    const int fair = kNodes / exporters;
    for (const auto& [address, count] : per_exporter) {
      // A fixed hash, so no flakiness: within 5% of a fair share (ten standard deviations).
      EXPECT_NEAR(count, fair, fair / 20) << exporters << " exporters, " << address;
    }
  }
}

TEST(RendezvousTest, AddingAnExporterMovesOnlyItsShareToIt) {
  constexpr int kNodes = 10'000;
  const auto three = Exporters(3);
  const auto four = Exporters(4);
  int moved = 0;
  for (int i = 0; i < kNodes; ++i) {
    const std::string before = RankByRendezvous(Node(i), three).front();
    const std::string after = RankByRendezvous(Node(i), four).front();
    if (before == after) continue;
    ++moved;
    EXPECT_EQ(after, four.back()) << Node(i) << " moved between two old exporters";
  }
  // About a quarter: what the new exporter takes, and nothing more.
  EXPECT_NEAR(moved, kNodes / 4, kNodes / 40);
}

TEST(RendezvousTest, RemovingAnExporterMovesOnlyItsNodes) {
  const auto four = Exporters(4);
  const std::vector<std::string> three(four.begin(), four.end() - 1);
  for (int i = 0; i < 10'000; ++i) {
    const auto before = RankByRendezvous(Node(i), four);
    const std::string after = RankByRendezvous(Node(i), three).front();
    // Failover order is the same ranking: a removed exporter's nodes go to their second choice.
    EXPECT_EQ(after, before.front() == four.back() ? before[1] : before.front()) << Node(i);
  }
}

}  // namespace
}  // namespace rendezvous_test
}  // namespace accelmon
