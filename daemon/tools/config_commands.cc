#include "daemon/tools/config_commands.h"

#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "daemon/common/config_file.h"
#include "daemon/common/config_path.h"
#include "daemon/common/exit_codes.h"
#include "daemon/exporter/web_config.h"
#include "diagnostics/config.h"

namespace accelmon {

namespace {

struct ConfigCommands {
  CLI::App* root = nullptr;
  CLI::App* check_config = nullptr;
  CLI::App* defaults = nullptr;
  std::vector<std::string> files;
};

// Every error of every file, the named diagnostics and web config files included.
int CheckConfig(const ConfigCommands& c) {
  int rc = kExitOk;
  for (const auto& file : c.files) {
    std::ifstream in(file);
    std::vector<std::string> errors;
    if (auto bad = CheckConfigFilePath("", file)) {
      errors.push_back(*bad);
    } else if (!in) {
      errors.push_back(file + ": cannot be read");
    } else {
      ConfigFileContents contents = ReadConfigFile(*c.root, file, in, "");
      errors = std::move(contents.errors);
      for (const auto& [key, path] : contents.referenced) {
        if (auto bad_path = CheckConfigFilePath("", path)) {
          errors.push_back(file + ": " + key + ": " + *bad_path);
          continue;
        }
        try {
          if (key == "exporter.diagnostics.config") {
            (void)diagnostics::LoadConfig(path);
          } else {
            (void)LoadWebConfig(path);
          }
        } catch (const std::exception& e) {
          errors.push_back(file + ": " + key + ": " + e.what());
        }
      }
    }
    if (errors.empty()) {
      std::printf("%s: SUCCESS\n", file.c_str());
      continue;
    }
    std::printf("%s: FAILED\n", file.c_str());
    for (const auto& e : errors) std::fprintf(stderr, "  %s\n", e.c_str());
    rc = kExitFailure;
  }
  return rc;
}

}  // namespace

SubcommandRunner RegisterConfigCommands(CLI::App& app) {
  auto c = std::make_shared<ConfigCommands>();
  c->root = &app;
  CLI::App* check = app.add_subcommand("check", "Check files without starting anything");
  check->require_subcommand(1);
  c->check_config = check->add_subcommand(
      "config",
      "Check configuration files (--config.file) and the diagnostics and web config files they "
      "name. Prints FILE: SUCCESS or FILE: FAILED and each error as FILE:LINE: what is wrong. "
      "Exit code 0: all good; 1: an error in a file (as promtool check config); 2: usage");
  c->check_config->add_option("FILE", c->files, "Configuration files")->required();
  CLI::App* config = app.add_subcommand("config", "The configuration file (--config.file)");
  config->require_subcommand(1);
  c->defaults = config->add_subcommand(
      "defaults",
      "Print a complete configuration file: every flag of agent and exporter with its help and "
      "default (deploy/config/accelmon.yaml is this output)");
  return [c]() -> std::optional<int> {
    if (c->check_config->parsed()) return CheckConfig(*c);
    if (c->defaults->parsed()) {
      std::fputs(DefaultConfigFile(*c->root).c_str(), stdout);
      return kExitOk;
    }
    return std::nullopt;
  };
}

}  // namespace accelmon
