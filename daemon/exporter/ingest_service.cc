#include "daemon/exporter/ingest_service.h"

#include <google/protobuf/arena.h>
#include <grpcpp/support/proto_buffer_reader.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <deque>
#include <mutex>
#include <optional>
#include <vector>

#include "daemon/common/tls.h"

namespace accelmon {
namespace {

// Above this many unsent acks (those waiting for the recorder included), stop reading until the
// agent takes its acks: a client that floods without reading is slowed down instead of growing
// our memory.
constexpr size_t kMaxQueuedAcks = 64;

using SteadyClock = std::chrono::steady_clock;

// The peer without its port: a client that reconnects keeps its log-limiting key.
std::string PeerHost(const std::string& peer) {
  const size_t colon = peer.rfind(':');
  return colon == std::string::npos || colon == 0 ? peer : peer.substr(0, colon);
}

// A client's string made fit for a log line: bounded, with bytes outside printable ASCII escaped.
std::string LogSafe(std::string_view s, size_t max_bytes = 64) {
  std::string out;
  for (size_t i = 0; i < s.size() && i < max_bytes; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("\\x{:02x}", c);
    }
  }
  if (s.size() > max_bytes) out += fmt::format("...({} bytes)", s.size());
  return out;
}

// Reports a stream may send: `rate` a second, in bursts of up to one second's worth.
class TokenBucket {
 public:
  explicit TokenBucket(double rate)
      : rate_(rate), burst_(std::max(1.0, rate)), tokens_(burst_), last_(SteadyClock::now()) {}

  // A reload's new rate, from the next report on.
  void set_rate(double rate) {
    if (rate == rate_) return;
    rate_ = rate;
    burst_ = std::max(1.0, rate);
    tokens_ = std::min(tokens_, burst_);
  }

  void Take(SteadyClock::time_point now) {
    Refill(now);
    tokens_ -= 1;
  }
  // How long until the next report may be read; zero when now.
  SteadyClock::duration Wait(SteadyClock::time_point now) {
    if (rate_ <= 0) return {};
    Refill(now);
    if (tokens_ >= 1) return {};
    return std::chrono::ceil<SteadyClock::duration>(
        std::chrono::duration<double>((1 - tokens_) / rate_));
  }

 private:
  void Refill(SteadyClock::time_point now) {
    tokens_ =
        std::min(burst_, tokens_ + rate_ * std::chrono::duration<double>(now - last_).count());
    last_ = now;
  }

  double rate_;
  double burst_;
  double tokens_;
  SteadyClock::time_point last_;
};

class StreamReactor final : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  StreamReactor(IngestService& service, ExporterStats& stats, std::string peer,
                std::optional<std::vector<std::string>> cert_names)
      : service_(service),
        stats_(stats),
        peer_(std::move(peer)),
        cert_names_(std::move(cert_names)),
        bucket_(service_.max_reports_per_second()) {
    ++stats_.streams_active;
    spdlog::info("agent stream opened from {}", peer_);
    read_outstanding_ = true;
    StartRead(&raw_request_);
  }

