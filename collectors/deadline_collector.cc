#include "collectors/deadline_collector.h"

#include <condition_variable>
#include <mutex>

#include "proto/time_format.h"

namespace accelmon::collectors {

struct DeadlineCollector::State {
  std::unique_ptr<Collector> inner;
  std::mutex mu;
  std::condition_variable cv;
  bool stopping = false;
  bool has_request = false;  // a tick waits for the worker
  bool busy = false;         // the worker is inside inner->Collect
  uint64_t completed = 0;    // ticks finished
  v1::NodeReport scratch;    // the current tick's report, owned by the worker while busy
  std::string error;         // what the inner collector threw
  bool absent = false;       // it threw SourceAbsent
};

void DeadlineCollector::Work(const std::shared_ptr<State>& s) {
  std::unique_lock lock(s->mu);
  for (;;) {
    s->cv.wait(lock, [&] { return s->stopping || s->has_request; });
    if (s->stopping) return;
    s->has_request = false;
    s->busy = true;
    lock.unlock();
    std::string error;
    bool absent = false;
    try {
      s->inner->Collect(s->scratch);
    } catch (const SourceAbsent& e) {
      error = e.what();
      absent = true;
    } catch (const std::exception& e) {
      error = e.what();
    }
    lock.lock();
    s->error = std::move(error);
    s->absent = absent;
    s->busy = false;
    ++s->completed;
    s->cv.notify_all();
  }
}

DeadlineCollector::DeadlineCollector(std::unique_ptr<Collector> inner,
                                     std::chrono::milliseconds deadline)
    : name_(inner->name()), deadline_(deadline), state_(std::make_shared<State>()) {
  state_->inner = std::move(inner);
  thread_ = std::thread([s = state_] { Work(s); });
}

DeadlineCollector::~DeadlineCollector() {
  bool hung = false;
  {
    std::lock_guard lock(state_->mu);
    state_->stopping = true;
    hung = state_->busy;
  }
  state_->cv.notify_all();
  // A worker stuck in a vendor call cannot be joined; it keeps the shared state alive and ends
  // with the process.
  if (hung) {
    thread_.detach();
  } else {
    thread_.join();
  }
}

void DeadlineCollector::Collect(v1::NodeReport& report) {
  std::unique_lock lock(state_->mu);
  if (state_->busy || state_->has_request) {
    throw CollectorError(name_ + ": still blocked in the previous collection (over " +
                         std::to_string(deadline_.count()) + "ms)");
  }
  state_->scratch.Clear();
  *state_->scratch.mutable_timestamp() = report.timestamp();
  state_->has_request = true;
  const uint64_t target = state_->completed + 1;
  state_->cv.notify_all();
  if (!state_->cv.wait_for(lock, deadline_, [&] { return state_->completed >= target; })) {
    throw CollectorError(name_ + ": timed out after " + FormatPrometheusDuration(deadline_));
  }
  if (!state_->error.empty()) {
    if (state_->absent) throw SourceAbsent(state_->error);
    throw CollectorError(state_->error);
  }
  for (auto& device : *state_->scratch.mutable_devices()) {
    report.add_devices()->Swap(&device);
  }
  for (auto& event : *state_->scratch.mutable_events()) {
    report.add_events()->Swap(&event);
  }
}

}  // namespace accelmon::collectors
