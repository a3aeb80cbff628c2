#include "collectors/pressure.h"

#include <spdlog/spdlog.h>

#include <optional>
#include <string>

#include "collectors/file_reader.h"
#include "collectors/text_parsing.h"

namespace accelmon::collectors {

size_t ParsePressure(std::string_view text, v1::HostPressure& pressure) {
  size_t malformed = 0;
  ForEachLine(text, [&](std::string_view line) {
    if (Trim(line).empty()) return;
    const auto fields = SplitFields(line);
    std::optional<uint64_t> total;
    for (size_t i = 1; i < fields.size(); ++i) {
      if (fields[i].starts_with("total=")) total = ParseUint64(fields[i].substr(6));
    }
    if (!total || (fields[0] != "some" && fields[0] != "full")) {
      ++malformed;
      return;
    }
    if (fields[0] == "some") {
      pressure.set_some_total_us(*total);
    } else {
      pressure.set_full_total_us(*total);
    }
  });
  return malformed;
}

void PressureCollector::Collect(v1::NodeReport& report) {
  const OpenFileCache::SweepAtExit sweep(files_);
  const auto path = paths_.Proc("pressure/memory");
  std::string text;
  if (const int err = files_.ReadText(path, text); err != 0) {
    ThrowSourceError(path.string(), std::error_code(err, std::generic_category()));
  }
  const size_t malformed = ParsePressure(text, *report.mutable_host()->mutable_memory_pressure());
  malformed_log_.Skipped(malformed, "malformed line(s) in", path);
}

}  // namespace accelmon::collectors
