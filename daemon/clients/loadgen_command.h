// `accelmon loadgen` on the command line: main() adds the subcommand and runs it when parsed.
// Exit codes: 0 every report sent was acknowledged; 1 some were not (the server unreachable, a
// stream ended early); 2 usage errors.
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>

#include "daemon/clients/loadgen.h"
#include "daemon/common/subcommand.h"

namespace accelmon {

// Adds it to `app` (main.cc's table of subcommands).
SubcommandRunner RegisterLoadgenCommand(CLI::App& app);

// What the command line said; filled in by CLI11 while parsing.
struct LoadgenCommand {
  CLI::App* app = nullptr;
  LoadgenOptions options;
  std::string interval = "1s";
  std::string duration = "30s";
};

// Adds `loadgen` to `app`. `command` must outlive parsing and the run.
void AddLoadgenCommand(CLI::App& app, LoadgenCommand& command);

// Runs the load and prints its result when `loadgen` was parsed; nothing otherwise.
std::optional<int> RunLoadgenCommand(LoadgenCommand& command);

}  // namespace accelmon
