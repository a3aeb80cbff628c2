// How a subcommand joins the binary: main.cc holds one table of registrars, and each
// subcommand's own file adds its CLI11 subcommand(s) and flags and says how to run them.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <optional>

namespace accelmon {

// Runs the subcommand when the command line chose it and returns the exit code
// (common/exit_codes.h); nothing when another subcommand was chosen. It owns the flag values
// CLI11 wrote while parsing.
using SubcommandRunner = std::function<std::optional<int>()>;

// Adds a subcommand (or a group of them) to `app`.
using SubcommandRegistrar = SubcommandRunner (*)(CLI::App& app);

}  // namespace accelmon
