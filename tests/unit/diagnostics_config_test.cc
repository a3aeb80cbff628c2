#include <gtest/gtest.h>

#include "diagnostics/config.h"

namespace accelmon::diagnostics {
namespace diagnostics_config_test {
namespace {

std::string ErrorOf(const std::string& yaml) {
  try {
    ParseConfig(yaml, "diag.yaml");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(DiagnosticsConfig, ShippedDefaultsFileMatchesTheBuiltInDefaults) {
  // diagnostics/defaults.yaml is what users copy: it must say what the code does.
  EXPECT_EQ(LoadConfig(ACCELMON_FIXTURES_DIR "/../../diagnostics/defaults.yaml"), Config{});
}

TEST(DiagnosticsConfig, EmptyFileKeepsEveryDefault) {
  EXPECT_EQ(ParseConfig("", "x"), Config{});
  EXPECT_EQ(ParseConfig("rules:\n", "x"), Config{});
}

TEST(DiagnosticsConfig, OverridesOnlyWhatItNames) {
  const Config c = ParseConfig(
      "rules:\n"
      "  memory_fragmentation:\n"
      "    ratio: 0.6\n"
      "    job_request: 4GiB\n"
      "  job_stall: {for: 3m}\n"
      "  link_flapping: {changes: 5, window: 10m}\n"
      "  xid_error: {ignore: [13, 43]}\n"
      "  device_lost: {enabled: false}\n"
      "  firmware_below_minimum:\n"
      "    minimums:\n"
      "      - {vendor: nvidia, model: NVIDIA H200, driver: 550.90.07}\n",
      "x");
  EXPECT_DOUBLE_EQ(c.memory_fragmentation.ratio, 0.6);
  EXPECT_EQ(c.memory_fragmentation.job_request_bytes, 4ULL << 30);
  EXPECT_DOUBLE_EQ(c.memory_fragmentation.min_free_share, 0.2);
  EXPECT_DOUBLE_EQ(c.job_stall.for_seconds, 180);
  EXPECT_EQ(c.link_flapping.changes, 5u);
  EXPECT_DOUBLE_EQ(c.link_flapping.window_seconds, 600);
  EXPECT_EQ(c.xid_error.ignore, (std::vector<uint64_t>{13, 43}));
  EXPECT_FALSE(c.device_lost.enabled);
  ASSERT_EQ(c.firmware_below_minimum.minimums.size(), 1u);
  EXPECT_EQ(c.firmware_below_minimum.minimums[0].model, "NVIDIA H200");
  EXPECT_EQ(c.firmware_below_minimum.minimums[0].driver, "550.90.07");
  EXPECT_EQ(c.thermal_throttling, ThermalThrottlingConfig{});
}

TEST(DiagnosticsConfig, ErrorsNameTheFileLineAndWhatIsWrong) {
  EXPECT_EQ(ErrorOf("rules:\n  memory_fragmentaton:\n    ratio: 0.5\n"),
            "diag.yaml:2: unknown rule memory_fragmentaton (see docs/diagnostics.md)");
  EXPECT_EQ(ErrorOf("rules:\n  job_stall:\n    for: 2 minutes\n"),
            "diag.yaml:3: rules.job_stall.for must be a duration such as 30s, 5m or 2h, not \"2 "
            "minutes\"");
  EXPECT_EQ(ErrorOf("rules:\n  memory_fragmentation:\n    ratio: 1.5\n"),
            "diag.yaml:3: rules.memory_fragmentation.ratio must be between 0 and 1");
  EXPECT_NE(ErrorOf("rules:\n  link_flapping:\n    change: 3\n")
                .find("diag.yaml:3: unknown setting rules.link_flapping.change (known: enabled, "
                      "changes, window)"),
            std::string::npos);
  EXPECT_EQ(ErrorOf("rule:\n  job_stall: {}\n"),
            "diag.yaml:1: unknown key rule (expected `rules` or `first_fault`)");
  EXPECT_EQ(ErrorOf("first_fault:\n  windw: 5m\n"),
            "diag.yaml:2: unknown setting first_fault.windw (known: enabled, window)");
  EXPECT_EQ(ErrorOf("rules:\n  job_straggler:\n    ratio: 2\n"),
            "diag.yaml:3: rules.job_straggler.ratio must be between 0 and 1");
  EXPECT_EQ(ErrorOf("rules:\n  low_sm_activity:\n    share: -0.5\n"),
            "diag.yaml:3: rules.low_sm_activity.share must be between 0 and 1");
  EXPECT_EQ(ErrorOf("rules:\n  thermal_throttling:\n    violation_share: 1.2\n"),
            "diag.yaml:3: rules.thermal_throttling.violation_share must be between 0 and 1");
  EXPECT_EQ(ErrorOf("rules:\n  job_straggler:\n    min_ranks: 0\n"),
            "diag.yaml:3: rules.job_straggler.min_ranks must be a whole number >= 1");
  EXPECT_EQ(ErrorOf("rules:\n  device_lost: {enabled: yes}\n"),
            "diag.yaml:2: rules.device_lost.enabled must be true or false");
  EXPECT_EQ(ErrorOf("rules:\n  firmware_below_minimum:\n    minimums:\n      - {model: X}\n"),
            "diag.yaml:4: rules.firmware_below_minimum.minimums entry needs a vendor");
  EXPECT_NE(ErrorOf("rules: [unclosed\n").find("diag.yaml:"), std::string::npos);
  EXPECT_EQ(ErrorOf("rules:\n  memory_fragmentation:\n    job_request: lots\n"),
            "diag.yaml:3: rules.memory_fragmentation.job_request must be a size such as 4GiB or "
            "512MiB, not \"lots\"");
}

TEST(DiagnosticsConfig, XidOverridesAreReadAndMakeTheConfigDifferent) {
  const Config c = ParseConfig(
      "rules:\n"
      "  xid_error:\n"
      "    overrides:\n"
      "      - {xid: 13, severity: critical, action: reset_device}\n"
      "      - xid: 79\n"
      "        action: drain_node\n"
      "    critical: [31]\n",
      "x");
  EXPECT_EQ(c.xid_error.overrides,
            (std::vector<XidOverride>{{.xid = 13, .severity = "critical", .action = "reset_device"},
                                      {.xid = 79, .severity = "", .action = "drain_node"}}));
  EXPECT_EQ(c.xid_error.critical, (std::vector<uint64_t>{31}));
  EXPECT_NE(c, Config{}) << "a reload sees the change";
  EXPECT_TRUE(Config{}.xid_error.critical.empty()) << "the catalogue decides by default";
}

TEST(DiagnosticsConfig, BadXidOverridesNameTheFileLineAndWhatIsWrong) {
  const std::string head = "rules:\n  xid_error:\n    overrides:\n";
  EXPECT_EQ(ErrorOf(head + "      - {xid: 13, severity: fatal}\n"),
            "diag.yaml:4: rules.xid_error.overrides.severity must be warning or critical, not "
            "\"fatal\"");
  EXPECT_EQ(ErrorOf(head + "      - {xid: 13, action: reboot}\n"),
            "diag.yaml:4: rules.xid_error.overrides.action must be one of none, "
            "restart_application, update_software, check_hardware, contact_support, "
            "reset_device, reboot_node, drain_node, not \"reboot\"");
  EXPECT_EQ(ErrorOf(head + "      - {severity: critical}\n"),
            "diag.yaml:4: rules.xid_error.overrides entry needs an xid");
  EXPECT_EQ(
      ErrorOf(head + "      - {xid: 13}\n"),
      "diag.yaml:4: rules.xid_error.overrides entry for XID 13 needs a severity or an action");
  EXPECT_EQ(ErrorOf(head + "      - {xid: -1, action: none}\n"),
            "diag.yaml:4: rules.xid_error.overrides.xid must be a whole number");
  EXPECT_EQ(ErrorOf(head + "      - {xid: 13, sev: warning}\n"),
            "diag.yaml:4: unknown key sev in rules.xid_error.overrides (known: xid, severity, "
            "action)");
  EXPECT_EQ(ErrorOf(head + "      - {xid: 13, action: none}\n      - {xid: 13, action: none}\n"),
            "diag.yaml:5: rules.xid_error.overrides names XID 13 twice");
  EXPECT_EQ(ErrorOf(head + "      13: warning\n"),
            "diag.yaml:4: rules.xid_error.overrides must be a list of {xid, severity, action}");
}

TEST(DiagnosticsConfig, MissingFileIsAnError) {
  EXPECT_THROW(LoadConfig("/nonexistent/diag.yaml"), ConfigError);
}

}  // namespace
}  // namespace diagnostics_config_test
}  // namespace accelmon::diagnostics
