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
    const v1::Ack ack = unparseable.empty() ? service_.Handle(request_, peer_, dropped)
                                            : service_.Reject(*request_, unparseable, peer_);
    if (node_.empty() && ack.status() != v1::Ack::STATUS_REJECTED) node_ = request_->node();
    QueuedAck& queued = acks_.emplace_back();
    bool own = false;
    grpc::SerializationTraits<v1::Ack>::Serialize(ack, &queued.buffer, &own);
    const bool applied = ack.status() == v1::Ack::STATUS_APPLIED;
    if ((applied || ack.status() == v1::Ack::STATUS_DUPLICATE) && service_.recorder() != nullptr) {
      // Acknowledged once recorded; a duplicate once everything before it is (its first copy
      // may still be waiting for a disk that is full). The callback may run inside Append (a
      // stopped recorder): the ack is queued first, and the mutex is recursive.
      queued.ready = false;
      queued.record_id = ++last_record_id_;
      ++records_pending_;
      auto on_recorded = [this, id = queued.record_id](bool recorded) { OnRecorded(id, recorded); };
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
      // recorded find their acks gone (OnRecorded).
      acks_.clear();
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
    // Resume() or the last OnRecorded() deletes us.
    if (resume_scheduled_ || records_pending_ > 0) return;
    lock.unlock();
    delete this;
  }

  void OnCancel() override {
    std::lock_guard lock(mu_);
    // A throttled stream has no read outstanding to fail and end it: end it now.
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
    if (acks_.size() >= kMaxQueuedAcks) return;
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
      if (records_pending_ > 0) return;  // the last OnRecorded() deletes us
      lock.unlock();
      delete this;
      return;
    }
    MaybeStartReadLocked();
  }

  // On the recorder's thread, once the report of ack `record_id` is recorded, or the recorder
  // stopped without recording it: then neither its ack nor any after it is sent (the agent keeps
  // them in its spool and sends them again), and the stream ends.
  void OnRecorded(uint64_t record_id, bool recorded) {
    std::unique_lock lock(mu_);
    --records_pending_;
    for (auto it = acks_.begin(); it != acks_.end(); ++it) {
      if (it->record_id != record_id) continue;
      if (recorded) {
        it->ready = true;
      } else {
        acks_.erase(it, acks_.end());  // not the front being written: that one was ready
        final_status_ =
            grpc::Status(grpc::StatusCode::UNAVAILABLE, "the exporter stopped before recording");
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

  // Writes the oldest ack once it may be sent: one write at a time, in order. When the next is
  // ready too, this one may wait in gRPC's buffer for it (buffer_hint): the acks of a busy
  // stream leave in one send instead of one each; the last of them goes out at once.
  void MaybeStartWriteLocked() {
    if (writing_ || finished_ || write_failed_ || acks_.empty() || !acks_.front().ready) return;
    writing_ = true;
    grpc::WriteOptions options;
    if (acks_.size() > 1 && acks_[1].ready) options.set_buffer_hint();
    StartWrite(&acks_.front().buffer, options);
  }

  // Ends the stream once the client is done and has every ack (even those still waiting for
  // the recorder), or at once when it went away.
  void MaybeFinishLocked() {
    if (finished_ || writing_) return;
    if (write_failed_ || (reads_done_ && acks_.empty())) {
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
    bool ready = true;       // false while its report is being recorded
    uint64_t record_id = 0;  // which OnRecorded() readies it; 0: not recorded
  };

  // Recursive: a Start* call may run the next reaction before it returns.
  std::recursive_mutex mu_;
  grpc::ByteBuffer raw_request_;
  std::string wire_;                                            // the last report read, as received
  std::shared_ptr<v1::NodeReport> request_ = NewArenaReport();  // the last report read
  std::deque<QueuedAck> acks_;  // front is being written; deque keeps it in place
  uint64_t last_record_id_ = 0;
  uint64_t records_pending_ = 0;  // OnRecorded() calls still to come; they keep us alive
  bool writing_ = false;
  bool reads_done_ = false;
  bool read_outstanding_ = false;
  bool write_failed_ = false;
  bool finished_ = false;
  TokenBucket bucket_;
  bool resume_scheduled_ = false;  // Resume() is queued and owns the end of our life
  bool throttled_ = false;         // logged once per stream
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
                              const Dropped& dropped) {
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
      if (diagnosed) diagnostics_->OnReport(std::move(diagnosed), result.index);
      // One line per report for exactly-once checks; spdlog formats nothing unless debug is on.
      spdlog::debug("applied node={} instance={} seq={}", report.node(), report.agent_instance_id(),
                    report.sequence());
      break;
    case ApplyOutcome::kDuplicate:
      ++stats_.reports_duplicate;
      ack.set_status(v1::Ack::STATUS_DUPLICATE);
      spdlog::debug("duplicate node={} instance={} seq={}", report.node(),
                    report.agent_instance_id(), report.sequence());
      break;
    case ApplyOutcome::kRejected:
      return Reject(report, result.reason, peer);
  }
  return ack;
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
