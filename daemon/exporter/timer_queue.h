// One thread that runs small tasks at given times: how throttled agent streams resume reading
// without holding a gRPC callback thread while they wait.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

namespace accelmon {

class TimerQueue {
 public:
  using SteadyClock = std::chrono::steady_clock;

  TimerQueue();
  // Runs every task still queued at once (tasks may own resources that must be released), then
  // joins the thread.
  ~TimerQueue();

  TimerQueue(const TimerQueue&) = delete;
  TimerQueue& operator=(const TimerQueue&) = delete;

  // Runs `task` on the queue's thread at `when` (or soon after). Tasks must be short.
  void Schedule(SteadyClock::time_point when, std::function<void()> task);

 private:
  void Run();

  std::mutex mu_;
  std::condition_variable cv_;
  std::multimap<SteadyClock::time_point, std::function<void()>> tasks_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace accelmon
