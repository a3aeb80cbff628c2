// CLI11 validators shared by every subcommand: each says what is wrong in one line, so a bad
// flag is one clear usage error (exit 2).
#pragma once

#include <CLI/CLI.hpp>

namespace accelmon::cli {

extern const CLI::Validator kDuration;        // > 0, e.g. 500ms, 1s, 10m
extern const CLI::Validator kSpoolSize;       // >= 1MiB
extern const CLI::Validator kMessageSize;     // 4KiB .. 1GiB
extern const CLI::Validator kHostPort;        // [host]:port to listen on
extern const CLI::Validator kConnectAddress;  // host:port to connect to
extern const CLI::Validator kDirectory;       // an existing directory
extern const CLI::Validator kSizeOrZero;      // a size, 0 meaning no limit
extern const CLI::Validator kDurationOrZero;  // a duration, 0 meaning no limit
extern const CLI::Validator kSegmentSize;     // a recording segment, >= 64KiB

}  // namespace accelmon::cli
