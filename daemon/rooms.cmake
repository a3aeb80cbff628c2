# Which library may not reach which, directly or through any library it links: "FROM TO" pairs,
# read by check_rooms.cmake at configure time and by tests/check_rooms_test.sh, which adds each
# link in turn and expects the configure step to fail. The rooms and what each may link:
# docs/development.md "Layout and rooms".
set(ACCELMON_DAEMON_ROOMS accelmon_common accelmon_agent accelmon_exporter accelmon_standalone
  accelmon_clients accelmon_tools)
set(ACCELMON_FORBIDDEN_LINKS
  # The libraries below the daemon never call up into it.
  "accelmon_proto accelmon_common"
  "accelmon_collectors accelmon_common"
  "accelmon_recording accelmon_common"
  "accelmon_diagnostics accelmon_common"
  "accelmon_recording accelmon_collectors"
  "accelmon_recording accelmon_diagnostics"
  "accelmon_diagnostics accelmon_collectors"
  "accelmon_diagnostics accelmon_recording"
  "accelmon_collectors accelmon_recording"
  "accelmon_collectors accelmon_diagnostics"
  # common is what every room shares: it links none of them.
  "accelmon_common accelmon_agent"
  "accelmon_common accelmon_exporter"
  "accelmon_common accelmon_standalone"
  "accelmon_common accelmon_clients"
  "accelmon_common accelmon_tools"
  # The agent never reaches the exporter, nor the commands built on it.
  "accelmon_agent accelmon_exporter"
  "accelmon_agent accelmon_standalone"
  "accelmon_agent accelmon_clients"
  "accelmon_agent accelmon_tools"
  "accelmon_agent accelmon_diagnostics"
  # The exporter never reaches the agent or its collectors (it renders what reports carry), nor
  # the offline writers of `diagnose`, nor the commands built on it.
  "accelmon_exporter accelmon_agent"
  "accelmon_exporter accelmon_collectors"
  "accelmon_exporter accelmon_diagnostics_reports"
  "accelmon_exporter accelmon_standalone"
  "accelmon_exporter accelmon_clients"
  "accelmon_exporter accelmon_tools"
  # The exporter's clients speak gRPC to it; they never link it.
  "accelmon_clients accelmon_exporter"
  "accelmon_clients accelmon_standalone"
  "accelmon_clients accelmon_tools"
  # The commands' rooms stay apart.
  "accelmon_standalone accelmon_clients"
  "accelmon_standalone accelmon_tools"
  "accelmon_tools accelmon_standalone"
  "accelmon_tools accelmon_clients")
