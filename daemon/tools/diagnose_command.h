// `accelmon diagnose`: runs the diagnostics rules offline over a recording (directory or .seg) or
// JSON Lines, or over several exporters' recordings read as one, and prints what they find as a
// timeline, JSON or one HTML page with plots. The rules and thresholds are the exporter's
// (diagnostics/), so a recording diagnosed offline finds what the exporter found live.
//
// Exit codes: 0 it ran (findings or not); 1 the input had damage (the findings over everything
// else are still printed, stderr says what was lost); 2 usage errors, a bad --config, an input
// that is not a recording.
//
// HTML reads the input twice (the second time for the plots around each finding), so it needs a
// file: with "-" (standard input) it is refused.
//
// --score EXPECTATIONS (a scenario file with `expect:`, diagnostics/score.h) prints, instead of
// the findings, how they compare with the expected ones: per rule found, missed, false findings
// and onset error (text, or JSON with --format json). Exit code 0 whatever the score; 2 for a
// bad expectations file.
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>
#include <vector>

#include "daemon/common/subcommand.h"

namespace accelmon {

// Adds it to `app` (main.cc's table of subcommands).
SubcommandRunner RegisterDiagnoseCommand(CLI::App& app);

struct DiagnoseOptions {
  // Recording directories, .seg, JSON Lines files or "-"; several are read as one (one per
  // exporter of a fleet), merged by report time, each report once.
  std::vector<std::string> inputs{};
  std::string config{};              // diagnostics config YAML; empty: the built-in defaults
  std::string format = "text";       // text, json, html
  std::string output = "-";          // "-": standard output
  std::vector<std::string> rules{};  // only these rule ids; empty: every enabled rule
  std::string job{};                 // only this job's findings (its timeline across nodes)
  std::string score{};  // expectations file: print the score against it instead of the findings
};

// What the command line said; filled in by CLI11 while parsing.
struct DiagnoseCommand {
  CLI::App* app = nullptr;
  DiagnoseOptions options;
};

// Adds `diagnose` to `app`. `command` must outlive parsing and the run.
void AddDiagnoseCommand(CLI::App& app, DiagnoseCommand& command);

// Runs the diagnosis when `diagnose` was parsed; nothing otherwise.
std::optional<int> RunDiagnoseCommand(DiagnoseCommand& command);

// The command itself, for tests and benchmarks.
int Diagnose(const DiagnoseOptions& options);

}  // namespace accelmon
