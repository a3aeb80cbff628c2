// What the offline tools (record, diagnose) share about the recording they are given.
#pragma once

#include <memory>
#include <string>

#include "recording/recording_reader.h"

namespace accelmon {

// Opens `input` (a recording directory, a segment or JSON Lines), or prints why not to stderr
// and returns null (the caller exits 2).
std::unique_ptr<recording::RecordingReader> OpenRecordingInput(
    const std::string& input, recording::ReaderOptions options = {});

// As `record verify` lists damage: "FILE offset N: B bytes lost: why", or "FILE:LINE: why".
std::string DescribeDamage(const recording::DamageReport& d);

}  // namespace accelmon
