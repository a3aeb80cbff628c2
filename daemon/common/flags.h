// Parsing and validating command-line values: durations and listen/connect addresses.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "proto/time_format.h"

namespace accelmon {

// ParseDuration, the flags' duration syntax, is in proto/time_format.h with its inverse.

// Parses a byte size: "1048576", "512KiB", "256MiB", "1GiB" (powers of 1024; B, KiB, MiB, GiB,
// TiB). No fractions, no sign.
std::optional<uint64_t> ParseByteSize(std::string_view text);
// Its inverse, as the flags are written: "64MiB", "10GiB", "1000B".
std::string FormatByteSize(uint64_t bytes);

// A "host:port" value. An empty host means every interface (":9477").
struct HostPort {
  std::string host;  // without brackets for IPv6 literals
  uint16_t port = 0;
  bool ipv6 = false;  // written in brackets, "[::1]:9477"

  // "host:port" with brackets restored for IPv6; empty host becomes `any_host`.
  std::string ToString(std::string_view any_host = "0.0.0.0") const;
};

// Parses "host:port", ":port", "[v6]:port". Returns the reason in `error` when malformed.
std::optional<HostPort> ParseHostPort(std::string_view text, std::string* error);

}  // namespace accelmon
