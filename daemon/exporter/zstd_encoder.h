// zstd for /metrics and the status page's JSON when the client asks for it (Accept-Encoding:
// zstd; curl --compressed does): level 1 streams over the pieces without copying them together,
// and at 100k series is both smaller and faster than gzip (bench/README.md, "/metrics render").
#pragma once

#include <memory>
#include <span>
#include <string_view>

struct ZSTD_CCtx_s;

namespace accelmon {

class ZstdEncoder {
 public:
  ZstdEncoder();
  ~ZstdEncoder();
  ZstdEncoder(const ZstdEncoder&) = delete;
  ZstdEncoder& operator=(const ZstdEncoder&) = delete;

  // `pieces`, one after the other, as one zstd frame (with its content size). Returns it in this
  // encoder's buffer, valid until the next Encode; the context and buffer are reused.
  std::string_view Encode(std::span<const std::string_view> pieces);

 private:
  ZSTD_CCtx_s* context_ = nullptr;
  std::unique_ptr<char[]> buffer_;
  size_t capacity_ = 0;
};

}  // namespace accelmon