  void OnReadDone(bool ok) override {
    std::lock_guard lock(mu_);
    read_outstanding_ = false;
    if (!ok) {
      reads_done_ = true;
      MaybeFinishLocked();
      return;
    }
    std::string unparseable = ParseRaw();
    if (unparseable.empty() && cert_names_ && !NodeAllowed(request_->node())) {
      DenyLocked();
      return;
    }
    bucket_.Take(SteadyClock::now());
    Dropped dropped;
    if (unparseable.empty()) dropped = service_.Trim(*request_);
    if (show_only_) {
      // Shown, never acknowledged: the agent sends it again on its next stream.
      if (unparseable.empty()) {
        if (shown_ == 0) first_shown_ = request_->sequence();
        ++shown_;
        service_.Show(request_, peer_);
      } else {
        service_.Reject(*request_, unparseable, peer_);
      }
      MaybeStartReadLocked();
      MaybeFinishLocked();
      return;
    }
    uint64_t findings_ticket = 0;
    const v1::Ack ack = unparseable.empty()
                            ? service_.Handle(request_, peer_, dropped, &findings_ticket)
                            : service_.Reject(*request_, unparseable, peer_);
    if (node_.empty() && ack.status() != v1::Ack::STATUS_REJECTED) node_ = request_->node();
    QueuedAck& queued = acks_.emplace_back();
    bool own = false;
    grpc::SerializationTraits<v1::Ack>::Serialize(ack, &queued.buffer, &own);
    const bool applied = ack.status() == v1::Ack::STATUS_APPLIED;
    const bool to_record =
        (applied || ack.status() == v1::Ack::STATUS_DUPLICATE) && service_.recorder() != nullptr;
    if (to_record) {
      // The callback finds its ack by this id. Acknowledged once the findings the report opened,
      // escalated or closed are saved too (OnSettled): a kill -9 after the ack loses none.
      const uint64_t id = ++last_record_id_;
      queued.record_id = id;
      queued.findings_ticket = findings_ticket;
      ++stats_.acks_waiting;
      // Acknowledged once recorded; a duplicate once everything before it is (its first copy
      // may still be waiting for a disk that is full). The callback may run inside Append (a
      // stopped recorder): the ack is queued first, and the mutex is recursive.
      ++queued.waits;
      ++records_pending_;
      auto on_recorded = [this, id](bool recorded) { OnSettled(id, recorded, "recording"); };
      if (applied) {
        service_.recorder()->Append(
            std::move(wire_),
            recording::ReportKey{request_->node(), request_->agent_instance_id(),
                                 request_->sequence(), ToNanos(request_->timestamp())},
            std::move(on_recorded));
      } else {
        service_.recorder()->AfterRecorded(std::move(on_recorded));
      }
    }
    MaybeStartWriteLocked();
    MaybeStartReadLocked();
  }

  void OnWriteDone(bool ok) override {
    std::lock_guard lock(mu_);
    acks_.pop_front();
    writing_ = false;
    if (!ok) {
      // The client went away; reads will fail too and end the stream. Reports still being
      // recorded find their acks gone (OnSettled).
      ForgetAcksLocked(0);
      write_failed_ = true;
      MaybeFinishLocked();
      return;
    }
    MaybeStartReadLocked();
    MaybeStartWriteLocked();
    MaybeFinishLocked();
  }

  void OnDone() override {
    --stats_.streams_active;
    spdlog::info("agent stream from {} ({}) closed", peer_,
                 node_.empty() ? "no report" : LogSafe(node_));
    std::unique_lock lock(mu_);
    done_ = true;
    // Resume() or the last OnSettled() deletes us.
    if (resume_scheduled_ || records_pending_ > 0) return;
    lock.unlock();
    delete this;
  }

  void OnCancel() override {
    std::lock_guard lock(mu_);
    // The agent went away or the server is stopping: acks still waiting for the recording (a
    // full disk) can never reach it, so the stream ends without them (their callbacks still
    // come, and find it finished). A read outstanding fails and ends it; a throttled or
    // show-only stream may have none: end it now.
    cancelled_ = true;
    if (!read_outstanding_) {
      reads_done_ = true;
      MaybeFinishLocked();
    }
  }

