// `accelmon simulate`: a simulated fleet's reports (the sim collector, optionally with a fault
// scenario), generated as fast as the CPU allows with simulated timestamps, into JSON Lines or a
// recording directory, for diagnose, replay and tests. Exit codes: 0 written; 1 a write failed;
// 2 usage errors (a bad scenario file among them).
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>

#include "daemon/common/subcommand.h"

namespace accelmon {

// Adds it to `app` (main.cc's table of subcommands).
SubcommandRunner RegisterSimulateCommand(CLI::App& app);

// What the command line said; filled in by CLI11 while parsing.
struct SimulateCommand {
  CLI::App* app = nullptr;
  int nodes = 1;
  int devices = 8;
  std::string scenario;
  std::string duration = "1h";
  std::string interval = "1s";
  std::string start;  // RFC 3339; empty: now minus the duration
  std::string output;
  std::string record_dir;
};

// Adds `simulate` to `app`. `command` must outlive parsing and the run.
void AddSimulateCommand(CLI::App& app, SimulateCommand& command);

// Runs it when `simulate` was parsed; nothing otherwise.
std::optional<int> RunSimulateCommand(SimulateCommand& command);

}  // namespace accelmon
