// Small, allocation-free helpers for the line- and field-oriented formats of procfs and sysfs.
// Every collector parses through these, so the fuzz targets exercise them all.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace accelmon::collectors {

// Strips spaces, tabs, CR and LF from both ends.
std::string_view Trim(std::string_view s);

// Splits on runs of spaces/tabs; no empty fields.
std::vector<std::string_view> SplitFields(std::string_view line);

// Calls fn(line) for every line of text (without the '\n'); the last line needs no '\n'.
template <typename Fn>
void ForEachLine(std::string_view text, Fn&& fn) {
  while (!text.empty()) {
    const size_t eol = text.find('\n');
    fn(text.substr(0, eol));
    if (eol == std::string_view::npos) break;
    text.remove_prefix(eol + 1);
  }
}

// Whether `s` is non-empty and only the digits 0-9 (a pid, an index in a file name).
bool AllDigits(std::string_view s);

// ASCII case-insensitive equality (uuids, PCI addresses).
bool EqualsIgnoreCase(std::string_view a, std::string_view b);

// Whether two PCI addresses "DDDD:BB:DD.F" name the same function, whatever the case and the
// domain's width: NVML writes "00000000:C1:00.0", sysfs "0000:c1:00.0", device plugins and DRA
// drivers whichever their library gives them. False when either is not a PCI address.
bool SamePciAddress(std::string_view a, std::string_view b);

// The whole of `text` (after Trim) as a number, or nullopt: no sign for unsigned, no junk.
std::optional<uint64_t> ParseUint64(std::string_view text);
std::optional<int64_t> ParseInt64(std::string_view text);
std::optional<double> ParseDouble(std::string_view text);

// A one-value attribute's text without surrounding whitespace; nullopt when nothing is left.
std::optional<std::string> TrimmedAttribute(std::string_view text);

// Reads a one-value sysfs attribute ("1000\n"). nullopt when the file is missing, unreadable
// (EINVAL is what many drivers answer for "not supported"), empty, or not a number.
std::optional<std::string> ReadAttribute(const std::filesystem::path& path);
std::optional<uint64_t> ReadUint64Attribute(const std::filesystem::path& path);
std::optional<int64_t> ReadInt64Attribute(const std::filesystem::path& path);

}  // namespace accelmon::collectors
