// The status page's static files (daemon/exporter/status_page/), embedded in the binary at build
// time by status_page/embed.cmake: no CDN, nothing read from disk at run time.
#pragma once

#include <span>
#include <string_view>

namespace accelmon {

struct StaticAsset {
  std::string_view path;          // "/index.html", "/status.js"
  std::string_view content_type;  // "text/javascript; charset=utf-8"
  std::string_view body;
};

std::span<const StaticAsset> StatusPageAssets();

}  // namespace accelmon