 private:
  // Reads the next report unless the ack queue is full (OnWriteDone calls again) or the stream
  // is over its rate (Resume() calls again when it may read).
  void MaybeStartReadLocked() {
    if (read_outstanding_ || resume_scheduled_ || reads_done_ || write_failed_ || finished_) return;
    if (acks_.size() >= kMaxQueuedAcks || show_only_) {
      // Acks wait: for an agent that does not read them, and for the recording. While it cannot
      // be written the stream is read on and what it sends only shown (live views must not
      // freeze on a full disk); the acks after a report shown so could not be cumulative, so
      // the stream stays so until it ends (MaybeFinishLocked), once the recording works again.
      if (!service_.recording_failing()) return;
      if (!show_only_) EnterShowOnlyLocked();
    }
    const auto now = SteadyClock::now();
    bucket_.set_rate(service_.max_reports_per_second());
    const auto wait = bucket_.Wait(now);
    if (wait > SteadyClock::duration::zero()) {
      ++stats_.reads_throttled;
      if (!throttled_) {
        throttled_ = true;
        if (auto suppressed = service_.log_limiter().Admit(PeerHost(peer_) + " throttled", now)) {
          spdlog::warn(
              "agent stream from {} (node \"{}\") sends more than {} reports/s "
              "(--grpc.max-reports-per-second); reading it more slowly{}",
              peer_, LogSafe(node_.empty() ? request_->node() : node_),
              service_.max_reports_per_second(),
              *suppressed == 0 ? "" : fmt::format(" ({} more like it not logged)", *suppressed));
        }
      }
      resume_scheduled_ = true;
      service_.timers().Schedule(now + wait, [this] { Resume(); });
      return;
    }
    read_outstanding_ = true;
    StartRead(&raw_request_);
  }

  // The report just read, parsed into request_ (and kept as received in wire_ for the
  // recorder); empty, or why it cannot be parsed.
  std::string ParseRaw() {
    // The store keeps the last applied report itself (no copy): parse into a fresh one while
    // the store or a scrape still holds the previous.
    if (request_.use_count() > 1) {
      request_ = NewArenaReport();
    } else {
      request_->Clear();
    }
    // Without a recorder the bytes are not needed after the parse: read them where gRPC
    // received them, not through a copy (a 10 KB memcpy per report, and a report-sized string
    // kept per stream).
    if (service_.recorder() == nullptr) {
      grpc::ProtoBufferReader reader(&raw_request_);
      if (request_->ParseFromZeroCopyStream(&reader)) {
        raw_request_.Clear();
        return {};
      }
    }
    // Recording, or a report that does not parse (ParseReport says why).
    std::vector<grpc::Slice> slices;
    wire_.clear();
    if (raw_request_.Dump(&slices).ok()) {
      for (const grpc::Slice& s : slices) {
        wire_.append(reinterpret_cast<const char*>(s.begin()), s.size());
      }
    }
    raw_request_.Clear();
    std::string unparseable = ParseReport(wire_, request_.get());
    if (service_.recorder() == nullptr) std::string().swap(wire_);  // kept only to record
    return unparseable;
  }

  // On the timer thread, when a throttled stream may read again.
  void Resume() {
    std::unique_lock lock(mu_);
    resume_scheduled_ = false;
    if (done_) {
      if (records_pending_ > 0) return;  // the last OnSettled() deletes us
      lock.unlock();
      delete this;
      return;
    }
    MaybeStartReadLocked();
  }

