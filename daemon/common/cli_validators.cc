#include "daemon/common/cli_validators.h"

#include <filesystem>

#include "daemon/common/flags.h"

namespace accelmon::cli {

const CLI::Validator kDuration(
    [](std::string& value) -> std::string {
      const auto d = ParseDuration(value);
      if (!d) return "\"" + value + "\" is not a duration (examples: 500ms, 1s, 10m, 1h)";
      if (d->count() == 0) return "duration must be greater than 0";
      return {};
    },
    "DURATION");

const CLI::Validator kSpoolSize(
    [](std::string& value) -> std::string {
      const auto bytes = ParseByteSize(value);
      if (!bytes) return "\"" + value + "\" is not a size (examples: 64MiB, 1GiB, 1048576)";
      if (*bytes < (uint64_t{1} << 20)) return "\"" + value + "\": the spool needs at least 1MiB";
      return {};
    },
    "SIZE");

// gRPC takes an int; below a few KiB not even a small node's report fits.
const CLI::Validator kMessageSize(
    [](std::string& value) -> std::string {
      const auto bytes = ParseByteSize(value);
      if (!bytes) return "\"" + value + "\" is not a size (examples: 1MiB, 4MiB, 1048576)";
      if (*bytes < 4096 || *bytes > (uint64_t{1} << 30)) {
        return "\"" + value + "\": must be from 4KiB to 1GiB";
      }
      return {};
    },
    "SIZE");

const CLI::Validator kHostPort(
    [](std::string& value) -> std::string {
      std::string error;
      return ParseHostPort(value, &error) ? std::string() : error;
    },
    "HOST:PORT");

const CLI::Validator kConnectAddress(
    [](std::string& value) -> std::string {
      std::string error;
      auto hp = ParseHostPort(value, &error);
      if (!hp) return error;
      if (hp->host.empty()) return "\"" + value + "\": a host is needed to connect to";
      if (hp->port == 0) return "\"" + value + "\": port 0 cannot be connected to";
      return {};
    },
    "HOST:PORT");

const CLI::Validator kDirectory(
    [](std::string& value) -> std::string {
      std::error_code ec;
      if (!std::filesystem::is_directory(value, ec)) return "\"" + value + "\" is not a directory";
      return {};
    },
    "DIR");

const CLI::Validator kSizeOrZero(
    [](std::string& value) -> std::string {
      if (!ParseByteSize(value)) {
        return "\"" + value + "\" is not a size (examples: 0, 512MiB, 10GiB)";
      }
      return {};
    },
    "SIZE");

const CLI::Validator kDurationOrZero(
    [](std::string& value) -> std::string {
      if (value != "0" && !ParseDuration(value)) {
        return "\"" + value + "\" is not a duration (examples: 0, 100ms, 1s, 7d)";
      }
      return {};
    },
    "DURATION");

// A segment of a few blocks at least, so that rotation is not a write per batch.
const CLI::Validator kSegmentSize(
    [](std::string& value) -> std::string {
      const auto bytes = ParseByteSize(value);
      if (!bytes) return "\"" + value + "\" is not a size (examples: 64MiB, 1GiB)";
      if (*bytes < (uint64_t{64} << 10)) return "\"" + value + "\": must be at least 64KiB";
      return {};
    },
    "SIZE");

}  // namespace accelmon::cli
