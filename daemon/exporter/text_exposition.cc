#include "daemon/exporter/text_exposition.h"

#include <array>
#include <charconv>
#include <cmath>
#include <cstdint>

namespace accelmon {

void AppendSampleValue(std::string& out, double value) {
  if (std::isnan(value)) {
    out += "NaN";
    return;
  }
  if (std::isinf(value)) {
    out += value > 0 ? "+Inf" : "-Inf";
    return;
  }
  char buf[32];
  std::to_chars_result r;
  // Most values are counts and byte sizes: the integer path is faster than the double one, and
  // writes 1e12 as 1000000000000, as prometheus-cpp did, not as 1e+12.
  constexpr double kExactIntegers = 9007199254740992.0;  // 2^53
  if (std::fabs(value) < kExactIntegers && value == std::trunc(value)) {
    r = std::to_chars(buf, buf + sizeof buf, static_cast<int64_t>(value));
  } else {
    r = std::to_chars(buf, buf + sizeof buf, value);  // shortest round trip
  }
  out.append(buf, r.ptr);
}

namespace {

// Characters that need a backslash: in HELP text `\\` and newline, in label values `"` too.
constexpr std::array<uint8_t, 256> kEscapeTable = [] {
  std::array<uint8_t, 256> table{};
  table['\\'] = table['\n'] = 1 | 2;
  table['"'] = 2;
  return table;
}();

// Appends `text` with the characters of `mask` (1: HELP, 2: label value) escaped. Most label
// values need nothing: one table lookup per character, then a single append.
void AppendEscaped(std::string& out, std::string_view text, uint8_t mask) {
  size_t clean = 0;  // text[clean, i) needs no escaping
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if ((kEscapeTable[static_cast<unsigned char>(c)] & mask) == 0) continue;
    out.append(text.data() + clean, i - clean);
    out += '\\';
    out += c == '\n' ? 'n' : c;
    clean = i + 1;
  }
  out.append(text.data() + clean, text.size() - clean);
}

}  // namespace

void AppendLabelValue(std::string& out, std::string_view value) { AppendEscaped(out, value, 2); }

void AppendHelp(std::string& out, std::string_view help) { AppendEscaped(out, help, 1); }

void TextExpositionSink::Clear() {
  used_ = 0;
  samples_ = 0;
}

size_t TextExpositionSink::Family(std::string_view name, std::string_view help, MetricKind kind) {
  if (used_ == families_.size()) families_.emplace_back();
  FamilyText& f = families_[used_];
  f.name.assign(name);  // assign and clear keep the capacity of the previous scrape
  f.help.assign(help);
  f.kind = kind;
  f.lines.clear();
  return used_++;
}

void TextExpositionSink::Sample(size_t family, std::span<const Label> labels, double value) {
  ++samples_;
  FamilyText& f = families_[family];
  std::string& out = f.lines;
  out += f.name;
  if (!labels.empty()) {
    char separator = '{';
    for (const Label& l : labels) {
      out += separator;
      out += l.name;
      out += "=\"";
      AppendLabelValue(out, l.value);
      out += '"';
      separator = ',';
    }
    out += '}';
  }
  out += ' ';
  AppendSampleValue(out, value);
  out += '\n';
}

void TextExpositionSink::AppendTo(std::string& out) const {
  for (size_t i = 0; i < used_; ++i) {
    const FamilyText& f = families_[i];
    if (f.lines.empty()) continue;
    out += "# HELP ";
    out += f.name;
    out += ' ';
    AppendHelp(out, f.help);
    out += "\n# TYPE ";
    out += f.name;
    out += f.kind == MetricKind::kCounter ? " counter\n" : " gauge\n";
    out += f.lines;
  }
}

}  // namespace accelmon
