// SIGINT and SIGTERM (stop) and SIGHUP (reload) handled by one thread of the long-running roles
// (agent, exporter, standalone) with sigwait, not by an asynchronous handler: what a reload does
// (parse files, log, swap settings) could never run in a signal handler.
#pragma once

#include <csignal>
#include <functional>

namespace accelmon {

// Blocks SIGINT/SIGTERM/SIGHUP in this thread and every thread started after it, so that only
// WaitForShutdownSignal() sees them. Must run before any thread (gRPC's too) is started.
sigset_t BlockShutdownSignals();

// Waits for SIGINT or SIGTERM and logs which. Each SIGHUP meanwhile calls `on_hangup` (on this
// thread); without one it is logged and ignored.
void WaitForShutdownSignal(const sigset_t& set, const std::function<void()>& on_hangup = {});

}  // namespace accelmon
