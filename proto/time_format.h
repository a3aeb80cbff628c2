// The one set of time helpers: google.protobuf.Timestamp/Duration to and from the int64
// nanoseconds (or milliseconds) since the Unix epoch that the code computes in, RFC 3339 times,
// and durations for people and for flags.
//
// Why in accelmon_proto: it is the lowest library that every user already links (collectors,
// recording, diagnostics and every daemon room), and the Timestamp helpers need protobuf anyway.
// daemon/common would do for the daemon only; diagnostics/ and recording/ cannot link it.
#pragma once

#include <google/protobuf/duration.pb.h>
#include <google/protobuf/timestamp.pb.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace accelmon {

// Timestamp -> time since the epoch. A valid Timestamp's nanos is in [0, 1e9), so these floor.
// The wall clock now, in nanoseconds since the epoch.
int64_t WallClockNowNanos();

int64_t ToNanos(const google::protobuf::Timestamp& t);
int64_t ToMillis(const google::protobuf::Timestamp& t);
double ToSeconds(const google::protobuf::Timestamp& t);
// Time since the epoch -> Timestamp, flooring so that nanos stays in [0, 1e9) before 1970.
google::protobuf::Timestamp TimestampFromNanos(int64_t ns);
google::protobuf::Timestamp TimestampFromMillis(int64_t ms);
google::protobuf::Timestamp TimestampFromTimePoint(std::chrono::system_clock::time_point t);

// Duration <-> nanoseconds; seconds and nanos share the sign, as protobuf requires.
int64_t ToNanos(const google::protobuf::Duration& d);
google::protobuf::Duration DurationFromNanos(int64_t ns);

// "2026-12-02T03:40:00.123Z": UTC with milliseconds (floored), as findings, `record inspect`
// and the recording show times.
std::string FormatRfc3339(int64_t ns);
// An RFC 3339 time ("2026-12-02T03:40:00Z", "2026-12-02T04:40:00.250+01:00"; 't' or ' ' for
// 'T' and 'z' for 'Z' too) as milliseconds since the epoch; digits past milliseconds are
// dropped. Nothing for anything else, a time without a zone included.
std::optional<int64_t> ParseRfc3339Millis(const std::string& text);

// A duration for people: "0.3s" under 10 s with a fraction, else whole seconds: "7s", "45s",
// "6m04s", "1h02m03s" (hours do not roll over into days). Negative is "0s".
std::string FormatDuration(std::chrono::duration<double> d);
// A duration as flags take it (ParseDuration, Prometheus' syntax): the largest unit that divides
// it exactly, "7d", "2h", "90s", "250ms", so that a flag's value is echoed as it was given.
std::string FormatPrometheusDuration(std::chrono::milliseconds d);

// A flag's duration, Prometheus' syntax: "1s", "250ms", "10m", "1h30m", "2d", "1w". No
// fractions, no sign; nothing for anything else (or for more than int64 milliseconds).
std::optional<std::chrono::milliseconds> ParseDuration(std::string_view text);

// A config or scenario file's duration in seconds: a decimal number and one unit, "500ms",
// "30s", "1.5m", "2h", "1d", or a bare "0". No sign, no exponent; nothing for anything else.
std::optional<double> ParseSecondsDuration(std::string_view text);

}  // namespace accelmon
