// `accelmon standalone`: agent and exporter in one process on this host, the first thing to run.
#pragma once

#include "daemon/common/subcommand.h"

namespace accelmon {

SubcommandRunner RegisterStandaloneCommand(CLI::App& app);

}  // namespace accelmon
