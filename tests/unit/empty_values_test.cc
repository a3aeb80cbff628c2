// `--name=` with an empty value, for every option of every subcommand of the binary: refused with
// the option's name (exit 2 in main) unless empty means "off" for it, never taking the next
// argument as its value; a flag given `=` is refused.
#include "daemon/common/empty_values.h"

#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "daemon/agent/agent_command.h"
#include "daemon/clients/loadgen_command.h"
#include "daemon/clients/top_command.h"
#include "daemon/common/config_file.h"
#include "daemon/exporter/exporter_command.h"
#include "daemon/standalone/standalone_command.h"
#include "daemon/tools/config_commands.h"
#include "daemon/tools/diagnose_command.h"
#include "daemon/tools/record_commands.h"
#include "daemon/tools/simulate_command.h"

namespace accelmon {
namespace empty_values_test {
namespace {

// Where an empty value means "off" or "none" (docs/flags.md says so for each).
const std::set<std::string> kEmptyMeansOff = {
    "--config.file",
    "--push.socket",
    "--kubelet.pod-resources-socket",
    "--kubelet.cdi-spec-dirs",
    "--kubelet.pod-logs-dir",
    "--nccl-ras.address",
    "--spool.dir",
    "--record.dir",
    "--web.config.file",
    "--diagnostics.config",
    "--sim.scenario",
    "--scenario",
    "--grpc.tls-cert",
    "--grpc.tls-key",
    "--grpc.tls-client-ca",
    "--grpc.reader-names",  // nobody may read, as by default
    "--exporter.tls-ca",
    "--exporter.tls-cert",
    "--exporter.tls-key",
    "--exporter.tls-server-name",
    "--node.prefix",
    "--sim.seed",
    "--filter",  // top: every node
};

// The binary's whole command line, as main.cc builds it.
struct Binary {
  CLI::App app{"accelmon"};
  std::vector<SubcommandRunner> runners;
  std::string log_level = "info";
  Binary() {
    app.require_subcommand(1);
    app.fallthrough();
    app.add_option("--log.level", log_level, "Log level")
        ->check(CLI::IsMember({"debug", "info", "warn", "error"}));
    AddConfigFileFlag(app);
    for (const auto registrar :
         {RegisterAgentCommand, RegisterExporterCommand, RegisterStandaloneCommand,
          RegisterRecordingCommands, RegisterLoadgenCommand, RegisterDiagnoseCommand,
          RegisterSimulateCommand, RegisterConfigCommands, RegisterTopCommand}) {
      runners.push_back(registrar(app));
    }
  }
  // Parses `args` as main() does; the error, or "" when parsed.
  std::string Parse(const std::vector<std::string>& args) {
    std::vector<const char*> argv{"accelmon"};
    for (const std::string& a : args) argv.push_back(a.c_str());
    std::string error;
    const auto normalised =
        ExplicitEmptyValues(app, static_cast<int>(argv.size()), argv.data(), &error);
    if (!normalised) return error;
    try {
      app.parse(std::vector<std::string>(normalised->rbegin(), normalised->rend()));
    } catch (const CLI::ParseError& e) {
      return e.what();
    }
    return "";
  }
};

struct Case {
  std::vector<std::string> path;  // subcommands
  std::string option;
  bool flag;
};

void Collect(const CLI::App& app, std::vector<std::string> path, std::vector<Case>& out) {
  for (const CLI::Option* op : app.get_options()) {
    if (op->get_lnames().empty()) continue;  // positional
    const std::string name = "--" + op->get_lnames().front();
    if (name == "--help" || name == "--help-all" || name == "--version") continue;
    out.push_back({path, name, op->get_expected_min() == 0});
  }
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    std::vector<std::string> deeper = path;
    deeper.push_back(sub->get_name());
    Collect(*sub, deeper, out);
  }
}

TEST(EmptyValues, EveryOptionRefusesAnEmptyValueByNameUnlessEmptyMeansOff) {
  std::vector<Case> cases;
  {
    Binary b;
    Collect(b.app, {}, cases);
  }
  ASSERT_GT(cases.size(), 60u);
  size_t off = 0;
  for (const Case& c : cases) {
    Binary b;  // fresh: one parse each
    std::vector<std::string> args = c.path;
    if (args.empty()) args.push_back("exporter");  // a global option needs some subcommand
    args.push_back(c.option + "=");
    args.push_back("--bogus-flag");  // what the empty value must not swallow
    const std::string error = b.Parse(args);
    const std::string where = c.option + " of " + (c.path.empty() ? "accelmon" : c.path.back());
    if (c.flag) {
      EXPECT_NE(error.find(c.option + " takes no value"), std::string::npos)
          << where << ": " << error;
    } else if (kEmptyMeansOff.count(c.option) != 0) {
      ++off;
      // Taken as empty: whatever else is missing, nothing is said of this option.
      EXPECT_EQ(error.find(c.option), std::string::npos) << where << ": " << error;
    } else {
      EXPECT_NE(error.find(c.option), std::string::npos)
          << where << " took an empty value without a word: " << error;
      EXPECT_EQ(error.find("--bogus-flag"), std::string::npos)
          << where << ": the next argument was taken as its value";
    }
  }
  EXPECT_GT(off, 10u);
}

TEST(EmptyValues, AnEmptyValueIsNotTheNextArgument) {
  Binary b;
  // Without the rewrite CLI11 took "--bogus-flag" as the socket's name.
  EXPECT_NE(b.Parse({"agent", "--push.socket=", "--bogus-flag"}).find("--bogus-flag"),
            std::string::npos);
  Binary c;
  EXPECT_EQ(c.Parse({"agent", "--push.socket=", "--node.name", "n1"}), "");
}

}  // namespace
}  // namespace empty_values_test
}  // namespace accelmon
