#include "recording/jsonl.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/type_resolver.h>
#include <google/protobuf/util/type_resolver_util.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace accelmon::recording {
namespace {

namespace pb = google::protobuf;

// The JSON mapping works on a report's binary encoding through a TypeResolver (this is what
// MessageToJsonString does inside). Going through it ourselves lets us serialise
// deterministically (sorted map keys) and reuse the buffers. The resolver is thread-safe.
pb::util::TypeResolver& Resolver() {
  static pb::util::TypeResolver* const resolver = pb::util::NewTypeResolverForDescriptorPool(
      "type.googleapis.com", pb::DescriptorPool::generated_pool());
  return *resolver;
}

const std::string& ReportTypeUrl() {
  static const std::string url = "type.googleapis.com/" + v1::NodeReport::descriptor()->full_name();
  return url;
}

// Parser messages may span lines; an error must stay on one.
std::string OneLine(std::string_view text) {
  std::string out(text);
  std::replace(out.begin(), out.end(), '\n', ' ');
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

bool IsBlank(std::string_view line) {
  return line.find_first_not_of(" \t\r") == std::string_view::npos;
}

bool ParseInto(std::string_view line, v1::NodeReport* report, std::string* wire, std::string* error,
               const JsonlReaderOptions& options) {
  wire->clear();
  pb::util::JsonParseOptions parse_options;
  parse_options.ignore_unknown_fields = options.ignore_unknown_fields;
  const auto status = pb::util::JsonToBinaryString(
      &Resolver(), ReportTypeUrl(), pb::StringPiece(line.data(), line.size()), wire, parse_options);
  if (!status.ok()) {
    *error = "not a NodeReport in JSON: " + OneLine(std::string(status.message()));
    return false;
  }
  if (!report->ParseFromString(*wire)) {
    // The JSON was well-formed but its content is not (e.g. a string that is not UTF-8).
    *error = "not a valid NodeReport";
    return false;
  }
  return true;
}

}  // namespace

void JsonlWriter::Append(const v1::NodeReport& report, std::string* out) {
  wire_.clear();
  {
    pb::io::StringOutputStream stream(&wire_);
    pb::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    report.SerializeToCodedStream(&coded);
  }
  pb::io::ArrayInputStream input(wire_.data(), static_cast<int>(wire_.size()));
  // Appends to `out`: no copy of the line.
  pb::io::StringOutputStream output(out);
  // The defaults are what the format wants: compact, lowerCamelCase, enums by name, and no
  // always_print_primitive_fields, so only fields the report holds are printed.
  const pb::util::JsonPrintOptions print_options;
  const auto status =
      pb::util::BinaryToJsonStream(&Resolver(), ReportTypeUrl(), &input, &output, print_options);
  if (!status.ok()) {
    // Only possible for a report we could not have built: a bug, not bad input.
    throw std::logic_error("cannot print NodeReport as JSON: " + std::string(status.message()));
  }
  out->push_back('\n');
}

std::string JsonlWriter::ToLine(const v1::NodeReport& report) {
  std::string line;
  Append(report, &line);
  line.pop_back();
  return line;
}

bool ParseJsonLine(std::string_view line, v1::NodeReport* report, std::string* error,
                   const JsonlReaderOptions& options) {
  std::string wire;
  return ParseInto(line, report, &wire, error, options);
}

JsonlReader::JsonlReader(std::istream& in, std::string name, JsonlReaderOptions options)
    : in_(in), name_(std::move(name)), options_(options) {}

JsonlReader::JsonlReader(const std::string& path, JsonlReaderOptions options)
    : file_(path, std::ios::binary), in_(file_), name_(path), options_(options) {
  if (!file_.is_open()) {
    throw std::runtime_error("cannot open " + path + ": " + std::strerror(errno));
  }
}

JsonlReader::Result JsonlReader::Next(v1::NodeReport* report) {
  for (;;) {
    line_offset_ = next_offset_;
    if (!std::getline(in_, line_)) {
      line_.clear();
      return Result::kEnd;
    }
    ++line_number_;
    // The last line may lack its '\n'.
    next_offset_ += line_.size() + (in_.eof() ? 0 : 1);
    if (!line_.empty() && line_.back() == '\r') line_.pop_back();
    // Editors on some systems begin a UTF-8 file with a byte order mark; JSON must not.
    if (line_number_ == 1 && line_.starts_with("\xEF\xBB\xBF")) line_.erase(0, 3);
    if (IsBlank(line_)) continue;

    if (ParseInto(line_, report, &wire_, &reason_, options_)) {
      ++reports_;
      return Result::kReport;
    }
    ++bad_lines_;
    error_ = name_ + ":" + std::to_string(line_number_) + ": " + reason_;
    return Result::kBadLine;
  }
}

}  // namespace accelmon::recording
