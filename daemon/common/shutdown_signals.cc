#include "daemon/common/shutdown_signals.h"

#include <pthread.h>
#include <spdlog/spdlog.h>

namespace accelmon {

sigset_t BlockShutdownSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  return set;
}

void WaitForShutdownSignal(const sigset_t& set) {
  int sig = 0;
  sigwait(&set, &sig);
  spdlog::info("received {}, shutting down", sig == SIGINT ? "SIGINT" : "SIGTERM");
}

}  // namespace accelmon
