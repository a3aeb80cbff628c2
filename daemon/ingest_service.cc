#include "daemon/ingest_service.h"

#include <spdlog/spdlog.h>

#include <deque>
#include <mutex>

namespace accelmon {
namespace {

// Above this many unsent acks, stop reading until the agent takes its acks: a client that
// floods without reading is slowed down instead of growing our memory.
constexpr size_t kMaxQueuedAcks = 64;

class StreamReactor final : public grpc::ServerBidiReactor<v1::NodeReport, v1::Ack> {
 public:
  StreamReactor(IngestService& service, ExporterStats& stats, std::string peer)
      : service_(service), stats_(stats), peer_(std::move(peer)) {
    ++stats_.streams_active;
    spdlog::info("agent stream opened from {}", peer_);
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    std::lock_guard lock(mu_);
    if (!ok) {
      reads_done_ = true;
      MaybeFinishLocked();
      return;
    }
    if (node_.empty()) node_ = request_.node();
    acks_.push_back(service_.Handle(request_, peer_));
    if (!writing_) {
      writing_ = true;
      StartWrite(&acks_.front());
    }
    if (acks_.size() < kMaxQueuedAcks) {
      StartRead(&request_);
    } else {
      read_paused_ = true;
    }
  }

  void OnWriteDone(bool ok) override {
    std::lock_guard lock(mu_);
    acks_.pop_front();
    if (!ok) {
      // The client went away; reads will fail too and end the stream.
      acks_.clear();
      writing_ = false;
      write_failed_ = true;
      MaybeFinishLocked();
      return;
    }
    if (read_paused_ && !reads_done_) {
      read_paused_ = false;
      StartRead(&request_);
    }
    if (!acks_.empty()) {
      StartWrite(&acks_.front());
    } else {
      writing_ = false;
      MaybeFinishLocked();
    }
  }

  void OnDone() override {
    --stats_.streams_active;
    spdlog::info("agent stream from {} ({}) closed", peer_, node_.empty() ? "no report" : node_);
    delete this;
  }

  void OnCancel() override {}

 private:
  void MaybeFinishLocked() {
    if (finished_ || writing_) return;
    if (reads_done_ || write_failed_) {
      finished_ = true;
      Finish(grpc::Status::OK);
    }
  }

  IngestService& service_;
  ExporterStats& stats_;
  const std::string peer_;
  std::string node_;

  // Recursive: a Start* call may run the next reaction before it returns.
  std::recursive_mutex mu_;
  v1::NodeReport request_;
  std::deque<v1::Ack> acks_;  // front is being written; deque keeps it in place
  bool writing_ = false;
  bool reads_done_ = false;
  bool read_paused_ = false;
  bool write_failed_ = false;
  bool finished_ = false;
};

}  // namespace

grpc::ServerBidiReactor<v1::NodeReport, v1::Ack>* IngestService::Stream(
    grpc::CallbackServerContext* context) {
  return new StreamReactor(*this, stats_, context->peer());
}

v1::Ack IngestService::Handle(const v1::NodeReport& report, const std::string& peer) {
  v1::Ack ack;
  ack.set_sequence(report.sequence());
  const ApplyResult result =
      store_.Apply(std::make_shared<const v1::NodeReport>(report), Clock::now());
  switch (result.outcome) {
    case ApplyOutcome::kApplied:
      ++stats_.reports_applied;
      ack.set_status(v1::Ack::STATUS_APPLIED);
      break;
    case ApplyOutcome::kDuplicate:
      ++stats_.reports_duplicate;
      ack.set_status(v1::Ack::STATUS_DUPLICATE);
      break;
    case ApplyOutcome::kRejected:
      stats_.CountRejected(result.reason);
      ack.set_status(v1::Ack::STATUS_REJECTED);
      ack.set_reason(result.reason);
      spdlog::warn("rejected report {} from {} (node \"{}\"): {}", report.sequence(), peer,
                   report.node(), result.reason);
      break;
  }
  return ack;
}

}  // namespace accelmon
