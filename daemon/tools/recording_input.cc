#include "daemon/tools/recording_input.h"

#include <cstdio>

namespace accelmon {

std::unique_ptr<recording::MergedReader> OpenRecordingInput(const std::vector<std::string>& inputs,
                                                            recording::ReaderOptions options) {
  try {
    return std::make_unique<recording::MergedReader>(inputs, options);
  } catch (const recording::RecordingError& e) {
    std::fprintf(stderr, "accelmon: %s\n", e.what());
    return nullptr;
  }
}

std::string JoinInputs(const std::vector<std::string>& inputs) {
  std::string joined;
  for (const std::string& input : inputs) joined += (joined.empty() ? "" : " ") + input;
  return joined;
}

std::string DescribeDamage(const recording::DamageReport& d) {
  if (d.line > 0) return d.file + ":" + std::to_string(d.line) + ": " + d.reason;
  return d.file + " offset " + std::to_string(d.offset) + ": " + std::to_string(d.bytes) +
         " bytes lost: " + d.reason;
}

}  // namespace accelmon
