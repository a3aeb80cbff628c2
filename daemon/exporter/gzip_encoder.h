// gzip for /metrics when the scraper sends Accept-Encoding: gzip. Level 1: a scrape body is
// highly repetitive text, so the fastest level already shrinks it about tenfold, and the CPU a
// scrape costs matters more than the last few percent of bytes.
#pragma once

#include <zlib.h>

#include <string>
#include <string_view>

namespace accelmon {

class GzipEncoder {
 public:
  GzipEncoder();
  ~GzipEncoder();
  GzipEncoder(const GzipEncoder&) = delete;
  GzipEncoder& operator=(const GzipEncoder&) = delete;

  // Replaces `out` with `in` as one gzip member. The deflate state (about 256 KiB) and `out`'s
  // capacity are reused from call to call. Throws std::runtime_error if zlib fails.
  void Encode(std::string_view in, std::string& out);

 private:
  z_stream stream_{};
};

}  // namespace accelmon
