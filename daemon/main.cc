// accelmon: one binary, subcommands for each role (as Thanos and promtool do). Each subcommand
// registers itself from its own file; this is the table of them.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "daemon/agent/agent_command.h"
#include "daemon/clients/loadgen_command.h"
#include "daemon/clients/top_command.h"
#include "daemon/common/config_file.h"
#include "daemon/common/empty_values.h"
#include "daemon/common/exit_codes.h"
#include "daemon/common/reload.h"
#include "daemon/common/subcommand.h"
#include "daemon/common/version.h"
#include "daemon/exporter/exporter_command.h"
#include "daemon/standalone/standalone_command.h"
#include "daemon/tools/config_commands.h"
#include "daemon/tools/diagnose_command.h"
#include "daemon/tools/record_commands.h"
#include "daemon/tools/simulate_command.h"

namespace {

constexpr const char* kDefaultLogLevel = "info";

constexpr accelmon::SubcommandRegistrar kSubcommands[] = {
    accelmon::RegisterAgentCommand,       // collect on a node, stream to an exporter
    accelmon::RegisterExporterCommand,    // receive streams, serve /metrics, diagnose, record
    accelmon::RegisterStandaloneCommand,  // both in one process
    accelmon::RegisterRecordingCommands,  // record inspect|verify|export|import, replay
    accelmon::RegisterLoadgenCommand,     // simulated agents against an exporter
    accelmon::RegisterDiagnoseCommand,    // the diagnostics rules over a recording
    accelmon::RegisterSimulateCommand,    // a simulated fleet's reports, faster than real time
    accelmon::RegisterConfigCommands,     // check config FILE, config defaults
    accelmon::RegisterTopCommand,         // the fleet live in a terminal (Query API or --local)
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "accelmon: monitoring and diagnostics for GPU and NPU training clusters.\n"
      "Agents collect device and host telemetry on every node and stream it to an exporter,\n"
      "which serves Prometheus /metrics. `standalone` runs both in one process."};
  app.set_version_flag("--version", std::string("accelmon ") + accelmon::kVersion + " (revision " +
                                        accelmon::kRevision + ")");
  app.require_subcommand(1);
  app.fallthrough();  // global flags (--log.level) also after the subcommand
  app.failure_message([](const CLI::App*, const CLI::Error& e) {
    // A bad config file: its errors are "FILE:LINE: what is wrong", one a line.
    if (dynamic_cast<const CLI::ConfigError*>(&e) != nullptr) {
      return std::string(e.what()) + "\n";
    }
    return std::string("accelmon: ") + e.what() + " (see --help)\n";
  });

  std::string log_level = kDefaultLogLevel;
  app.add_option("--log.level", log_level, "Log level")
      ->check(CLI::IsMember({"debug", "info", "warn", "error"}))
      ->capture_default_str();

  accelmon::AddConfigFileFlag(app);

  std::vector<accelmon::SubcommandRunner> runners;
  for (const auto registrar : kSubcommands) runners.push_back(registrar(app));

  // `--name=` as an explicit empty value (empty_values.h); CLI11 parses them in reverse.
  std::string error;
  const auto args = accelmon::ExplicitEmptyValues(app, argc, argv, &error);
  if (!args) {
    std::fprintf(stderr, "accelmon: %s (see --help)\n", error.c_str());
    return accelmon::kExitUsage;
  }
  const std::vector<std::string> reversed(args->rbegin(), args->rend());
  if (argc > 0) app.name(argv[0]);
  try {
    app.parse(std::vector<std::string>(reversed));
  } catch (const CLI::FileError& e) {
    // CLI11 reads --config.file itself and says only "not readable (missing?)": say why.
    const std::optional<std::string> why = accelmon::WhyConfigFileUnreadable(app);
    std::fprintf(stderr, "accelmon: %s\n", why ? why->c_str() : e.what());
    return accelmon::kExitUsage;
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? accelmon::kExitOk : accelmon::kExitUsage;
  }

  // For reloads (SIGHUP, POST /-/reload): the same arguments, parsed again by the same CLI.
  accelmon::SetCommandLine(accelmon::CommandLine{.app = &app,
                                                 .parse_again =
                                                     [&app, &log_level, reversed] {
                                                       const std::string before = log_level;
                                                       log_level = kDefaultLogLevel;
                                                       try {
                                                         app.parse(
                                                             std::vector<std::string>(reversed));
                                                       } catch (...) {
                                                         log_level = before;
                                                         throw;
                                                       }
                                                     },
                                                 .log_level = &log_level});

  auto logger = spdlog::stderr_color_mt("accelmon");
  spdlog::set_default_logger(logger);
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e%z %^%-5l%$ %v");
  spdlog::set_level(spdlog::level::from_str(log_level));

  for (const auto& run : runners) {
    if (auto rc = run()) return *rc;
  }
  return accelmon::kExitUsage;  // unreachable: CLI11 requires one subcommand
}
