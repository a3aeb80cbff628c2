// The process exit codes of every subcommand, as the Prometheus tools have them
// (docs/development.md "Errors").
#pragma once

namespace accelmon {

inline constexpr int kExitOk = 0;
// Something could not be read, written, bound or delivered; everything else was, and stderr or
// the log says what.
inline constexpr int kExitFailure = 1;
// A bad flag or config file, or an input that is not what the command takes: nothing was done.
inline constexpr int kExitUsage = 2;

}  // namespace accelmon