  // On the recorder's thread once the report of ack `record_id` is recorded, or on the
  // diagnostics worker once the findings it changed are saved (`ok`); or when either stopped
  // before that (`what` it could not finish): then neither its ack nor any after it is sent (the
  // agent keeps them in its spool and sends them again), and the stream ends.
  void OnSettled(uint64_t record_id, bool ok, const char* what) {
    std::unique_lock lock(mu_);
    --records_pending_;
    for (auto it = acks_.begin(); it != acks_.end(); ++it) {
      if (it->record_id != record_id) continue;
      if (ok && it->findings_ticket != 0) {
        // Recorded: what it changed in the findings must be saved too. The diagnostics worker
        // is usually past it by now; else it calls back once it is.
        const uint64_t ticket = std::exchange(it->findings_ticket, 0);
        const auto settle = service_.diagnostics()->CallWhenSettled(
            ticket,
            [this, record_id](bool saved) { OnSettled(record_id, saved, "saving the findings"); });
        if (settle == DiagnosticsService::Settle::kWaiting) {
          ++records_pending_;
          break;
        }
        if (settle == DiagnosticsService::Settle::kNeverSaved) {
          ok = false;
          what = "saving the findings";
        }
      }
      if (ok) {
        if (--it->waits == 0) --stats_.acks_waiting;
      } else {
        ForgetAcksLocked(static_cast<size_t>(
            it - acks_.begin()));  // not the front being written: that one was ready
        final_status_ = grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                     fmt::format("the exporter stopped before {}", what));
        reads_done_ = true;
      }
      break;
    }
    if (done_) {
      if (resume_scheduled_ || records_pending_ > 0) return;
      lock.unlock();
      delete this;
      return;
    }
    MaybeStartWriteLocked();
    MaybeFinishLocked();
  }

  // Drops the acks from the `from`th on, never to be sent (counting those that waited).
  void ForgetAcksLocked(size_t from) {
    for (size_t i = from; i < acks_.size(); ++i) {
      if (!acks_[i].ready()) --stats_.acks_waiting;
    }
    acks_.erase(acks_.begin() + static_cast<std::ptrdiff_t>(from), acks_.end());
  }

  // Writes the oldest ack once it may be sent: one write at a time, in order. When the next is
  // ready too, this one may wait in gRPC's buffer for it (buffer_hint): the acks of a busy
  // stream leave in one send instead of one each; the last of them goes out at once.
  void MaybeStartWriteLocked() {
    if (writing_ || finished_ || write_failed_ || acks_.empty() || !acks_.front().ready()) return;
    writing_ = true;
    grpc::WriteOptions options;
    if (acks_.size() > 1 && acks_[1].ready()) options.set_buffer_hint();
    StartWrite(&acks_.front().buffer, options);
  }

  void EnterShowOnlyLocked() {
    show_only_ = true;
    const auto now = SteadyClock::now();
    if (auto suppressed = service_.log_limiter().Admit("show only", now)) {
      spdlog::warn(
          "agent stream from {} (node \"{}\"): the recording cannot be written, so its reports "
          "are shown (/metrics, Watch, status page) but neither recorded nor acknowledged; the "
          "agent keeps them and sends them again once the recording works{}",
          peer_, LogSafe(node_),
          *suppressed == 0 ? "" : fmt::format(" ({} more streams)", *suppressed));
    }
  }

  // Ends the stream once the client is done and has every ack (even those still waiting for
  // the recorder), or at once when it went away; a stream that showed reports unrecorded once
  // the recording works again and its acks are sent, so that its agent sends them again.
  void MaybeFinishLocked() {
    if (finished_ || writing_) return;
    if (show_only_ && !read_outstanding_ && acks_.empty() && !service_.recording_failing() &&
        !write_failed_) {
      final_status_ = grpc::Status(
          grpc::StatusCode::UNAVAILABLE,
          fmt::format("{} report(s) from sequence {} on were shown but not recorded while the "
                      "exporter's recording could not be written: send them again",
                      shown_, first_shown_));
      reads_done_ = true;
    }
    if (write_failed_ || (reads_done_ && (acks_.empty() || cancelled_))) {
      finished_ = true;
      Finish(final_status_);
    }
  }

  bool NodeAllowed(const std::string& node) const {
    return std::find(cert_names_->begin(), cert_names_->end(), node) != cert_names_->end();
  }

  // Ends the stream after the acks already queued; the report is not applied.
  void DenyLocked() {
    stats_.CountRejected("node_name_mismatch");
    std::string names;
    for (const auto& n : *cert_names_) names += (names.empty() ? "\"" : ", \"") + n + "\"";
    if (names.empty()) names = "no name";
    const std::string message =
        "node \"" + request_->node() + "\" does not match the client certificate (" + names + ")";
    // One line per refused stream, at most one a second: a client cannot flood the log.
    static std::atomic<int64_t> last_log_s{0};
    static std::atomic<uint64_t> suppressed{0};
    const int64_t now_s = std::chrono::duration_cast<std::chrono::seconds>(
                              std::chrono::steady_clock::now().time_since_epoch())
                              .count();
    int64_t last = last_log_s.load();
    if (now_s > last && last_log_s.compare_exchange_strong(last, now_s)) {
      spdlog::warn("refused agent stream from {}: {}{}", peer_, message,
                   suppressed.load() == 0 ? ""
                                          : fmt::format(" ({} more refused streams not logged)",
                                                        suppressed.exchange(0)));
    } else {
      ++suppressed;
    }
    final_status_ = grpc::Status(grpc::StatusCode::PERMISSION_DENIED, message);
    reads_done_ = true;
    MaybeFinishLocked();
  }

  IngestService& service_;
  ExporterStats& stats_;
  const std::string peer_;
  // Set with mutual TLS: the names the client certificate vouches for.
  const std::optional<std::vector<std::string>> cert_names_;
  std::string node_;
  grpc::Status final_status_ = grpc::Status::OK;

  // One ack to send, in the order the reports were read.
  struct QueuedAck {
    grpc::ByteBuffer buffer;
    int waits = 0;                 // 1 while its report is being recorded or its findings saved
    uint64_t record_id = 0;        // which OnSettled() calls are for it
    uint64_t findings_ticket = 0;  // DiagnosticsService's, to be settled after the recording
    bool ready() const { return waits == 0; }
  };

  // Recursive: a Start* call may run the next reaction before it returns.
  std::recursive_mutex mu_;
  grpc::ByteBuffer raw_request_;
  std::string wire_;                                            // the last report read, as received
  std::shared_ptr<v1::NodeReport> request_ = NewArenaReport();  // the last report read
  std::deque<QueuedAck> acks_;  // front is being written; deque keeps it in place
  uint64_t last_record_id_ = 0;
  uint64_t records_pending_ = 0;  // OnSettled() calls still to come; they keep us alive
  bool writing_ = false;
  bool reads_done_ = false;
  bool read_outstanding_ = false;
  bool write_failed_ = false;
  bool finished_ = false;
  TokenBucket bucket_;
  bool resume_scheduled_ = false;  // Resume() is queued and owns the end of our life
  // Reading on while the recording fails: reports shown, not acknowledged (MaybeStartReadLocked).
  bool show_only_ = false;
  bool cancelled_ = false;    // OnCancel: no ack will reach the client
  uint64_t shown_ = 0;        // reports shown so
  uint64_t first_shown_ = 0;  // the first one's sequence
  bool throttled_ = false;    // logged once per stream
  bool done_ = false;
};

}  // namespace

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* IngestService::Stream(
    grpc::CallbackServerContext* context) {
  std::optional<std::vector<std::string>> cert_names;
  if (require_node_certificate_) cert_names = ClientCertificateNames(*context->auth_context());
  return new StreamReactor(*this, stats_, context->peer(), std::move(cert_names));
}

