#include "collectors/infiniband.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace accelmon::collectors {
namespace infiniband_test {
namespace {

const std::string kFixtures = ACCELMON_FIXTURES_DIR;

v1::NodeReport CollectFrom(const std::string& root) {
  InfinibandCollector collector(PathResolver(root + "/proc", root + "/sys"));
  v1::NodeReport report;
  collector.Collect(report);
  return report;
}

// A port's attributes from memory, as the fuzzer supplies them.
PortAttributeReader FromMap(std::map<std::string, std::string> attributes) {
  return [attributes = std::move(attributes)](std::string_view name) -> std::optional<std::string> {
    const auto it = attributes.find(std::string(name));
    if (it == attributes.end()) return std::nullopt;
    return it->second;
  };
}

TEST(Infiniband, OneLinkPerPortSortedByDeviceAndPort) {
  const auto report = CollectFrom(kFixtures + "/host");
  ASSERT_EQ(report.host().links_size(), 3);
  EXPECT_EQ(report.host().links(0).name(), "mlx5_0/1");
  EXPECT_EQ(report.host().links(0).index(), 1u);
  EXPECT_EQ(report.host().links(1).name(), "mlx5_0/2");
  EXPECT_EQ(report.host().links(1).index(), 2u);
  EXPECT_EQ(report.host().links(2).name(), "mlx5_1/1");
  EXPECT_EQ(report.host().links(2).index(), 1u);
}

TEST(Infiniband, ActiveHdrPortFromFixture) {
  const auto report = CollectFrom(kFixtures + "/host");
  const v1::Link& port = report.host().links(0);
  EXPECT_EQ(port.kind(), v1::LINK_KIND_INFINIBAND);
  EXPECT_TRUE(port.up());
  EXPECT_DOUBLE_EQ(port.max_bandwidth_bytes_per_second(), 200e9 / 8);
  // port_*_data count 4-byte words.
  EXPECT_EQ(port.transmit_bytes_total(), 1234567890123ULL * 4);
  EXPECT_EQ(port.receive_bytes_total(), 4611686018427387000ULL * 4);
  EXPECT_EQ(port.receive_packets_total(), 18446744073709551000ULL);
  EXPECT_EQ(port.transmit_packets_total(), 18446744073709550000ULL);
  const std::map<std::string, uint64_t> errors(port.errors_total().begin(),
                                               port.errors_total().end());
  EXPECT_EQ(errors, (std::map<std::string, uint64_t>{
                        {"symbol_error", 5},
                        {"port_rcv_errors", 3},
                        {"link_downed", 1},
                        {"link_error_recovery", 2},
                        {"port_xmit_discards", 7},
                        {"local_link_integrity_errors", 0},
                        {"excessive_buffer_overrun_errors", 0},
                        {"port_rcv_remote_physical_errors", 0},
                        {"port_rcv_switch_relay_errors", 0},
                        {"port_xmit_constraint_errors", 8},
                        {"port_rcv_constraint_errors", 6},
                        {"VL15_dropped", 0},
                        {"port_xmit_wait", 4294967295},  // 32-bit, saturated: passed on as is
                    }));
}

TEST(Infiniband, DownPortAndRocePortFromFixture) {
  const auto report = CollectFrom(kFixtures + "/host");
  const v1::Link& down = report.host().links(1);
  EXPECT_TRUE(down.has_up());
  EXPECT_FALSE(down.up());
  EXPECT_EQ(down.kind(), v1::LINK_KIND_INFINIBAND);
  EXPECT_DOUBLE_EQ(down.max_bandwidth_bytes_per_second(), 10e9 / 8) << "as the kernel reports";
  EXPECT_TRUE(down.has_transmit_bytes_total()) << "a reported 0 is present";
  EXPECT_EQ(down.transmit_bytes_total(), 0u);

  const v1::Link& roce = report.host().links(2);
  EXPECT_EQ(roce.kind(), v1::LINK_KIND_ROCE);
  EXPECT_TRUE(roce.up());
  EXPECT_DOUBLE_EQ(roce.max_bandwidth_bytes_per_second(), 100e9 / 8);
  EXPECT_EQ(roce.receive_bytes_total(), 98765432100ULL * 4);
  EXPECT_EQ(roce.transmit_bytes_total(), 87654321000ULL * 4);
  EXPECT_EQ(roce.errors_total().at("port_xmit_wait"), 123456u);
}

TEST(Infiniband, StateIsTheNumberBeforeTheColonAndNothingElseParses) {
  EXPECT_EQ(ParseInfinibandState("4: ACTIVE"), 4u);
  EXPECT_EQ(ParseInfinibandState("1: DOWN\n"), 1u);
  EXPECT_EQ(ParseInfinibandState("5: ACTIVE_DEFER"), 5u);
  EXPECT_EQ(ParseInfinibandState("ACTIVE"), std::nullopt);
  EXPECT_EQ(ParseInfinibandState("x: ACTIVE"), std::nullopt);
  EXPECT_EQ(ParseInfinibandState("-4: ACTIVE"), std::nullopt);
  EXPECT_EQ(ParseInfinibandState(""), std::nullopt);
}

TEST(Infiniband, ConvertsRatesToBytesPerSecond) {
  EXPECT_EQ(ParseInfinibandRate("100 Gb/sec (4X EDR)"), 12.5e9);
  EXPECT_EQ(ParseInfinibandRate("200 Gb/sec (4X HDR)\n"), 25e9);
  EXPECT_EQ(ParseInfinibandRate("2.5 Gb/sec (1X SDR)"), 312.5e6);
  EXPECT_EQ(ParseInfinibandRate("400 Gb/sec"), 50e9);
  EXPECT_EQ(ParseInfinibandRate("100 Mb/sec (4X EDR)"), std::nullopt);
  EXPECT_EQ(ParseInfinibandRate("-100 Gb/sec (4X EDR)"), std::nullopt);
  EXPECT_EQ(ParseInfinibandRate("nan Gb/sec"), std::nullopt);
  EXPECT_EQ(ParseInfinibandRate("inf Gb/sec"), std::nullopt);
  EXPECT_EQ(ParseInfinibandRate("fast"), std::nullopt);
  EXPECT_EQ(ParseInfinibandRate(""), std::nullopt);
}

TEST(Infiniband, PortWithoutAttributesHasOnlyAbsentValues) {
  v1::Link link;
  EXPECT_EQ(ParseInfinibandPort(FromMap({}), link), 0u);
  EXPECT_FALSE(link.has_up());
  EXPECT_FALSE(link.has_max_bandwidth_bytes_per_second());
  EXPECT_FALSE(link.has_transmit_bytes_total());
  EXPECT_FALSE(link.has_receive_packets_total());
  EXPECT_TRUE(link.errors_total().empty());
  EXPECT_EQ(link.kind(), v1::LINK_KIND_UNSPECIFIED);
}

TEST(Infiniband, MalformedAttributesAreSkippedAndCounted) {
  v1::Link link;
  const size_t malformed = ParseInfinibandPort(FromMap({
                                                   {"state", "ACTIVE"},
                                                   {"rate", "very fast"},
                                                   {"link_layer", "Unknown"},
                                                   {"counters/port_rcv_data", "12abc"},
                                                   {"counters/port_xmit_data", "N/A (no PMA)"},
                                                   {"counters/symbol_error", "-1"},
                                                   {"counters/link_downed", "3"},
                                               }),
                                               link);
  EXPECT_EQ(malformed, 4u) << "state, rate, port_rcv_data, symbol_error; N/A is not malformed";
  EXPECT_FALSE(link.has_up());
  EXPECT_FALSE(link.has_max_bandwidth_bytes_per_second());
  EXPECT_FALSE(link.has_receive_bytes_total());
  EXPECT_FALSE(link.has_transmit_bytes_total());
  EXPECT_EQ(link.kind(), v1::LINK_KIND_UNSPECIFIED);
  EXPECT_EQ(link.errors_total().size(), 1u);
  EXPECT_EQ(link.errors_total().at("link_downed"), 3u);
}

TEST(Infiniband, DataWordsBeyondSixtyFourBitBytesWrap) {
  v1::Link link;
  // 2^62 + 1 words is 2^64 + 4 bytes: wraps to 4, like a counter reset.
  ParseInfinibandPort(FromMap({{"counters/port_xmit_data", "4611686018427387905"},
                               {"counters/port_rcv_data", "18446744073709551615"}}),
                      link);
  EXPECT_EQ(link.transmit_bytes_total(), 4u);
  EXPECT_EQ(link.receive_bytes_total(), 18446744073709551612ULL);
}

TEST(Infiniband, OddDirectoriesAreSkipped) {
  const auto report = CollectFrom(kFixtures + "/host-variants/infiniband-quirks");
  // qib0 has no ports/, mlx4_0/ports/notaport is not a port number.
  ASSERT_EQ(report.host().links_size(), 2);
  const v1::Link& first = report.host().links(0);
  EXPECT_EQ(first.name(), "mlx4_0/1");
  EXPECT_TRUE(first.up());
  EXPECT_FALSE(first.has_max_bandwidth_bytes_per_second()) << "rate 'fast'";
  EXPECT_EQ(first.kind(), v1::LINK_KIND_UNSPECIFIED) << "link_layer Unknown";
  EXPECT_FALSE(first.has_transmit_bytes_total()) << "N/A (no PMA)";
  EXPECT_EQ(first.receive_bytes_total(), 4294967295ULL * 4) << "saturated 32-bit legacy counter";
  EXPECT_EQ(first.errors_total().at("symbol_error"), 65535u);
  EXPECT_EQ(first.errors_total().count("port_rcv_errors"), 0u) << "'-3' is malformed";

  const v1::Link& second = report.host().links(1);
  EXPECT_EQ(second.name(), "mlx4_0/2");
  EXPECT_FALSE(second.up()) << "2: INIT";
  EXPECT_FALSE(second.has_receive_bytes_total());
}

TEST(Infiniband, NoInfinibandClassIsAnErrorNamingThePath) {
  InfinibandCollector collector(PathResolver("/nonexistent/proc", "/nonexistent/sys"));
  v1::NodeReport report;
  try {
    collector.Collect(report);
    FAIL() << "expected CollectorError";
  } catch (const CollectorError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/sys/class/infiniband"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("No such file"), std::string::npos);
  }
  EXPECT_EQ(report.host().links_size(), 0);
}

}  // namespace
}  // namespace infiniband_test
}  // namespace accelmon::collectors
