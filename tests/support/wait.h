// Bounded waiting for tests that watch real servers: poll a condition until it holds or time is
// up. Bounds are generous and never assert speed.
#pragma once

#include <chrono>
#include <thread>

namespace accelmon::testing {

template <typename Pred>
bool WaitFor(Pred pred, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return pred();
}

}  // namespace accelmon::testing