v1::Ack IngestService::Handle(std::shared_ptr<const v1::NodeReport> shared, const std::string& peer,
                              const Dropped& dropped, uint64_t* findings_ticket) {
  if (findings_ticket != nullptr) *findings_ticket = 0;
  const bool saves_findings = findings_ticket != nullptr && acks_wait_for_findings();
  const v1::NodeReport& report = *shared;
  v1::Ack ack;
  ack.set_sequence(report.sequence());
  const Clock::time_point now = Clock::now();
  std::shared_ptr<const v1::NodeReport> diagnosed = diagnostics_ ? shared : nullptr;
  const ApplyResult result = store_.Apply(std::move(shared), now);
  switch (result.outcome) {
    case ApplyOutcome::kApplied:
      ++stats_.reports_applied;
      ack.set_status(v1::Ack::STATUS_APPLIED);
      if (!dropped.empty()) CountDropped(report, dropped, peer);
      // Only applied reports: a duplicate re-sent after a reconnect must not count twice. Queued
      // for the diagnostics worker (or dropped and counted when it is behind): never waits.
      if (result.shown_before) {
        // Diagnosed and watched when it was shown: recorded now, its ack waits only for what
        // that changed to be saved (everything queued so far).
        if (saves_findings) *findings_ticket = diagnostics_->LastTicket();
      } else if (diagnosed) {
        const uint64_t ticket = diagnostics_->OnReport(std::move(diagnosed), result.index);
        if (saves_findings) *findings_ticket = ticket;
      }
      // One line per report for exactly-once checks; spdlog formats nothing unless debug is on.
      spdlog::debug("applied node={} instance={} seq={}", report.node(), report.agent_instance_id(),
                    report.sequence());
      break;
    case ApplyOutcome::kDuplicate:
      ++stats_.reports_duplicate;
      ack.set_status(v1::Ack::STATUS_DUPLICATE);
      // Its first copy's findings may still be on their way to disk, as its recording may.
      if (saves_findings) *findings_ticket = diagnostics_->LastTicket();
      spdlog::debug("duplicate node={} instance={} seq={}", report.node(),
                    report.agent_instance_id(), report.sequence());
      break;
    case ApplyOutcome::kRejected:
      return Reject(report, result.reason, peer);
  }
  return ack;
}

