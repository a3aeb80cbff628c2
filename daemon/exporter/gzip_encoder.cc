#include "daemon/exporter/gzip_encoder.h"

#include <stdexcept>

namespace accelmon {

GzipEncoder::GzipEncoder() {
  constexpr int kGzipWindowBits = 15 + 16;  // 32 KiB window, gzip header and trailer
  if (deflateInit2(&stream_, 1, Z_DEFLATED, kGzipWindowBits, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    throw std::runtime_error("zlib: deflateInit2 failed");
  }
}

GzipEncoder::~GzipEncoder() { deflateEnd(&stream_); }

void GzipEncoder::Encode(std::string_view in, std::string& out) {
  if (deflateReset(&stream_) != Z_OK) throw std::runtime_error("zlib: deflateReset failed");
  // deflateBound is enough for one deflate(Z_FINISH) call to finish.
  out.resize(deflateBound(&stream_, in.size()));
  // zlib's interface is not const-correct; it never writes through next_in.
  stream_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  stream_.avail_in = static_cast<uInt>(in.size());
  stream_.next_out = reinterpret_cast<Bytef*>(out.data());
  stream_.avail_out = static_cast<uInt>(out.size());
  if (deflate(&stream_, Z_FINISH) != Z_STREAM_END) {
    throw std::runtime_error("zlib: deflate did not finish");
  }
  out.resize(stream_.total_out);
}

}  // namespace accelmon
