#include "daemon/common/flags.h"

#include <gtest/gtest.h>

namespace accelmon {
namespace flags_test {
namespace {

using std::chrono::milliseconds;

TEST(ParseDuration, PrometheusStyleUnits) {
  EXPECT_EQ(ParseDuration("1s"), milliseconds(1000));
  EXPECT_EQ(ParseDuration("250ms"), milliseconds(250));
  EXPECT_EQ(ParseDuration("10m"), milliseconds(600'000));
  EXPECT_EQ(ParseDuration("1h30m"), milliseconds(5'400'000));
  EXPECT_EQ(ParseDuration("2d"), milliseconds(172'800'000));
  EXPECT_EQ(ParseDuration("0s"), milliseconds(0));
}

TEST(ParseDuration, RejectsWhatPrometheusRejects) {
  for (const char* bad : {"", "1", "s", "1.5s", "-1s", "1x", "1s ", " 1s", "99999999999999999d"}) {
    EXPECT_FALSE(ParseDuration(bad)) << bad;
  }
}

TEST(ParseHostPort, AcceptsTheUsualForms) {
  auto any = ParseHostPort(":9477", nullptr);
  ASSERT_TRUE(any);
  EXPECT_EQ(any->host, "");
  EXPECT_EQ(any->port, 9477);
  EXPECT_EQ(any->ToString(), "0.0.0.0:9477");

  auto v4 = ParseHostPort("127.0.0.1:0", nullptr);
  ASSERT_TRUE(v4);
  EXPECT_EQ(v4->ToString(), "127.0.0.1:0");

  auto name = ParseHostPort("exporter-1.example.org:9478", nullptr);
  ASSERT_TRUE(name);
  EXPECT_EQ(name->host, "exporter-1.example.org");

  auto v6 = ParseHostPort("[::1]:9478", nullptr);
  ASSERT_TRUE(v6);
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->ToString(), "[::1]:9478");
}

TEST(ParseHostPort, ExplainsWhatIsWrong) {
  struct Case {
    const char* input;
    const char* reason;
  };
  for (const Case& c :
       {Case{"foo", "expected host:port"}, Case{":99999", "port must be"},
        Case{"host:", "port must be"}, Case{"::1:80", "brackets"}, Case{"[::1:80", "missing ']'"},
        Case{"h st:80", "invalid character"}, Case{"host:80x", "port must be"}}) {
    std::string error;
    EXPECT_FALSE(ParseHostPort(c.input, &error)) << c.input;
    EXPECT_NE(error.find(c.reason), std::string::npos) << c.input << " -> " << error;
    EXPECT_NE(error.find(c.input), std::string::npos) << "the error quotes the input";
  }
}

TEST(ParseByteSize, PlainAndBinaryUnits) {
  EXPECT_EQ(ParseByteSize("1048576"), 1048576u);
  EXPECT_EQ(ParseByteSize("512B"), 512u);
  EXPECT_EQ(ParseByteSize("64KiB"), 65536u);
  EXPECT_EQ(ParseByteSize("256MiB"), uint64_t{256} << 20);
  EXPECT_EQ(ParseByteSize("2GiB"), uint64_t{2} << 30);
  EXPECT_EQ(ParseByteSize("1TiB"), uint64_t{1} << 40);
  for (const char* bad : {"", "MiB", "1.5GiB", "-1", "10MB", "10 MiB", "99999999999TiB"}) {
    EXPECT_FALSE(ParseByteSize(bad)) << bad;
  }
}

TEST(FormatByteSize, WritesTheLargestExactUnitAndParsesBack) {
  EXPECT_EQ(FormatByteSize(uint64_t{64} << 20), "64MiB");
  EXPECT_EQ(FormatByteSize(uint64_t{10} << 30), "10GiB");
  EXPECT_EQ(FormatByteSize(uint64_t{3} << 40), "3TiB");
  EXPECT_EQ(FormatByteSize(1536 * 1024), "1536KiB");
  EXPECT_EQ(FormatByteSize(1000), "1000B");
  EXPECT_EQ(FormatByteSize(0), "0B");
  for (uint64_t bytes : {uint64_t{0}, uint64_t{1}, uint64_t{4096}, uint64_t{5} << 30}) {
    EXPECT_EQ(ParseByteSize(FormatByteSize(bytes)), bytes) << bytes;
  }
}

}  // namespace
}  // namespace flags_test
}  // namespace accelmon
