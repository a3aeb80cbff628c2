// The configuration file (--config.file, YAML): one file that can set every flag of `agent`,
// `exporter` and `standalone` (docs/deployment.md "Configuration file and reload").
//
// Layout: top-level sections named after the subcommands (`agent:`, `exporter:`), whose keys are
// the flag names without "--", dots kept as written ("web.listen-address: ':9477'"; nesting on
// the dots is not accepted); the global flags (`log.level`) at the top level. `standalone` reads
// both sections, each key it has a flag for. Flags on the command line win over the file.
// Every key and value is checked before anything starts: an unknown key, a wrong type, a value
// a flag's check refuses, bad YAML, each is "FILE:LINE: what is wrong".
#pragma once

#include <CLI/CLI.hpp>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace accelmon {

// The sections of the file and the subcommands they configure.
inline constexpr const char* kConfigSections[] = {"agent", "exporter"};

// What reading a file found.
struct ConfigFileContents {
  std::vector<std::string> errors;     // "FILE:LINE: what is wrong", in file order
  std::vector<CLI::ConfigItem> items;  // what to apply to the target subcommand
  // The files it names that are read at start-up, "KEY=PATH" ("exporter.diagnostics.config").
  std::vector<std::pair<std::string, std::string>> referenced;
};

// Checks `in` (named `file` in errors) against the flags of `root`'s subcommands. `target` is
// the subcommand the items are for ("agent", "exporter", "standalone"; "" for none: only check).
ConfigFileContents ReadConfigFile(CLI::App& root, const std::string& file, std::istream& in,
                                  const std::string& target);

// Adds --config.file to `root` (a global flag: CLI11 reads config files at the top level) and
// the YAML reader behind it. Parsing then throws CLI::ConfigError with every error of the file.
void AddConfigFileFlag(CLI::App& root);

// After CLI11 refused to read the --config.file given to `root` (CLI::FileError): what is wrong
// with it (config_path.h), or nullopt when nothing is.
std::optional<std::string> WhyConfigFileUnreadable(CLI::App& root);

// The complete commented file: every flag of the sections with its help and default.
std::string DefaultConfigFile(CLI::App& root);

}  // namespace accelmon
