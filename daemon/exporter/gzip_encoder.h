// gzip for /metrics and the status page's JSON when the client sends Accept-Encoding: gzip (as
// Prometheus does by default), with libdeflate: about twice zlib's speed at its level 1 on our
// text, and smaller (bench/README.md, "/metrics render").
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>

struct libdeflate_compressor;

namespace accelmon {

class GzipEncoder {
 public:
  GzipEncoder();
  ~GzipEncoder();
  GzipEncoder(const GzipEncoder&) = delete;
  GzipEncoder& operator=(const GzipEncoder&) = delete;

  // `pieces`, one after the other, as one gzip member. libdeflate compresses one buffer at a
  // time, so several pieces are first copied together (a few percent of the compression's
  // time). A member per piece would avoid the copy, but a client that reads only the first
  // member of a stream would then see a truncated body. Returns the gzip'd body in this
  // encoder's buffer, valid until the next Encode; the compressor and the buffers are reused
  // from call to call (and never zero-filled: at 100k series that would cost a tenth of the
  // compression).
  std::string_view Encode(std::span<const std::string_view> pieces);
  std::string_view Encode(std::string_view in) { return Encode({&in, 1}); }

 private:
  libdeflate_compressor* compressor_ = nullptr;
  std::string gathered_;
  std::unique_ptr<char[]> buffer_;
  size_t capacity_ = 0;
};

}  // namespace accelmon
