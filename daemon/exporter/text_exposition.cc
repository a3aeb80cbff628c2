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
  cache_.size = 0;  // each exposition starts afresh
}

size_t TextExpositionSink::Family(std::string_view name, std::string_view help, MetricKind kind) {
  if (used_ == families_.size()) families_.emplace_back();
  FamilyText& f = families_[used_];
  f.name.assign(name);  // assign and clear keep the capacity of the previous scrape
  // The HELP and TYPE lines go first into the family's own text, so that a family with samples
  // is one contiguous piece (Pieces): /metrics writes and compresses the pieces as they are.
  std::string& text = f.text;
  text.clear();
  text += "# HELP ";
  text += name;
  text += ' ';
  AppendHelp(text, help);
  text += "\n# TYPE ";
  text += name;
  text += kind == MetricKind::kCounter ? " counter\n" : " gauge\n";
  f.header_size = text.size();
  return used_++;
}

void TextExpositionSink::Sample(size_t family, std::span<const Label> labels, double value) {
  ++samples_;
  FamilyText& f = families_[family];
  std::string& out = f.text;
  out += f.name;
  if (!labels.empty()) {
    out += LabelText(labels);
    out += '}';
  }
  out += ' ';
  AppendSampleValue(out, value);
  out += '\n';
}

// The renderer walks a device's series one family after the other, each with the same leading
// labels (node, device, uuid, vendor, model): the labels that equal the previous sample's keep
// their rendered text, and only the ones after the first difference are escaped again. Labels
// are compared by content, never by address (a label's text may live in a reused buffer).
std::string_view TextExpositionSink::LabelText(std::span<const Label> labels) {
  LabelCache& c = cache_;
  size_t same = 0;
  while (same < labels.size() && same < c.size && labels[same].name == c.names[same] &&
         labels[same].value == c.values[same]) {
    ++same;
  }
  c.text.resize(same == 0 ? 0 : c.ends[same - 1]);
  for (size_t i = same; i < labels.size(); ++i) {
    if (i == c.names.size()) {
      c.names.emplace_back();
      c.values.emplace_back();
      c.ends.emplace_back();
    }
    c.names[i].assign(labels[i].name);  // assign keeps the capacity: no allocation once warm
    c.values[i].assign(labels[i].value);
    c.text += i == 0 ? '{' : ',';
    c.text += labels[i].name;
    c.text += "=\"";
    AppendLabelValue(c.text, labels[i].value);
    c.text += '"';
    c.ends[i] = c.text.size();
  }
  c.size = labels.size();
  return c.text;
}

void TextExpositionSink::Pieces(std::vector<std::string_view>& pieces) const {
  pieces.clear();
  for (size_t i = 0; i < used_; ++i) {
    const FamilyText& f = families_[i];
    if (f.text.size() > f.header_size) pieces.emplace_back(f.text);
  }
}

void TextExpositionSink::AppendTo(std::string& out) const {
  for (size_t i = 0; i < used_; ++i) {
    const FamilyText& f = families_[i];
    if (f.text.size() > f.header_size) out += f.text;
  }
}

}  // namespace accelmon