void IngestService::Show(std::shared_ptr<const v1::NodeReport> shared, const std::string& peer) {
  const v1::NodeReport& report = *shared;
  std::shared_ptr<const v1::NodeReport> diagnosed = diagnostics_ ? shared : nullptr;
  const ApplyResult result = store_.Show(std::move(shared), Clock::now());
  switch (result.outcome) {
    case ApplyOutcome::kApplied:
      ++stats_.reports_unrecorded;
      if (diagnosed) diagnostics_->OnReport(std::move(diagnosed), result.index, true);
      spdlog::debug("shown node={} instance={} seq={}", report.node(), report.agent_instance_id(),
                    report.sequence());
      break;
    case ApplyOutcome::kDuplicate:
      break;
    case ApplyOutcome::kRejected:
      Reject(report, result.reason, peer);
      break;
  }
}

void IngestService::CountDropped(const v1::NodeReport& report, const Dropped& dropped,
                                 const std::string& peer) {
  std::string what;
  for (const auto& [reason, n] : dropped) {
    stats_.CountDropped(reason, n);
    what += fmt::format("{}{} {}", what.empty() ? "" : ", ", n, reason);
  }
  // Once per node (a hostile client inventing node names is held to a line a minute per peer).
  constexpr size_t kMaxNodesLogged = 10'000;
  bool first = false;
  bool full = false;
  {
    std::lock_guard lock(dropped_logged_mu_);
    full = dropped_logged_.size() >= kMaxNodesLogged;
    if (!full) first = dropped_logged_.insert(report.node()).second;
  }
  const bool log =
      first || (full && log_limiter_.Admit(PeerHost(peer) + " trimmed", SteadyClock::now()));
  if (log) {
    spdlog::warn(
        "trimmed report {} from {} (node \"{}\") to the limits (docs/limits.md): dropped {}; "
        "its other parts are applied. Logged once per node; accelmon_exporter_ingest_dropped_total "
        "counts every time",
        report.sequence(), peer, LogSafe(report.node()), what);
  }
}

v1::Ack IngestService::Reject(const v1::NodeReport& report, const std::string& reason,
                              const std::string& peer) {
  stats_.CountRejected(reason);
  v1::Ack ack;
  ack.set_sequence(report.sequence());
  ack.set_status(v1::Ack::STATUS_REJECTED);
  ack.set_reason(reason);
  // A broken or hostile client may send many: at most a line a minute per peer and reason.
  if (auto suppressed = log_limiter_.Admit(PeerHost(peer) + " " + reason, SteadyClock::now())) {
    spdlog::warn("rejected report {} from {} (node \"{}\"): {}{}", report.sequence(), peer,
                 LogSafe(report.node()), reason,
                 *suppressed == 0 ? ""
                                  : fmt::format(" ({} more from this peer for this reason in the "
                                                "last minute not logged)",
                                                *suppressed));
  }
  return ack;
}

}  // namespace accelmon
