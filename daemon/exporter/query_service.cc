#include "daemon/exporter/query_service.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <deque>
#include <string>
#include <vector>

#include "daemon/common/tls.h"
#include "daemon/exporter/node_summary.h"

namespace accelmon {

class WatchReactor;

// One Watch client: its queue and its writes. Shared by the reactor (until OnDone), the
// diagnostics service (until unsubscribed) and the query service (until removed).
class WatchStream final : public Watcher, public std::enable_shared_from_this<WatchStream> {
 public:
  WatchStream(grpc::CallbackServerContext* context, const v1::WatchRequest& request)
      : Watcher({request.nodes().begin(), request.nodes().end()}, request.reports()),
        context_(context),
        peer_(context->peer()) {}

  void Attach(grpc::ServerWriteReactor<v1::WatchEvent>* reactor) {
    std::lock_guard lock(mu_);
    reactor_ = reactor;
  }

  void Push(WatchItem item, bool initial) override {
    std::lock_guard lock(mu_);
    if (ending_) return;
    if (initial) {
      ++capacity_;  // the initial state is sent whole
    } else if (queue_.size() >= capacity_) {
      // A slow client loses the oldest events rather than slowing ingest.
      queue_.pop_front();
      if (dropped_++ == 0) warn_dropping_ = true;  // logged by Flush, outside the service's lock
    }
    queue_.push_back(std::move(item));
  }

  void Flush() override {
    const auto self = shared_from_this();
    std::lock_guard lock(mu_);
    if (warn_dropping_) {
      warn_dropping_ = false;
      spdlog::warn("watch from {} reads too slowly; dropping its oldest events (at most {} queued)",
                   peer_, QueryService::kWatchQueueCapacity);
    }
    WriteNextLocked();
  }

  // The server is stopping: end now with `status`, dropping what is queued.
  void End(grpc::Status status) {
    const auto self = shared_from_this();
    std::lock_guard lock(mu_);
    if (ending_) return;
    EndLocked(std::move(status));
    // A write to a client that does not read may never complete: cancel it so it fails now.
    if (writing_) context_->TryCancel();
    WriteNextLocked();
  }

  void OnWriteDone(bool ok) {
    const auto self = shared_from_this();
    std::lock_guard lock(mu_);
    writing_ = false;
    if (ok) {
      ++sent_;
    } else if (!ending_) {
      EndLocked(grpc::Status(grpc::StatusCode::CANCELLED, "watch client went away"));
    }
    WriteNextLocked();
  }

  void OnCancel() {
    const auto self = shared_from_this();
    std::lock_guard lock(mu_);
    if (!ending_) EndLocked(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled"));
    WriteNextLocked();
  }

  // From OnDone: the reactor is going away; nothing more is written.
  uint64_t Detach() {
    std::lock_guard lock(mu_);
    reactor_ = nullptr;
    ending_ = true;
    queue_.clear();
    spdlog::info("watch from {} ended: {} event(s) sent, {} dropped", peer_, sent_, dropped_);
    return dropped_;
  }

  uint64_t dropped() const {
    std::lock_guard lock(mu_);
    return dropped_;
  }

 private:
  void EndLocked(grpc::Status status) {
    ending_ = true;
    status_ = std::move(status);
    queue_.clear();
  }

  // Writes the next event (one write at a time), or finishes once ending and idle.
  void WriteNextLocked() {
    if (reactor_ == nullptr || writing_ || finished_) return;
    if (ending_) {
      finished_ = true;
      reactor_->Finish(status_);
      return;
    }
    if (queue_.empty()) return;
    WatchItem item = std::move(queue_.front());
    queue_.pop_front();
    if (capacity_ > QueryService::kWatchQueueCapacity) --capacity_;
    event_.Clear();
    if (item.report) {
      *event_.mutable_report() = *item.report;
      event_.set_unrecorded(item.unrecorded);
    } else {
      *event_.mutable_finding() = *item.finding;
    }
    writing_ = true;
    reactor_->StartWrite(&event_);
  }

  grpc::CallbackServerContext* const context_;
  const std::string peer_;
  // Recursive: a Start* or Finish call may run the next reaction before it returns.
  mutable std::recursive_mutex mu_;
  grpc::ServerWriteReactor<v1::WatchEvent>* reactor_ = nullptr;
  std::deque<WatchItem> queue_;
  size_t capacity_ = QueryService::kWatchQueueCapacity;
  v1::WatchEvent event_;  // being written
  grpc::Status status_;
  uint64_t sent_ = 0;
  uint64_t dropped_ = 0;
  bool warn_dropping_ = false;
  bool writing_ = false;
  bool ending_ = false;  // no more events; Finish once the write in flight is done
  bool finished_ = false;
};

class WatchReactor final : public grpc::ServerWriteReactor<v1::WatchEvent> {
 public:
  WatchReactor(QueryService& service, std::shared_ptr<WatchStream> stream)
      : service_(service), stream_(std::move(stream)) {
    stream_->Attach(this);
  }

  void OnWriteDone(bool ok) override { stream_->OnWriteDone(ok); }
  void OnCancel() override { stream_->OnCancel(); }
  void OnDone() override {
    const uint64_t dropped = stream_->Detach();
    service_.diagnostics_.Unsubscribe(stream_.get());
    service_.Remove(stream_, dropped);
    delete this;
  }

