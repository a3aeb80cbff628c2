// Reports input a collector skipped as malformed: once at warn level, then at debug, so a kernel
// or driver format change is seen in the log without flooding it on every tick.
#pragma once

#include <spdlog/spdlog.h>

#include <cstddef>
#include <filesystem>
#include <string_view>

namespace accelmon::collectors {

class MalformedInputLog {
 public:
  explicit MalformedInputLog(std::string_view collector) : collector_(collector) {}

  // Logs "<collector>: skipped <count> <what> <where>" when count > 0.
  void Skipped(size_t count, std::string_view what, const std::filesystem::path& where) {
    if (count == 0) return;
    spdlog::log(warned_ ? spdlog::level::debug : spdlog::level::warn, "{}: skipped {} {} {}",
                collector_, count, what, where.string());
    warned_ = true;
  }

 private:
  std::string_view collector_;  // a string literal: the collector's name
  bool warned_ = false;
};

}  // namespace accelmon::collectors
