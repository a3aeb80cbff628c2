#include "daemon/exporter/timer_queue.h"

#include <utility>

namespace accelmon {

TimerQueue::TimerQueue() : thread_([this] { Run(); }) {}

TimerQueue::~TimerQueue() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
  while (!tasks_.empty()) {
    auto tasks = std::exchange(tasks_, {});
    for (auto& [when, task] : tasks) task();
  }
}

void TimerQueue::Schedule(SteadyClock::time_point when, std::function<void()> task) {
  {
    std::lock_guard lock(mu_);
    tasks_.emplace(when, std::move(task));
  }
  cv_.notify_all();
}

void TimerQueue::Run() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    if (tasks_.empty()) {
      cv_.wait(lock);
      continue;
    }
    const auto when = tasks_.begin()->first;
    if (SteadyClock::now() < when) {
      cv_.wait_until(lock, when);
      continue;
    }
    std::function<void()> task = std::move(tasks_.begin()->second);
    tasks_.erase(tasks_.begin());
    lock.unlock();
    task();  // outside the lock: a task may schedule another
    lock.lock();
  }
}

}  // namespace accelmon
