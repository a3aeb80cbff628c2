// One libFuzzer binary (accelmon_fuzz) holds every fuzz target, so the sanitizer build compiles
// and links one executable instead of one per parser; ACCELMON_FUZZ_TARGET=<name> in the
// environment picks the target a run fuzzes (tests/fuzz/run.sh). Each target's file defines it:
//   ACCELMON_FUZZ_TARGET(meminfo) { ...data, size...; return 0; }
#pragma once

#include <cstddef>
#include <cstdint>

namespace accelmon::fuzz {

using Target = int (*)(const uint8_t* data, size_t size);
// Registers `target` under `name` (at static initialisation); returns true.
bool Register(const char* name, Target target);

}  // namespace accelmon::fuzz

#define ACCELMON_FUZZ_TARGET(name)                                   \
  static int FuzzTarget_##name(const uint8_t* data, size_t size);    \
  [[maybe_unused]] static const bool fuzz_target_registered_##name = \
      ::accelmon::fuzz::Register(#name, FuzzTarget_##name);          \
  static int FuzzTarget_##name(const uint8_t* data, size_t size)
