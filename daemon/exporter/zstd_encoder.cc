#include "daemon/exporter/zstd_encoder.h"

#include <zstd.h>

#include <stdexcept>
#include <string>

namespace accelmon {
namespace {

constexpr int kZstdLevel = 1;

void Check(size_t result, const char* what) {
  if (ZSTD_isError(result)) {
    throw std::runtime_error(std::string("zstd: ") + what + ": " + ZSTD_getErrorName(result));
  }
}

}  // namespace

ZstdEncoder::ZstdEncoder() : context_(ZSTD_createCCtx()) {
  if (context_ == nullptr) throw std::runtime_error("zstd: cannot allocate a context");
  Check(ZSTD_CCtx_setParameter(context_, ZSTD_c_compressionLevel, kZstdLevel), "level");
}

ZstdEncoder::~ZstdEncoder() { ZSTD_freeCCtx(context_); }

std::string_view ZstdEncoder::Encode(std::span<const std::string_view> pieces) {
  size_t total = 0;
  for (const std::string_view piece : pieces) total += piece.size();
  const size_t bound = ZSTD_compressBound(total);
  if (bound > capacity_) {
    buffer_.reset(new char[bound]);
    capacity_ = bound;
  }
  Check(ZSTD_CCtx_reset(context_, ZSTD_reset_session_only), "reset");
  Check(ZSTD_CCtx_setPledgedSrcSize(context_, total), "content size");
  ZSTD_outBuffer out{buffer_.get(), capacity_, 0};
  for (const std::string_view piece : pieces) {
    ZSTD_inBuffer in{piece.data(), piece.size(), 0};
    while (in.pos < in.size)
      Check(ZSTD_compressStream2(context_, &out, &in, ZSTD_e_continue), "compress");
  }
  ZSTD_inBuffer none{nullptr, 0, 0};
  size_t left = 0;
  do {
    left = ZSTD_compressStream2(context_, &out, &none, ZSTD_e_end);
    Check(left, "end");
  } while (left != 0);
  return {buffer_.get(), out.pos};
}

}  // namespace accelmon
