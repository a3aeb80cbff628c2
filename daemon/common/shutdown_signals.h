// SIGINT and SIGTERM handled by one thread of the long-running roles (agent, exporter,
// standalone), not by an asynchronous handler.
#pragma once

#include <csignal>

namespace accelmon {

// Blocks SIGINT/SIGTERM in this thread and every thread started after it, so that only
// WaitForShutdownSignal() sees them. Must run before any thread (gRPC's too) is started.
sigset_t BlockShutdownSignals();

// Waits for one of them and logs which.
void WaitForShutdownSignal(const sigset_t& set);

}  // namespace accelmon
