#include "daemon/common/flags.h"

#include <charconv>
#include <iterator>
#include <limits>
#include <utility>

namespace accelmon {
namespace {

// The flags' size units, largest last.
constexpr std::pair<std::string_view, int> kByteUnits[] = {{"", 0},     {"B", 0},    {"KiB", 10},
                                                           {"MiB", 20}, {"GiB", 30}, {"TiB", 40}};

}  // namespace

std::optional<uint64_t> ParseByteSize(std::string_view text) {
  uint64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end == text.data()) return std::nullopt;
  const std::string_view suffix(end, static_cast<size_t>(text.data() + text.size() - end));
  for (const auto& [name, shift] : kByteUnits) {
    if (suffix != name) continue;
    if (value > (std::numeric_limits<uint64_t>::max() >> shift)) return std::nullopt;
    return value << shift;
  }
  return std::nullopt;
}

std::string FormatByteSize(uint64_t bytes) {
  // The largest unit that divides the size exactly.
  for (auto it = std::rbegin(kByteUnits); it != std::rend(kByteUnits); ++it) {
    const auto& [name, shift] = *it;
    if (shift == 0) break;
    if (bytes != 0 && bytes % (uint64_t{1} << shift) == 0) {
      return std::to_string(bytes >> shift) + std::string(name);
    }
  }
  return std::to_string(bytes) + "B";
}

std::string HostPort::ToString(std::string_view any_host) const {
  std::string h = host.empty() ? std::string(any_host) : host;
  if (ipv6) h = "[" + h + "]";
  return h + ":" + std::to_string(port);
}

std::optional<HostPort> ParseHostPort(std::string_view text, std::string* error) {
  auto fail = [&](std::string reason) -> std::optional<HostPort> {
    if (error) *error = "\"" + std::string(text) + "\": " + std::move(reason);
    return std::nullopt;
  };
  HostPort out;
  std::string_view port_text;
  if (text.starts_with("[")) {
    const size_t close = text.find(']');
    if (close == std::string_view::npos) return fail("missing ']' after IPv6 address");
    out.host = std::string(text.substr(1, close - 1));
    out.ipv6 = true;
    if (text.substr(close + 1).substr(0, 1) != ":") return fail("expected ':port' after ']'");
    port_text = text.substr(close + 2);
  } else {
    const size_t colon = text.rfind(':');
    if (colon == std::string_view::npos) return fail("expected host:port or :port");
    out.host = std::string(text.substr(0, colon));
    if (out.host.find(':') != std::string::npos) {
      return fail("IPv6 addresses must be written in brackets, e.g. [::1]:9477");
    }
    port_text = text.substr(colon + 1);
  }
  for (const char c : out.host) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '-' || c == '_' || (out.ipv6 && c == ':');
    if (!ok) return fail("invalid character in host");
  }
  unsigned port = 0;
  const auto [end, ec] =
      std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (port_text.empty() || ec != std::errc() || end != port_text.data() + port_text.size() ||
      port > 65535) {
    return fail("port must be a number from 0 to 65535");
  }
  out.port = static_cast<uint16_t>(port);
  return out;
}

}  // namespace accelmon
