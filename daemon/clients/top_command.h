// `accelmon top`: the fleet live in the terminal, as nvtop and htop show one machine — nodes with
// bars for utilization and memory, each node's devices, the open findings. It reads the
// exporter's Query API (GetNodes and GetFindings every --refresh), or with --local runs the
// agent's collectors on this host and shows that one node without any exporter.
//
// --once prints the same as plain text tables to stdout instead (top_view.h, FormatText) and
// exits. Exit codes: 0 it ran (also after `q`, SIGINT or SIGTERM); 1 --once could not reach the
// exporter (the reason on stderr), or without --once there is no terminal to draw on; 2 usage
// errors, a bad TLS setting or --sim.scenario.
#pragma once

#include <CLI/CLI.hpp>

#include "daemon/common/subcommand.h"

namespace accelmon {

// Adds it to `app` (main.cc's table of subcommands).
SubcommandRunner RegisterTopCommand(CLI::App& app);

}  // namespace accelmon
