// The gzip of /metrics and the status page: one gzip member whatever the number of pieces, which
// zlib (what curl and most clients use) reads back whole, with buffers reused between answers.
#include "daemon/exporter/gzip_encoder.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/http_get.h"

namespace accelmon {
namespace gzip_encoder_test {
namespace {

using testing::Gunzip;

// Text that looks like an exposition: repetitive, with numbers that change.
std::string Family(const std::string& name, int series) {
  std::string text = "# HELP " + name + " A family.\n# TYPE " + name + " gauge\n";
  for (int i = 0; i < series; ++i) {
    text += name + "{node=\"node-" + std::to_string(i % 97) + "\",device=\"" +
            std::to_string(i % 8) + "\"} " + std::to_string(i * 7919 % 100003) + "\n";
  }
  return text;
}

TEST(GzipEncoder, ManyPiecesAreOneMemberThatInflatesToTheirConcatenation) {
  const std::vector<std::string> families = {Family("a", 10), Family("b", 20000), Family("c", 3),
                                             Family("d", 5000)};
  const std::vector<std::string_view> pieces(families.begin(), families.end());
  std::string whole;
  for (const auto& f : families) whole += f;

  GzipEncoder encoder;
  const std::string gzipped(encoder.Encode(pieces));
  ASSERT_GE(gzipped.size(), 18u);
  EXPECT_EQ(static_cast<unsigned char>(gzipped[0]), 0x1f);  // the gzip magic
  EXPECT_EQ(static_cast<unsigned char>(gzipped[1]), 0x8b);
  // Gunzip reads one member with zlib: all of the text must be in it.
  EXPECT_EQ(Gunzip(gzipped), whole);
  EXPECT_LT(gzipped.size() * 3, whole.size()) << "an exposition shrinks several times";
}

TEST(GzipEncoder, ReusedForSmallerAndEmptyBodies) {
  GzipEncoder encoder;
  const std::string big = Family("big", 50000);
  EXPECT_EQ(Gunzip(std::string(encoder.Encode(big))), big);
  const std::string small = Family("small", 2);
  EXPECT_EQ(Gunzip(std::string(encoder.Encode(small))), small);
  EXPECT_EQ(Gunzip(std::string(encoder.Encode(std::vector<std::string_view>{}))), "");
  EXPECT_EQ(Gunzip(std::string(encoder.Encode(big))), big);
}

}  // namespace
}  // namespace gzip_encoder_test
}  // namespace accelmon
