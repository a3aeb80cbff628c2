#include "proto/time_format.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <iterator>
#include <limits>
#include <utility>

namespace accelmon {
namespace {

constexpr int64_t kNanosPerSecond = 1'000'000'000;

// Floor division and its non-negative remainder.
std::pair<int64_t, int64_t> FloorDivMod(int64_t value, int64_t divisor) {
  int64_t quotient = value / divisor;
  int64_t remainder = value % divisor;
  if (remainder < 0) {
    --quotient;
    remainder += divisor;
  }
  return {quotient, remainder};
}

}  // namespace

int64_t WallClockNowNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

int64_t ToNanos(const google::protobuf::Timestamp& t) {
  return t.seconds() * kNanosPerSecond + t.nanos();
}

int64_t ToMillis(const google::protobuf::Timestamp& t) {
  return t.seconds() * 1000 + t.nanos() / 1'000'000;
}

double ToSeconds(const google::protobuf::Timestamp& t) {
  return static_cast<double>(t.seconds()) + static_cast<double>(t.nanos()) / 1e9;
}

google::protobuf::Timestamp TimestampFromNanos(int64_t ns) {
  const auto [seconds, nanos] = FloorDivMod(ns, kNanosPerSecond);
  google::protobuf::Timestamp t;
  t.set_seconds(seconds);
  t.set_nanos(static_cast<int32_t>(nanos));
  return t;
}

google::protobuf::Timestamp TimestampFromMillis(int64_t ms) {
  const auto [seconds, millis] = FloorDivMod(ms, 1000);
  google::protobuf::Timestamp t;
  t.set_seconds(seconds);
  t.set_nanos(static_cast<int32_t>(millis * 1'000'000));
  return t;
}

google::protobuf::Timestamp TimestampFromTimePoint(std::chrono::system_clock::time_point t) {
  return TimestampFromNanos(
      std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count());
}

int64_t ToNanos(const google::protobuf::Duration& d) {
  return d.seconds() * kNanosPerSecond + d.nanos();
}

google::protobuf::Duration DurationFromNanos(int64_t ns) {
  google::protobuf::Duration d;
  d.set_seconds(ns / kNanosPerSecond);
  d.set_nanos(static_cast<int32_t>(ns % kNanosPerSecond));
  return d;
}

std::string FormatRfc3339(int64_t ns) {
  const auto [seconds, nanos] = FloorDivMod(ns, kNanosPerSecond);
  const auto t = static_cast<std::time_t>(seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[96];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<int>(nanos / 1'000'000));
  return buf;
}

std::optional<int64_t> ParseRfc3339Millis(const std::string& text) {
  std::tm tm{};
  int consumed = 0;
  if (std::sscanf(text.c_str(), "%4d-%2d-%2d%*1[Tt ]%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon,
                  &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &consumed) != 6) {
    return std::nullopt;
  }
  if (tm.tm_mon < 1 || tm.tm_mon > 12 || tm.tm_mday < 1 || tm.tm_mday > 31 || tm.tm_hour > 23 ||
      tm.tm_min > 59 || tm.tm_sec > 60) {
    return std::nullopt;
  }
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  size_t i = static_cast<size_t>(consumed);
  int64_t millis = 0;
  if (i < text.size() && text[i] == '.') {
    ++i;
    int digits = 0;
    for (; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); ++i, ++digits) {
      if (digits < 3) millis = millis * 10 + (text[i] - '0');
    }
    if (digits == 0) return std::nullopt;
    for (; digits < 3; ++digits) millis *= 10;
  }
  int64_t offset_s = 0;
  if (i < text.size() && (text[i] == 'Z' || text[i] == 'z')) {
    ++i;
  } else if (i < text.size() && (text[i] == '+' || text[i] == '-')) {
    int hours = 0, minutes = 0, n = 0;
    if (std::sscanf(text.c_str() + i + 1, "%2d:%2d%n", &hours, &minutes, &n) != 2 || n != 5) {
      return std::nullopt;
    }
    offset_s = (hours * 3600 + minutes * 60) * (text[i] == '+' ? 1 : -1);
    i += 1 + static_cast<size_t>(n);
  } else {
    return std::nullopt;  // RFC 3339 needs a zone
  }
  if (i != text.size()) return std::nullopt;
  return (static_cast<int64_t>(timegm(&tm)) - offset_s) * 1000 + millis;
}

