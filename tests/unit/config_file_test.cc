// The configuration file (--config.file) against the real flags of agent, exporter and
// standalone: the shipped file is accepted and is what `config defaults` prints; a typo, a bad
// duration and a wrong type are refused, each naming its line; flags win over the file.
#include "daemon/common/config_file.h"

#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "daemon/agent/agent_command.h"
#include "daemon/exporter/exporter_command.h"
#include "daemon/standalone/standalone_command.h"

namespace accelmon {
namespace config_file_test {
namespace {

// The binary's command line, as main.cc builds it (without the tools that have no section).
struct CommandLine {
  CLI::App app{"accelmon"};
  std::vector<SubcommandRunner> runners;
  std::string log_level = "info";
  CommandLine() {
    app.require_subcommand(1);
    app.fallthrough();
    app.add_option("--log.level", log_level, "Log level")
        ->check(CLI::IsMember({"debug", "info", "warn", "error"}))
        ->capture_default_str();
    AddConfigFileFlag(app);
    runners.push_back(RegisterAgentCommand(app));
    runners.push_back(RegisterExporterCommand(app));
    runners.push_back(RegisterStandaloneCommand(app));
  }
};

std::vector<std::string> Errors(const std::string& yaml) {
  CommandLine cl;
  std::istringstream in(yaml);
  return ReadConfigFile(cl.app, "test.yaml", in, "").errors;
}

std::string ShippedFile() {
  std::ifstream in(std::string(ACCELMON_FIXTURES_DIR) + "/../../deploy/config/accelmon.yaml");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(ConfigFileTest, ShippedDefaultFileIsAccepted) {
  const std::string shipped = ShippedFile();
  ASSERT_FALSE(shipped.empty());
  EXPECT_EQ(Errors(shipped), std::vector<std::string>{});
}

TEST(ConfigFileTest, ShippedFileIsWhatConfigDefaultsPrints) {
  CommandLine cl;
  EXPECT_EQ(DefaultConfigFile(cl.app), ShippedFile())
      << "regenerate: build/accelmon config defaults > deploy/config/accelmon.yaml";
}

TEST(ConfigFileTest, TypoInKeyIsRefusedWithItsLineAndTheClosestName) {
  const auto errors = Errors("exporter:\n  node.expire-afer: 5m\n");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("test.yaml:2:"), std::string::npos) << errors[0];
  EXPECT_NE(errors[0].find("node.expire-afer"), std::string::npos) << errors[0];
  EXPECT_NE(errors[0].find("node.expire-after"), std::string::npos) << errors[0];
}

TEST(ConfigFileTest, UnknownSectionIsRefused) {
  const auto errors = Errors("exportr:\n  node.expire-after: 5m\n");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("test.yaml:1:"), std::string::npos) << errors[0];
}

TEST(ConfigFileTest, BadDurationIsRefusedWithItsLine) {
  const auto errors = Errors("exporter:\n  node.expire-after: 5m\n  record.retention: 5x\n");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("test.yaml:3:"), std::string::npos) << errors[0];
  EXPECT_NE(errors[0].find("record.retention"), std::string::npos) << errors[0];
}

TEST(ConfigFileTest, WrongTypeIsRefusedWithItsLine) {
  const auto list = Errors("exporter:\n  grpc.max-devices-per-node: [1, 2]\n");
  ASSERT_EQ(list.size(), 1u);
  EXPECT_NE(list[0].find("test.yaml:2:"), std::string::npos) << list[0];
  const auto text = Errors("\nexporter:\n  grpc.max-devices-per-node: many\n");
  ASSERT_EQ(text.size(), 1u);
  EXPECT_NE(text[0].find("test.yaml:3:"), std::string::npos) << text[0];
}

TEST(ConfigFileTest, BadYamlIsRefusedWithItsLine) {
  const auto errors = Errors("exporter:\n  node.expire-after: [5m\n");
  ASSERT_FALSE(errors.empty());
  EXPECT_NE(errors[0].find("test.yaml:"), std::string::npos) << errors[0];
}

TEST(ConfigFileTest, EveryErrorOfTheFileIsReported) {
  EXPECT_EQ(Errors("exporter:\n  node.expire-afer: 5m\n  record.retention: 5x\n").size(), 2u);
}

TEST(ConfigFileTest, CommandLineFlagWinsOverTheFile) {
  const std::string path = ::testing::TempDir() + "/config_file_test.yaml";
  {
    std::ofstream out(path);
    out << "log.level: debug\nexporter:\n  node.expire-after: 7m\n  grpc.max-clock-skew: 2m\n";
  }
  CommandLine cl;
  std::vector<std::string> args = {"accelmon", "exporter", "--config.file=" + path,
                                   "--node.expire-after=9m"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  cl.app.parse(static_cast<int>(argv.size()), argv.data());
  CLI::App* exporter = cl.app.get_subcommand("exporter");
  EXPECT_EQ(exporter->get_option("--node.expire-after")->as<std::string>(), "9m");
  EXPECT_EQ(exporter->get_option("--grpc.max-clock-skew")->as<std::string>(), "2m");
  EXPECT_EQ(cl.log_level, "debug");
}

}  // namespace
}  // namespace config_file_test
}  // namespace accelmon