 private:
  QueryService& service_;
  std::shared_ptr<WatchStream> stream_;
};

QueryService::QueryService(NodeStore& store, DiagnosticsService& diagnostics)
    : store_(store), diagnostics_(diagnostics) {}

QueryService::~QueryService() = default;

std::optional<grpc::Status> QueryService::RefuseReader(grpc::CallbackServerContext* context) const {
  if (!require_reader_) return std::nullopt;
  const std::vector<std::string> names = ClientCertificateNames(*context->auth_context());
  for (const std::string& name : names) {
    if (std::find(reader_names_.begin(), reader_names_.end(), name) != reader_names_.end()) {
      return std::nullopt;
    }
  }
  std::string named;
  for (const std::string& n : names) named += (named.empty() ? "\"" : ", \"") + n + "\"";
  return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                      "the client certificate (" + (named.empty() ? "no name" : named) +
                          ") may not read: the exporter's --grpc.reader-names does not list it");
}

namespace {

// A unary call answered at once, from the handler's thread.
grpc::ServerUnaryReactor* FinishNow(grpc::CallbackServerContext* context,
                                    const grpc::Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(status);
  return reactor;
}

}  // namespace

grpc::ServerUnaryReactor* QueryService::GetNodes(grpc::CallbackServerContext* context,
                                                 const v1::GetNodesRequest* request,
                                                 v1::GetNodesResponse* response) {
  if (auto refused = RefuseReader(context)) return FinishNow(context, *refused);
  const std::set<std::string> wanted(request->nodes().begin(), request->nodes().end());
  for (const NodeEntry& e : store_.Snapshot(Clock::now())) {  // sorted by node
    if (wanted.empty() || wanted.count(e.report->node()) != 0) {
      *response->add_reports() = *e.report;
    }
  }
  return FinishNow(context, grpc::Status::OK);
}

grpc::ServerUnaryReactor* QueryService::GetFindings(grpc::CallbackServerContext* context,
                                                    const v1::GetFindingsRequest* request,
                                                    v1::GetFindingsResponse* response) {
  if (auto refused = RefuseReader(context)) return FinishNow(context, *refused);
  std::vector<v1::Finding> findings = diagnostics_.Findings(
      {request->nodes().begin(), request->nodes().end()}, request->include_closed());
  for (v1::Finding& f : findings) *response->add_findings() = std::move(f);
  return FinishNow(context, grpc::Status::OK);
}

grpc::ServerUnaryReactor* QueryService::GetSummary(grpc::CallbackServerContext* context,
                                                   const v1::GetSummaryRequest* request,
                                                   v1::GetSummaryResponse* response) {
  if (auto refused = RefuseReader(context)) return FinishNow(context, *refused);
  const std::set<std::string> wanted(request->nodes().begin(), request->nodes().end());
  for (const NodeEntry& e : store_.Snapshot(Clock::now())) {  // sorted by node
    if (wanted.empty() || wanted.count(e.report->node()) != 0) {
      SummarizeReport(*e.report, response->add_nodes());
    }
  }
  for (const v1::Finding& f :
       diagnostics_.Findings({request->nodes().begin(), request->nodes().end()},
                             /*include_closed=*/false)) {
    SummarizeFinding(f, response->add_findings());
  }
  return FinishNow(context, grpc::Status::OK);
}

grpc::ServerWriteReactor<v1::WatchEvent>* QueryService::Watch(grpc::CallbackServerContext* context,
                                                              const v1::WatchRequest* request) {
  auto stream = std::make_shared<WatchStream>(context, *request);
  auto* reactor = new WatchReactor(*this, stream);
  const auto refuse = [&] {
    std::lock_guard lock(mu_);
    return shutting_down_;
  };
  if (refuse()) {
    stream->End(grpc::Status(grpc::StatusCode::UNAVAILABLE, "exporter is shutting down"));
    return reactor;
  }
  if (auto refused = RefuseReader(context)) {
    stream->End(*refused);
    return reactor;
  }
  spdlog::info("watch from {} opened (nodes: {}, reports: {}, initial state: {})", context->peer(),
               request->nodes().empty() ? "all" : "some", request->reports() ? "yes" : "no",
               request->initial_state() ? "yes" : "no");
  diagnostics_.Subscribe(stream, request->initial_state());
  bool late = false;
  {
    std::lock_guard lock(mu_);
    late = shutting_down_;  // Shutdown() ran while subscribing and did not see this stream
    if (!late) streams_.insert(stream);
  }
  if (late) {
    diagnostics_.Unsubscribe(stream.get());
    stream->End(grpc::Status(grpc::StatusCode::UNAVAILABLE, "exporter is shutting down"));
  }
  return reactor;
}

void QueryService::Shutdown() {
  std::set<std::shared_ptr<WatchStream>> streams;
  {
    std::lock_guard lock(mu_);
    shutting_down_ = true;
    streams = streams_;
  }
  for (const auto& s : streams) {
    diagnostics_.Unsubscribe(s.get());
    s->End(grpc::Status::OK);
  }
}

void QueryService::Remove(const std::shared_ptr<WatchStream>& stream, uint64_t dropped) {
  std::lock_guard lock(mu_);
  streams_.erase(stream);
  dropped_ += dropped;
}

size_t QueryService::watchers() const {
  std::lock_guard lock(mu_);
  return streams_.size();
}

uint64_t QueryService::dropped() const {
  std::lock_guard lock(mu_);
  uint64_t total = dropped_;
  for (const auto& s : streams_) total += s->dropped();
  return total;
}

}  // namespace accelmon