std::string FormatDuration(std::chrono::duration<double> d) {
  const double s = std::max(0.0, d.count());
  char buf[96];
  if (s < 10 && std::fmod(s, 1.0) != 0) {
    std::snprintf(buf, sizeof buf, "%.1fs", s);
    return buf;
  }
  const auto total = static_cast<long long>(std::llround(s));
  const long long h = total / 3600;
  const long long m = total / 60 % 60;
  const long long sec = total % 60;
  if (h > 0) {
    std::snprintf(buf, sizeof buf, "%lldh%02lldm%02llds", h, m, sec);
  } else if (m > 0) {
    std::snprintf(buf, sizeof buf, "%lldm%02llds", m, sec);
  } else {
    std::snprintf(buf, sizeof buf, "%llds", sec);
  }
  return buf;
}

std::string FormatPrometheusDuration(std::chrono::milliseconds d) {
  constexpr std::pair<const char*, int64_t> kUnits[] = {
      {"d", 86'400'000}, {"h", 3'600'000}, {"m", 60'000}, {"s", 1000}};
  for (const auto& [name, ms] : kUnits) {
    if (d.count() != 0 && d.count() % ms == 0) {
      return std::to_string(d.count() / ms) + name;
    }
  }
  return std::to_string(d.count()) + "ms";
}

std::optional<std::chrono::milliseconds> ParseDuration(std::string_view text) {
  if (text.empty()) return std::nullopt;
  struct Unit {
    std::string_view suffix;
    int64_t ms;
  };
  // Longest suffixes first so "ms" is not read as "m" followed by junk.
  constexpr Unit kUnits[] = {{"ms", 1},        {"s", 1000},       {"m", 60'000},
                             {"h", 3'600'000}, {"d", 86'400'000}, {"w", 604'800'000}};
  int64_t total = 0;
  while (!text.empty()) {
    int64_t value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || end == text.data() || value < 0) return std::nullopt;
    text.remove_prefix(static_cast<size_t>(end - text.data()));
    const Unit* unit = nullptr;
    for (const Unit& u : kUnits) {
      if (text.starts_with(u.suffix)) {
        unit = &u;
        break;
      }
    }
    if (unit == nullptr) return std::nullopt;
    text.remove_prefix(unit->suffix.size());
    if (value > (std::numeric_limits<int64_t>::max() - total) / unit->ms) return std::nullopt;
    total += value * unit->ms;
  }
  return std::chrono::milliseconds(total);
}

std::optional<double> ParseSecondsDuration(std::string_view text) {
  if (text == "0") return 0.0;
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) {
    ++i;
  }
  if (i == 0 || i == text.size()) return std::nullopt;
  constexpr std::pair<std::string_view, double> kUnits[] = {
      {"ms", 0.001}, {"s", 1}, {"m", 60}, {"h", 3600}, {"d", 86400}};
  const std::string_view suffix = text.substr(i);
  const auto unit = std::find_if(std::begin(kUnits), std::end(kUnits),
                                 [&](const auto& u) { return u.first == suffix; });
  if (unit == std::end(kUnits)) return std::nullopt;
  const std::string_view number = text.substr(0, i);
  if (std::count(number.begin(), number.end(), '.') > 1 || number.front() == '.' ||
      number.back() == '.') {
    return std::nullopt;
  }
  double value = 0;
  const auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), value);
  if (ec != std::errc() || end != number.data() + number.size()) return std::nullopt;
  return value * unit->second;
}

}  // namespace accelmon
