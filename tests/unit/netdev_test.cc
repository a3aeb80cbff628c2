#include "collectors/netdev.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace accelmon::collectors {
namespace netdev_test {
namespace {

const std::string kFixtures = ACCELMON_FIXTURES_DIR;

const v1::Link* FindLink(const v1::NodeReport& report, const std::string& name) {
  for (const auto& link : report.host().links()) {
    if (link.name() == name) return &link;
  }
  return nullptr;
}

v1::NodeReport CollectFrom(const std::string& root) {
  NetdevCollector collector(PathResolver(root + "/proc", root + "/sys"));
  v1::NodeReport report;
  collector.Collect(report);
  return report;
}

TEST(Netdev, ReadsEveryInterfaceButLoopbackInFileOrder) {
  const auto report = CollectFrom(kFixtures + "/host");
  std::vector<std::string> names;
  for (const auto& link : report.host().links()) names.push_back(link.name());
  EXPECT_EQ(names, (std::vector<std::string>{"ifb0", "ifb1", "eth0", "ens1f0", "ens1f1", "ib0"}));
}

TEST(Netdev, RealMachineInterfaceFromFixture) {
  const auto report = CollectFrom(kFixtures + "/host");
  const v1::Link* eth0 = FindLink(report, "eth0");
  ASSERT_NE(eth0, nullptr);
  // Copied from this VM's /proc/net/dev and /sys/class/net/eth0.
  EXPECT_EQ(eth0->kind(), v1::LINK_KIND_ETHERNET);
  EXPECT_EQ(eth0->receive_bytes_total(), 47317718u);
  EXPECT_EQ(eth0->receive_packets_total(), 996u);
  EXPECT_EQ(eth0->transmit_bytes_total(), 52333u);
  EXPECT_EQ(eth0->transmit_packets_total(), 644u);
  EXPECT_TRUE(eth0->has_up());
  EXPECT_TRUE(eth0->up());
  EXPECT_EQ(eth0->mtu_bytes(), 1400u);
  EXPECT_FALSE(eth0->has_max_bandwidth_bytes_per_second()) << "virtio reports speed -1";
  EXPECT_EQ(eth0->errors_total().size(), 9u);
  EXPECT_EQ(eth0->errors_total().at("rx_errors"), 0u) << "a reported 0 is present";

  const v1::Link* ifb0 = FindLink(report, "ifb0");
  ASSERT_NE(ifb0, nullptr);
  EXPECT_TRUE(ifb0->has_up());
  EXPECT_FALSE(ifb0->up());
  EXPECT_FALSE(ifb0->has_max_bandwidth_bytes_per_second()) << "no speed file (EINVAL on ifb)";
  EXPECT_EQ(ifb0->mtu_bytes(), 1500u);
}

TEST(Netdev, HundredGigNicNearTwoToTheSixtyFour) {
  const auto report = CollectFrom(kFixtures + "/host");
  const v1::Link* nic = FindLink(report, "ens1f0");
  ASSERT_NE(nic, nullptr);
  EXPECT_EQ(nic->kind(), v1::LINK_KIND_ETHERNET);
  EXPECT_EQ(nic->receive_bytes_total(), 18446744073709551000ULL);
  EXPECT_EQ(nic->transmit_bytes_total(), 18446744073709550000ULL);
  EXPECT_EQ(nic->receive_packets_total(), 123456789012345ULL);
  EXPECT_EQ(nic->transmit_packets_total(), 98765432109876ULL);
  EXPECT_TRUE(nic->up());
  EXPECT_DOUBLE_EQ(nic->max_bandwidth_bytes_per_second(), 12.5e9) << "100000 Mb/s";
  EXPECT_EQ(nic->mtu_bytes(), 9000u);
  // Each column of the fixture line holds a distinct value, so a swapped column shows.
  const std::map<std::string, uint64_t> errors(nic->errors_total().begin(),
                                               nic->errors_total().end());
  EXPECT_EQ(errors, (std::map<std::string, uint64_t>{{"rx_errors", 11},
                                                     {"rx_dropped", 12},
                                                     {"rx_fifo", 13},
                                                     {"rx_frame", 14},
                                                     {"tx_errors", 21},
                                                     {"tx_dropped", 22},
                                                     {"tx_fifo", 23},
                                                     {"tx_collisions", 24},
                                                     {"tx_carrier", 25}}));
}

TEST(Netdev, DownInterfaceHasNoSpeed) {
  const auto report = CollectFrom(kFixtures + "/host");
  const v1::Link* down = FindLink(report, "ens1f1");
  ASSERT_NE(down, nullptr);
  EXPECT_TRUE(down->has_up());
  EXPECT_FALSE(down->up());
  EXPECT_FALSE(down->has_max_bandwidth_bytes_per_second()) << "speed -1 is unknown, not 0";
  EXPECT_EQ(down->receive_bytes_total(), 1048576u);
}

TEST(Netdev, IpoibInterfaceIsInfiniband) {
  const auto report = CollectFrom(kFixtures + "/host");
  const v1::Link* ib0 = FindLink(report, "ib0");
  ASSERT_NE(ib0, nullptr);
  EXPECT_EQ(ib0->kind(), v1::LINK_KIND_INFINIBAND);
  EXPECT_DOUBLE_EQ(ib0->max_bandwidth_bytes_per_second(), 25e9);
  EXPECT_EQ(ib0->mtu_bytes(), 4092u);
  EXPECT_EQ(ib0->transmit_bytes_total(), 876543210987u);
}

TEST(Netdev, OddAttributesAreAbsentOrUnspecified) {
  const auto report = CollectFrom(kFixtures + "/host-variants/netdev-quirks");
  ASSERT_EQ(report.host().links_size(), 2) << "the short line is skipped";
  const v1::Link& weird = report.host().links(0);
  EXPECT_EQ(weird.name(), "weird0");
  EXPECT_EQ(weird.kind(), v1::LINK_KIND_UNSPECIFIED) << "type 772 is loopback";
  EXPECT_FALSE(weird.up()) << "dormant is not up";
  EXPECT_FALSE(weird.has_max_bandwidth_bytes_per_second()) << "4294967295 is SPEED_UNKNOWN";
  EXPECT_FALSE(weird.has_mtu_bytes()) << "mtu 'abc' is malformed";
  EXPECT_EQ(weird.transmit_bytes_total(), 200u);

  const v1::Link& zero = report.host().links(1);
  EXPECT_EQ(zero.name(), "zero0");
  EXPECT_EQ(zero.kind(), v1::LINK_KIND_UNSPECIFIED);
  EXPECT_TRUE(zero.has_up());
  EXPECT_FALSE(zero.up()) << "operstate unknown";
  EXPECT_TRUE(zero.has_max_bandwidth_bytes_per_second()) << "speed 0 is a reported value";
  EXPECT_EQ(zero.max_bandwidth_bytes_per_second(), 0.0);
  EXPECT_EQ(zero.mtu_bytes(), 1280u);
}

TEST(Netdev, WithoutSysfsOnlyTheCountersArePresent) {
  NetdevCollector collector(PathResolver(kFixtures + "/host/proc", "/nonexistent/sys"));
  v1::NodeReport report;
  ASSERT_NO_THROW(collector.Collect(report));
  const v1::Link* nic = FindLink(report, "ens1f0");
  ASSERT_NE(nic, nullptr);
  EXPECT_EQ(nic->receive_bytes_total(), 18446744073709551000ULL);
  EXPECT_EQ(nic->kind(), v1::LINK_KIND_UNSPECIFIED);
  EXPECT_FALSE(nic->has_up());
  EXPECT_FALSE(nic->has_max_bandwidth_bytes_per_second());
  EXPECT_FALSE(nic->has_mtu_bytes());
}

TEST(Netdev, ParseSkipsMalformedLines) {
  google::protobuf::RepeatedPtrField<v1::Link> links;
  const std::string text =
      "Inter-|   Receive                                                |  Transmit\n"
      " face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs "
      "drop fifo colls carrier compressed\n"
      "    lo: 1 2 0 0 0 0 0 0 1 2 0 0 0 0 0 0\n"
      "  eth0: 10 20 1 2 3 4 0 5 30 40 6 7 8 9 10 0\n"
      "  eth1: 10 20 1 2 3 4 0 5 30 40 6 7 8 9 10\n"                  // 15 columns
      "  eth2: 10 20 1 2 3 4 0 5 30 40 6 7 8 9 10 0 11\n"             // 17 columns
      "  eth3: 10 -20 1 2 3 4 0 5 30 40 6 7 8 9 10 0\n"               // negative
      "  eth4: 18446744073709551616 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n"  // 2^64
      "  eth5: 10 20 1 2 3 4 0 5 30 40 6 7 8 9 10 x\n"                // junk
      "  ../x: 10 20 1 2 3 4 0 5 30 40 6 7 8 9 10 0\n"                // not a name
      "      : 10 20 1 2 3 4 0 5 30 40 6 7 8 9 10 0\n"                // no name
      "no colon here\n"
      "\n"
      "wlan0:18446744073709551615 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0";  // no final newline
  EXPECT_EQ(ParseNetDev(text, links), 8u);
  ASSERT_EQ(links.size(), 2);
  EXPECT_EQ(links[0].name(), "eth0");
  EXPECT_EQ(links[0].receive_bytes_total(), 10u);
  EXPECT_EQ(links[0].receive_packets_total(), 20u);
  EXPECT_EQ(links[0].transmit_bytes_total(), 30u);
  EXPECT_EQ(links[0].transmit_packets_total(), 40u);
  EXPECT_EQ(links[0].errors_total().at("tx_carrier"), 10u);
  EXPECT_FALSE(links[0].has_up()) << "the /proc part knows no link state";
  EXPECT_EQ(links[1].name(), "wlan0");
  EXPECT_EQ(links[1].receive_bytes_total(), 18446744073709551615ULL);
}

TEST(Netdev, AppendsAfterLinksOtherCollectorsAdded) {
  NetdevCollector collector(PathResolver(kFixtures + "/host/proc", kFixtures + "/host/sys"));
  v1::NodeReport report;
  report.mutable_host()->add_links()->set_name("mlx5_0/1");
  collector.Collect(report);
  ASSERT_EQ(report.host().links_size(), 7);
  EXPECT_EQ(report.host().links(0).name(), "mlx5_0/1");
  EXPECT_FALSE(report.host().links(0).has_mtu_bytes());
}

TEST(Netdev, MissingProcFileIsAnErrorNamingThePath) {
  NetdevCollector collector(PathResolver("/nonexistent/proc", kFixtures + "/host/sys"));
  v1::NodeReport report;
  try {
    collector.Collect(report);
    FAIL() << "expected CollectorError";
  } catch (const CollectorError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/proc/net/dev"), std::string::npos);
  }
  EXPECT_EQ(report.host().links_size(), 0);
}

}  // namespace
}  // namespace netdev_test
}  // namespace accelmon::collectors
