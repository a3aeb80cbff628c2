// What the offline tools (record, replay, diagnose) share about the recordings they are given.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "recording/merged_reader.h"

namespace accelmon {

// Opens `inputs` (recording directories, segments or JSON Lines; several are read as one,
// merged by report time), or prints why not to stderr and returns null (the caller exits 2).
std::unique_ptr<recording::MergedReader> OpenRecordingInput(const std::vector<std::string>& inputs,
                                                            recording::ReaderOptions options = {});

// The inputs as a command line names them: "a", or "a b c".
std::string JoinInputs(const std::vector<std::string>& inputs);

// As `record verify` lists damage: "FILE offset N: B bytes lost: why", or "FILE:LINE: why".
std::string DescribeDamage(const recording::DamageReport& d);

}  // namespace accelmon
