// --collector.<name> / --no-collector.<name> on agent and standalone: generated from the one list
// of host collectors (collectors/registry.cc) and plumbed into CreateCollectors.
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "collectors/registry.h"
#include "daemon/agent/agent_command.h"

namespace accelmon {
namespace collector_flags_test {
namespace {

// The collectors CreateCollectors builds for `args` given to a command with the collector flags
// (devices off).
std::vector<std::string> CollectorsFor(CollectorFlags flags, std::vector<std::string> args) {
  CLI::App cmd;
  AddCollectorFlags(cmd, flags);
  std::reverse(args.begin(), args.end());  // CLI11 takes them last first
  cmd.parse(args);
  collectors::CollectorConfig config = MakeCollectorConfig(flags);
  config.devices = false;
  std::vector<std::string> names;
  for (const auto& c : collectors::CreateCollectors(config)) names.emplace_back(c->name());
  return names;
}

// The host collectors CreateCollectors builds for `args` given to a command with the collector
// flags (devices off: only the host collectors are of interest).
std::vector<std::string> HostCollectorsFor(std::vector<std::string> args) {
  CollectorFlags flags;
  flags.node_name = "test-node";
  flags.push.socket = "";
  flags.kubelet_socket = "";
  return CollectorsFor(flags, std::move(args));
}

std::vector<std::string> AllHostCollectors() {
  std::vector<std::string> names;
  for (const auto& info : collectors::HostCollectors()) names.emplace_back(info.name);
  return names;
}

bool Has(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

TEST(CollectorFlags, WithoutFlagsEveryHostCollectorRuns) {
  for (const auto& info : collectors::HostCollectors()) EXPECT_TRUE(info.default_enabled);
  EXPECT_EQ(HostCollectorsFor({}), AllHostCollectors());
}

TEST(CollectorFlags, NoCollectorMeminfoRemovesMeminfosCollector) {
  const auto names = HostCollectorsFor({"--no-collector.meminfo"});
  EXPECT_FALSE(Has(names, "meminfo"));
  EXPECT_EQ(names.size(), AllHostCollectors().size() - 1);
  EXPECT_TRUE(Has(names, "vmstat"));
}

TEST(CollectorFlags, KubeletRunsLastOnItsDefaultSocketUnlessTurnedOff) {
  CollectorFlags flags;
  flags.push.socket = "";
  EXPECT_EQ(flags.kubelet_socket, "/var/lib/kubelet/pod-resources/kubelet.sock");
  const auto names = CollectorsFor(flags, {});
  ASSERT_FALSE(names.empty());
  EXPECT_EQ(names.back(), "kubelet");
  EXPECT_EQ(MakeCollectorConfig(flags).kubelet_timeout, std::chrono::milliseconds(500));
  EXPECT_FALSE(Has(CollectorsFor(flags, {"--kubelet.pod-resources-socket", ""}), "kubelet"));
  EXPECT_EQ(CollectorsFor(flags, {"--kubelet.pod-resources-socket", "/tmp/k.sock"}).back(),
            "kubelet");
  CLI::App cmd;
  AddCollectorFlags(cmd, flags);
  cmd.parse(std::vector<std::string>{"250ms", "--kubelet.timeout"});
  EXPECT_EQ(MakeCollectorConfig(flags).kubelet_timeout, std::chrono::milliseconds(250));
}

TEST(CollectorFlags, TheLastFlagForACollectorWins) {
  EXPECT_TRUE(Has(HostCollectorsFor({"--no-collector.meminfo", "--collector.meminfo"}), "meminfo"));
  EXPECT_FALSE(
      Has(HostCollectorsFor({"--collector.meminfo", "--no-collector.meminfo"}), "meminfo"));
}

TEST(CollectorFlags, EveryHostCollectorHasBothFlagsWithItsHelpAndDefault) {
  CollectorFlags flags;
  CLI::App cmd;
  AddCollectorFlags(cmd, flags);
  const std::string help = cmd.help();
  for (const auto& info : collectors::HostCollectors()) {
    const std::string name(info.name);
    EXPECT_NE(help.find("--collector." + name), std::string::npos) << name;
    EXPECT_NE(help.find("--no-collector." + name), std::string::npos) << name;
    EXPECT_NE(help.find(std::string(info.help) + " (default: enabled)"), std::string::npos) << name;
  }
}

TEST(CollectorFlags, AnUnknownCollectorIsAUsageError) {
  EXPECT_THROW(HostCollectorsFor({"--no-collector.bogus"}), CLI::ParseError);
  EXPECT_THROW(HostCollectorsFor({"--collector.bogus"}), CLI::ParseError);
  // main.cc turns every CLI::ParseError but --help into exit 2 (kExitUsage).
  CollectorFlags flags;
  CLI::App cmd;
  AddCollectorFlags(cmd, flags);
  try {
    cmd.parse(std::vector<std::string>{"--no-collector.bogus"});
    FAIL() << "parsed an unknown collector";
  } catch (const CLI::ParseError& e) {
    std::ostringstream out, err;
    EXPECT_NE(cmd.exit(e, out, err), 0);
    EXPECT_NE(std::string(e.what()).find("--no-collector.bogus"), std::string::npos) << e.what();
  }
}

TEST(CreateCollectors, AnUnknownHostCollectorNameIsRejected) {
  collectors::CollectorConfig config{.paths = collectors::PathResolver()};
  EXPECT_TRUE(collectors::HostCollectorEnabled(config, "hwmon"));
  config.host_collectors["hwmon"] = false;
  EXPECT_FALSE(collectors::HostCollectorEnabled(config, "hwmon"));
  config.host_collectors["bogus"] = false;
  EXPECT_THROW(collectors::CreateCollectors(config), std::invalid_argument);
  EXPECT_THROW(collectors::HostCollectorEnabled(config, "bogus"), std::invalid_argument);
}

}  // namespace
}  // namespace collector_flags_test
}  // namespace accelmon
