// Reloads against the real flags of the exporter and a real config file: the command line parsed
// again (the file re-read, flags still winning, a removed key back at its default, a bad file
// changing nothing), and an exporter on loopback that applies what may change live and refuses
// the rest whole. The e2e test (tests/e2e/config_reload_test.sh) does the same through SIGHUP and
// POST /-/reload of the binary.
#include "daemon/exporter/config_reload.h"

#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "daemon/common/config_file.h"
#include "daemon/common/reload.h"
#include "daemon/exporter/exporter_flags.h"
#include "proto/time_format.h"
#include "support/loopback_exporter.h"
#include "support/prom_text.h"
#include "support/temp_dir.h"

namespace accelmon {
namespace config_reload_test {
namespace {

// The binary's command line for `exporter`, as main.cc builds it, parsed from `args`.
class ExporterCommandLine {
 public:
  explicit ExporterCommandLine(std::vector<std::string> args) : args_(std::move(args)) {
    app_.require_subcommand(1);
    app_.fallthrough();
    app_.add_option("--log.level", log_level_, "Log level")
        ->check(CLI::IsMember({"debug", "info", "warn", "error"}));
    AddConfigFileFlag(app_);
    CLI::App* cmd = app_.add_subcommand("exporter", "");
    AddExporterFlags(*cmd, flags_);
    AddRecordFlags(*cmd, flags_);
    defaults_ = flags_;
    Parse();
    SetCommandLine(CommandLine{.app = &app_,
                               .parse_again =
                                   [this] {
                                     log_level_ = "info";
                                     Parse();
                                   },
                               .log_level = &log_level_});
  }

  ExporterFlags& flags() { return flags_; }
  const std::string& log_level() const { return log_level_; }
  std::unique_ptr<FlagsReparse> Reparse() {
    return std::make_unique<TypedFlagsReparse<ExporterFlags>>(*GetCommandLine(), flags_, defaults_);
  }
  std::map<std::string, std::string> Given() const { return GivenFlags(app_); }

 private:
  void Parse() {
    std::vector<const char*> argv{"accelmon"};
    for (const std::string& a : args_) argv.push_back(a.c_str());
    app_.parse(static_cast<int>(argv.size()), argv.data());
  }

  std::vector<std::string> args_;
  CLI::App app_{"accelmon"};
  std::string log_level_ = "info";
  ExporterFlags flags_;
  ExporterFlags defaults_;
};

class ConfigReload : public ::testing::Test {
 protected:
  ConfigReload() : dir_(testing::MakeTempDir("accelmon-reload")), file_(dir_ + "/accelmon.yaml") {}
  ~ConfigReload() override { std::filesystem::remove_all(dir_); }

  void Write(const std::string& yaml) { std::ofstream(file_) << yaml; }

