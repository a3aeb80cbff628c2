// `accelmon check config FILE` and `accelmon config defaults`: the configuration file
// (common/config_file.h) checked without starting anything, and the complete commented file.
// Exit codes of `check config`: 0 the file is good; 1 it was read and something in it (or in a
// file it names) is wrong, as promtool's `check config` has it; 2 usage errors (no FILE).
#pragma once

#include <CLI/CLI.hpp>

#include "daemon/common/subcommand.h"

namespace accelmon {

// Adds `check config` and `config defaults` to `app` (main.cc's table of subcommands).
SubcommandRunner RegisterConfigCommands(CLI::App& app);

}  // namespace accelmon
