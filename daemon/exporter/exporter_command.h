// `accelmon exporter` on the command line (its flags: exporter_flags.h).
#pragma once

#include <CLI/CLI.hpp>

#include "daemon/common/subcommand.h"
#include "daemon/exporter/exporter_flags.h"

namespace accelmon {

SubcommandRunner RegisterExporterCommand(CLI::App& app);

}  // namespace accelmon