  const std::string dir_;
  const std::string file_;
};

TEST_F(ConfigReload, ParsingAgainReadsTheFileAgainAndCommandLineFlagsStillWin) {
  Write("log.level: warn\nexporter:\n  node.expire-after: 5m\n  grpc.max-reports-per-second: 10\n");
  ExporterCommandLine cl({"--config.file", file_, "exporter", "--grpc.max-reports-per-second=20"});
  EXPECT_EQ(cl.flags().expire_after, "5m");
  EXPECT_EQ(cl.flags().max_reports_per_second, 20);
  const auto before = cl.Given();

  Write(
      "log.level: debug\nexporter:\n  node.expire-after: 7m\n  grpc.max-reports-per-second: 30\n");
  ASSERT_EQ(cl.Reparse()->Parse(), std::nullopt);
  EXPECT_EQ(cl.flags().expire_after, "7m");
  EXPECT_EQ(cl.flags().max_reports_per_second, 20) << "the command line wins";
  EXPECT_EQ(cl.log_level(), "debug");
  EXPECT_EQ(ChangedFlags(before, cl.Given()),
            (std::vector<std::string>{"log.level", "node.expire-after"}));
}

TEST_F(ConfigReload, AKeyRemovedFromTheFileReturnsToItsDefault) {
  Write("exporter:\n  node.expire-after: 5m\n");
  ExporterCommandLine cl({"--config.file", file_, "exporter"});
  Write("exporter: {}\n");
  ASSERT_EQ(cl.Reparse()->Parse(), std::nullopt);
  EXPECT_EQ(cl.flags().expire_after, ExporterFlags{}.expire_after);
}

TEST_F(ConfigReload, ABadFileChangesNothingAndNamesItsLine) {
  Write("log.level: warn\nexporter:\n  node.expire-after: 5m\n");
  ExporterCommandLine cl({"--config.file", file_, "exporter"});
  Write("log.level: debug\nexporter:\n  node.expire-after: 6m\n  node.expire-afterr: 7m\n");
  const auto error = cl.Reparse()->Parse();
  ASSERT_TRUE(error.has_value());
  EXPECT_NE(error->find(file_ + ":4: unknown key \"node.expire-afterr\""), std::string::npos)
      << *error;
  EXPECT_EQ(cl.flags().expire_after, "5m");
  EXPECT_EQ(cl.log_level(), "warn");
}

TEST_F(ConfigReload, UndoRestoresTheFlagsAndTheLogLevel) {
  Write("log.level: warn\nexporter:\n  node.expire-after: 5m\n");
  ExporterCommandLine cl({"--config.file", file_, "exporter"});
  Write("log.level: error\nexporter:\n  node.expire-after: 6m\n");
  auto reparse = cl.Reparse();
  ASSERT_EQ(reparse->Parse(), std::nullopt);
  EXPECT_EQ(cl.flags().expire_after, "6m");
  reparse->Undo();
  EXPECT_EQ(cl.flags().expire_after, "5m");
  EXPECT_EQ(cl.log_level(), "warn");
}

// An exporter started from the command line's flags, with its reloader.
struct ReloadingExporter {
  explicit ReloadingExporter(ExporterCommandLine& cl)
      : exporter(*LoadExporterOptions(cl.flags())),
        reloader(StartReloads(cl.Reparse(), cl.flags(), exporter)) {}
  double Metric(const std::string& name) {
    return *testing::FindValue(testing::Scrape(exporter), name);
  }
  testing::LoopbackExporter exporter;
  std::unique_ptr<ExporterReloader> reloader;
};

TEST_F(ConfigReload, LiveSettingsChangeAndTheSuccessIsOnMetrics) {
  Write("exporter:\n  node.expire-after: 5m\n  grpc.max-reports-per-second: 10\n");
  ExporterCommandLine cl({"--config.file", file_, "exporter"});
  ReloadingExporter r(cl);
  ASSERT_NE(r.reloader, nullptr);
  EXPECT_EQ(r.exporter.store().expire_after(), std::chrono::minutes(5));
  EXPECT_EQ(r.Metric("accelmon_config_last_reload_successful"), 1);
  const double started = r.Metric("accelmon_config_last_reload_success_timestamp_seconds");
  EXPECT_GT(started, 1.7e9);

  // A report of two devices, within the limits until the reload.
  const auto report = std::make_shared<v1::NodeReport>();
  report->set_node("n1");
  report->set_agent_instance_id("i1");
  *report->mutable_timestamp() = TimestampFromTimePoint(Clock::now());
  for (uint32_t i = 0; i < 2; ++i) report->add_devices()->mutable_identity()->set_index(i);
  report->set_sequence(1);
  EXPECT_EQ(r.exporter.store().Apply(report, Clock::now()).outcome, ApplyOutcome::kApplied);

  Write(
      "exporter:\n  node.expire-after: 90s\n  grpc.max-reports-per-second: 3\n"
      "  grpc.max-devices-per-node: 1\n");
  EXPECT_EQ(r.reloader->Reload("test"), "");
  EXPECT_EQ(r.exporter.store().expire_after(), std::chrono::seconds(90));
  const auto again = std::make_shared<v1::NodeReport>(*report);
  again->set_sequence(2);
  EXPECT_EQ(r.exporter.store().Apply(again, Clock::now()).outcome, ApplyOutcome::kRejected)
      << "two devices are over the new limit of one";
  EXPECT_EQ(r.Metric("accelmon_config_last_reload_successful"), 1);
  EXPECT_GE(r.Metric("accelmon_config_last_reload_success_timestamp_seconds"), started);
}

TEST_F(ConfigReload, AChangeThatNeedsARestartIsRefusedWhole) {
  Write("exporter:\n  node.expire-after: 5m\n  record.retention: 1d\n");
  ExporterCommandLine cl({"--config.file", file_, "exporter"});
  ReloadingExporter r(cl);
  const double started = r.Metric("accelmon_config_last_reload_success_timestamp_seconds");

  // A live change beside one that is not: neither is applied.
  Write("exporter:\n  node.expire-after: 1m\n  record.retention: 2d\n");
  const std::string refused = r.reloader->Reload("test");
  EXPECT_NE(refused.find("record.retention changed, which needs a restart"), std::string::npos)
      << refused;
  EXPECT_EQ(r.exporter.store().expire_after(), std::chrono::minutes(5));
  EXPECT_EQ(cl.flags().record_retention, "1d") << "the flags are the running ones again";
  EXPECT_EQ(r.Metric("accelmon_config_last_reload_successful"), 0);
  EXPECT_EQ(r.Metric("accelmon_config_last_reload_success_timestamp_seconds"), started);

  // A diagnostics config that does not parse is refused too, naming its line.
  std::ofstream(dir_ + "/diagnostics.yaml") << "rules:\n  memory_leak:\n    windw: 5m\n";
  Write("exporter:\n  node.expire-after: 5m\n  record.retention: 1d\n  diagnostics.config: " +
        dir_ + "/diagnostics.yaml\n");
  const std::string bad = r.reloader->Reload("test");
  EXPECT_NE(bad.find("diagnostics.yaml:3:"), std::string::npos) << bad;

  // Put right, the next reload succeeds.
  Write("exporter:\n  node.expire-after: 2m\n  record.retention: 1d\n");
  EXPECT_EQ(r.reloader->Reload("test"), "");
  EXPECT_EQ(r.exporter.store().expire_after(), std::chrono::minutes(2));
  EXPECT_EQ(r.Metric("accelmon_config_last_reload_successful"), 1);
}

TEST_F(ConfigReload, AfterCloseReloadsAreRefused) {
  Write("exporter: {}\n");
  ExporterCommandLine cl({"--config.file", file_, "exporter"});
  ReloadingExporter r(cl);
  r.reloader->Close();
  EXPECT_EQ(r.reloader->Reload("test"), "the exporter is stopping");
}

}  // namespace
}  // namespace config_reload_test
}  // namespace accelmon
