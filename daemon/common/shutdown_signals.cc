#include "daemon/common/shutdown_signals.h"

#include <pthread.h>
#include <spdlog/spdlog.h>

namespace accelmon {

sigset_t BlockShutdownSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  return set;
}

void WaitForShutdownSignal(const sigset_t& set, const std::function<void()>& on_hangup) {
  for (;;) {
    int sig = 0;
    if (sigwait(&set, &sig) != 0) continue;
    if (sig == SIGHUP) {
      if (on_hangup) {
        on_hangup();
      } else {
        spdlog::info("received SIGHUP: nothing to reload here, ignored");
      }
      continue;
    }
    spdlog::info("received {}, shutting down", sig == SIGINT ? "SIGINT" : "SIGTERM");
    return;
  }
}

}  // namespace accelmon
