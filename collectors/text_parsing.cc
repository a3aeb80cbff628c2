#include "collectors/text_parsing.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <system_error>
#include <utility>

#include "collectors/file_reader.h"

namespace accelmon::collectors {

bool AllDigits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}
bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](char x, char y) {
    return std::tolower(static_cast<unsigned char>(x)) ==
           std::tolower(static_cast<unsigned char>(y));
  });
}

namespace {

// "DDDD:BB:DD.F" as (domain, "bb:dd.f"), or nullopt.
std::optional<std::pair<uint32_t, std::string>> PciKey(std::string_view id) {
  const size_t first = id.find(':');
  if (first == std::string_view::npos || id.find(':', first + 1) == std::string_view::npos) {
    return std::nullopt;
  }
  uint32_t domain = 0;
  const std::string_view d = id.substr(0, first);
  const auto [end, ec] = std::from_chars(d.data(), d.data() + d.size(), domain, 16);
  if (d.empty() || ec != std::errc() || end != d.data() + d.size()) return std::nullopt;
  std::string rest(id.substr(first + 1));
  for (char& c : rest) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return std::pair{domain, rest};
}

}  // namespace

bool SamePciAddress(std::string_view a, std::string_view b) {
  const auto ka = PciKey(a);
  return ka && ka == PciKey(b);
}

namespace {

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

template <typename T>
std::optional<T> ParseInteger(std::string_view text) {
  text = Trim(text);
  if (text.empty()) return std::nullopt;
  if (text.front() == '+') text.remove_prefix(1);
  T value{};
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

}  // namespace

std::string_view Trim(std::string_view s) {
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> SplitFields(std::string_view line) {
  std::vector<std::string_view> fields;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && IsSpace(line[i])) ++i;
    const size_t start = i;
    while (i < line.size() && !IsSpace(line[i])) ++i;
    if (i > start) fields.push_back(line.substr(start, i - start));
  }
  return fields;
}

std::optional<uint64_t> ParseUint64(std::string_view text) {
  if (!Trim(text).empty() && Trim(text).front() == '-') return std::nullopt;
  return ParseInteger<uint64_t>(text);
}

std::optional<int64_t> ParseInt64(std::string_view text) { return ParseInteger<int64_t>(text); }

std::optional<double> ParseDouble(std::string_view text) {
  text = Trim(text);
  if (text.empty()) return std::nullopt;
  // from_chars for double is missing in GCC 12's libstdc++ for some targets; strtod needs a
  // terminated string.
  const std::string copy(text);
  char* end = nullptr;
  const double value = std::strtod(copy.c_str(), &end);
  if (end != copy.c_str() + copy.size()) return std::nullopt;
  return value;
}

std::optional<std::string> TrimmedAttribute(std::string_view text) {
  const std::string_view trimmed = Trim(text);
  if (trimmed.empty()) return std::nullopt;
  return std::string(trimmed);
}

std::optional<std::string> ReadAttribute(const std::filesystem::path& path) {
  std::string text;
  if (TryReadAttributeFile(path, text) != 0) return std::nullopt;
  return TrimmedAttribute(text);
}

std::optional<uint64_t> ReadUint64Attribute(const std::filesystem::path& path) {
  const auto text = ReadAttribute(path);
  return text ? ParseUint64(*text) : std::nullopt;
}

std::optional<int64_t> ReadInt64Attribute(const std::filesystem::path& path) {
  const auto text = ReadAttribute(path);
  return text ? ParseInt64(*text) : std::nullopt;
}

}  // namespace accelmon::collectors
