#include "daemon/agent/uplink.h"

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <deque>
#include <random>

#include "daemon/agent/ingest_stream.h"
#include "daemon/agent/rendezvous.h"
#include "daemon/agent/report_log.h"
#include "daemon/agent/spool.h"
#include "daemon/common/log_limiter.h"
#include "daemon/common/tls_probe.h"
#include "proto/time_format.h"

namespace accelmon {
namespace {

// How soon to look again at a better exporter whose channel a probe has just woken.
constexpr std::chrono::milliseconds kReprobeSoon{1000};
// Reports handed to the stream and not yet written (the one being written included).
constexpr size_t kWriteAhead = 2;
// Reports read from the book at a time.
constexpr size_t kReadBatch = 256;

}  // namespace

Uplink::Uplink(UplinkOptions options) : options_(std::move(options)) {
  const std::vector<std::string> addresses =
      options_.exporter_addresses.empty()
          ? std::vector<std::string>{options_.exporter_address}
          : RankByRendezvous(options_.node, options_.exporter_addresses);
  for (const auto& address : addresses) {
    grpc::ChannelArguments args;
    // One backoff: the channel's connection attempts follow ours (from min_backoff, growing to
    // max_backoff), and the agent starts its stream as soon as one succeeds (WaitToRetry).
    // gRPC's defaults (1 s growing to 120 s) on top of our waits made a 1 s outage cost 4-11 s.
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS,
                static_cast<int>(options_.min_backoff.count()));
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, static_cast<int>(options_.max_backoff.count()));
    args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 30'000);
    args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 10'000);
    // Keep pinging while no report is in flight (long --collect.interval); the exporter allows it.
    args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
    args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
    // No bandwidth-delay probing: a report a second never fills a flow-control window, and the
    // probes' pings and timers were two thirds of gRPC's wake-ups on an agent (bench/README.md).
    args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
    auto credentials = MakeChannelCredentials(options_.tls, args);
    Target target{.address = address,
                  .channel = grpc::CreateCustomChannel(address, credentials, args),
                  .stub = nullptr};
    target.stub = std::make_unique<grpc::GenericStub>(target.channel);
    targets_.push_back(std::move(target));
  }
  if (targets_.size() > 1) {
    std::string ranking;
    for (const auto& t : targets_) ranking += (ranking.empty() ? "" : ", ") + t.address;
    spdlog::info("exporters ranked for node \"{}\" by rendezvous hashing: {}", options_.node,
                 ranking);
  }
  if (options_.spool != nullptr) {
    log_ = options_.spool;
  } else {
    memory_ = std::make_unique<MemoryReportLog>(options_.max_pending);
    log_ = memory_.get();
  }
}

Uplink::~Uplink() { Stop(); }

void Uplink::Start() {
  thread_ = std::thread([this] { Run(); });
}

void Uplink::Stop() {
  {
    std::lock_guard lock(mu_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;  // the streaming thread cancels its stream
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Uplink::Submit(v1::NodeReport report) {
  log_->Append(std::make_shared<const v1::NodeReport>(std::move(report)));
  // Under the lock, so the streaming thread cannot miss it between its check and its wait.
  { std::lock_guard lock(mu_); }
  cv_.notify_all();
}

UplinkStats Uplink::stats() const {
  std::lock_guard lock(mu_);
  return UplinkStats{
      log_->unacknowledged(),    log_->dropped_reports(), acknowledged_, resent_.load(), connected_,
      targets_[current_].address};
}

bool Uplink::WaitUntilDrained(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return log_->unacknowledged() == 0; });
}

void Uplink::HandleAck(const v1::Ack& ack) {
  // Acks come in sending order: everything up to this sequence is settled.
  const bool advanced = ack.sequence() > log_->acknowledged();
  log_->Acknowledge(ack.sequence());
  {
    std::lock_guard lock(mu_);
    connected_ = true;
    if (advanced) ++acknowledged_;
  }
  if (ack.status() == v1::Ack::STATUS_REJECTED) {
    // Every report may be refused for the same reason: a line a minute per reason is enough.
    static LogLimiter limiter;
    if (auto suppressed = limiter.Admit(ack.reason(), std::chrono::steady_clock::now())) {
      spdlog::warn("exporter rejected report {}: {}{}", ack.sequence(), ack.reason(),
                   *suppressed == 0 ? ""
                                    : fmt::format(" ({} more rejected for this reason in the "
                                                  "last minute)",
                                                  *suppressed));
    }
  }
  cv_.notify_all();
}

// What one stream tells the uplink: its acks, and when it has room to write or takes no more.
class Uplink::StreamObserver final : public IngestStreamObserver {
 public:
  StreamObserver(Uplink& uplink, size_t target) : uplink_(uplink), target_(target) {}

  bool got_ack() const { return got_ack_.load(); }

  void OnAck(const v1::Ack& ack, const IngestSent& /*report*/) override {
    if (!got_ack_.exchange(true)) spdlog::info("connected to {}", uplink_.Describe(target_));
    uplink_.HandleAck(ack);
  }

  void OnWritable() override {
    // Under the lock, so the streaming thread cannot miss it between its check and its wait.
    { std::lock_guard lock(uplink_.mu_); }
    uplink_.cv_.notify_all();
  }

 private:
  Uplink& uplink_;
  const size_t target_;
  std::atomic<bool> got_ack_{false};
};

grpc::Status Uplink::StreamOnce(bool& got_ack) {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return grpc::Status::CANCELLED;
    return_to_.reset();
  }
  const size_t current = current_;
  StreamObserver observer(*this, current);
  IngestStream stream(*targets_[current].stub, &observer);

  // Send every unacknowledged report, in order, as the book has them. A few at a time are
  // handed to the stream, as it writes them.
  uint64_t sent_up_to = log_->acknowledged();
  std::deque<std::shared_ptr<const v1::NodeReport>> batch;
  auto next_probe = std::chrono::steady_clock::now() + options_.return_probe_interval;
  for (;;) {
    {
      std::unique_lock lock(mu_);
      const auto has_work = [&] {
        if (stopping_ || stream.over()) return true;
        if (stream.unwritten() >= kWriteAhead) return false;
        return !batch.empty() || log_->last_sequence() > sent_up_to;
      };
      if (current == 0) {
        cv_.wait(lock, has_work);
      } else {
        // Not on the best exporter: look at the better ones now and then while streaming.
        while (!cv_.wait_until(lock, next_probe, has_work)) {
          lock.unlock();
          bool connecting = false;
          const auto better = ReadyBetterTarget(connecting);
          lock.lock();
          if (better) {
            return_to_ = better;
            break;
          }
          // One just woken from idle is usually ready a moment later.
          next_probe = std::chrono::steady_clock::now() +
                       (connecting ? std::min(options_.return_probe_interval, kReprobeSoon)
                                   : options_.return_probe_interval);
        }
      }
      if (stopping_ || stream.over() || return_to_) break;
    }
    if (batch.empty()) {
      uint64_t scanned = 0;
      for (auto& r : log_->Read(sent_up_to, UINT64_MAX, kReadBatch, &scanned)) {
        batch.push_back(std::move(r));
      }
      if (batch.empty()) {
        sent_up_to = std::max(sent_up_to, scanned);  // nothing left there to send
        continue;
      }
    }
    const std::shared_ptr<const v1::NodeReport> next = std::move(batch.front());
    batch.pop_front();
    if (stream.TrySend(*next) != IngestStream::SendResult::kQueued) break;
    sent_up_to = next->sequence();
    if (sent_up_to <= highest_sent_) {
      ++resent_;
    } else {
      highest_sent_ = sent_up_to;
    }
  }

  // Cancel only to stop or move: a stream the exporter ended keeps its status (a refusal says
  // why).
  bool cancel = false;
  {
    std::lock_guard lock(mu_);
    cancel = stopping_ || return_to_.has_value();
  }
  if (cancel) {
    stream.Cancel();
  } else {
    stream.Close();
  }
  grpc::Status status = stream.Wait();
  got_ack = observer.got_ack();
  {
    std::lock_guard lock(mu_);
    connected_ = false;
  }
  return status;
}

std::optional<size_t> ParseMessageSizeLimit(const std::string& error_message) {
  constexpr std::string_view kPrefix = "larger than max (";
  const size_t at = error_message.find(kPrefix);
  if (at == std::string::npos) return std::nullopt;
  const size_t vs = error_message.find(" vs. ", at + kPrefix.size());
  if (vs == std::string::npos) return std::nullopt;
  size_t limit = 0;
  const char* begin = error_message.data() + vs + 5;
  const char* end = error_message.data() + error_message.size();
  const auto [ptr, ec] = std::from_chars(begin, end, limit);
  if (ec != std::errc() || ptr == begin || ptr == end || *ptr != ')') return std::nullopt;
  return limit;
}

// Re-sending a report the exporter can never take would break every stream from now on. The
// exporter reads a stream's reports in order, so it processed every report sent before the first
// one over its limit: settle up to that one as if acknowledged, and count it dropped.
void Uplink::DropTooLarge(const grpc::Status& status) {
  const auto limit = ParseMessageSizeLimit(status.error_message());
  if (!limit) return;
  std::shared_ptr<const v1::NodeReport> culprit;
  for (uint64_t from = log_->acknowledged(); culprit == nullptr;) {
    const auto chunk = log_->Read(from, UINT64_MAX, kReadBatch, nullptr);
    if (chunk.empty()) break;
    const auto big = std::find_if(chunk.begin(), chunk.end(),
                                  [&](const auto& r) { return r->ByteSizeLong() > *limit; });
    if (big != chunk.end()) culprit = *big;
    from = chunk.back()->sequence();
  }
  if (!culprit) {
    spdlog::warn(
        "exporter {} refused a report over its limit of {} bytes, but none pending is "
        "that large",
        targets_[current_].address, *limit);
    return;
  }
  const uint64_t sequence = culprit->sequence();
  log_->GiveUp(sequence);
  spdlog::error(
      "dropped report {} ({} bytes): the exporter {} takes at most {} bytes "
      "(--grpc.max-recv-msg-size); counted in accelmon_agent_dropped_reports_total",
      sequence, culprit->ByteSizeLong(), targets_[current_].address, *limit);
  { std::lock_guard lock(mu_); }
  cv_.notify_all();
}

std::string Uplink::Describe(size_t target) const {
  if (targets_.size() == 1) return "exporter " + targets_[target].address;
  return fmt::format("exporter {} (choice {} of {} for node \"{}\")", targets_[target].address,
                     target + 1, targets_.size(), options_.node);
}

std::optional<size_t> Uplink::ReadyBetterTarget(bool& connecting) {
  for (size_t i = 0; i < current_; ++i) {
    // Asking with try_to_connect wakes an idle channel: the probe costs one TCP (and TLS)
    // handshake, never a stream.
    const grpc_connectivity_state state = targets_[i].channel->GetState(true);
    if (state == GRPC_CHANNEL_READY) return i;
    if (state == GRPC_CHANNEL_IDLE || state == GRPC_CHANNEL_CONNECTING) connecting = true;
  }
  return std::nullopt;
}

void Uplink::FailOver(const grpc::Status& status, bool log) {
  const size_t from = current_;
  {
    std::lock_guard lock(mu_);
    current_ = (current_ + 1) % targets_.size();
  }
  if (log) {
    spdlog::warn("exporter {} unreachable: {}; failing over to {}", targets_[from].address,
                 status.error_message(), Describe(current_));
  } else {
    spdlog::debug("exporter {} unreachable: {}; trying {}", targets_[from].address,
                  status.error_message(), Describe(current_));
  }
}

void Uplink::Run() {
  std::mt19937_64 rng(std::random_device{}());
  auto backoff = options_.min_backoff;
  bool logged_unreachable = false;
  bool logged_refused = false;
  for (;;) {
    bool got_ack = false;
    const grpc::Status status = StreamOnce(got_ack);
    std::optional<size_t> return_to;
    {
      std::lock_guard lock(mu_);
      if (stopping_) return;
      return_to = return_to_;
    }
    const std::string& address = targets_[current_].address;
    if (return_to) {
      spdlog::info("leaving exporter {}: moving back to {}, reachable again", address,
                   Describe(*return_to));
      {
        std::lock_guard lock(mu_);
        current_ = *return_to;
      }
      backoff = options_.min_backoff;
      continue;  // at once: the better one is ready
    }
    const bool too_large = status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED;
    if (too_large) DropTooLarge(status);
    const size_t pending = stats().pending;
    const bool several = targets_.size() > 1;
    if (got_ack || too_large) {
      // The same exporter again first: most losses are a restart, and it keeps the node's state.
      backoff = options_.min_backoff;
      logged_unreachable = false;
      logged_refused = false;
      spdlog::warn("lost connection to exporter {}: {} ({} reports pending); reconnecting", address,
                   status.error_message(), pending);
    } else if (status.error_code() == grpc::StatusCode::PERMISSION_DENIED ||
               status.error_code() == grpc::StatusCode::UNAUTHENTICATED) {
      // Not a network problem (a certificate for another node): say so once, retry quietly.
      if (!logged_refused) {
        spdlog::error("exporter {} refused this agent: {}; retrying with backoff up to {}", address,
                      status.error_message(), FormatPrometheusDuration(options_.max_backoff));
      }
      logged_refused = true;
      if (several) FailOver(status, false);
    } else if (several) {
      if (!logged_unreachable) ExplainTlsFailure(address, status);
      FailOver(status, !logged_unreachable);
      logged_unreachable = true;
    } else if (!logged_unreachable) {
      logged_unreachable = true;
      spdlog::warn("exporter {} unreachable: {}; retrying with backoff up to {}", address,
                   status.error_message(), FormatPrometheusDuration(options_.max_backoff));
      ExplainTlsFailure(address, status);
    } else {
      spdlog::debug("exporter {} still unreachable ({} reports pending): {}", address, pending,
                    status.error_message());
    }
    // Full jitter: spreads the reconnects of a whole fleet after an exporter restart.
    const auto wait = std::chrono::milliseconds(
        std::uniform_int_distribution<int64_t>(backoff.count() / 2, backoff.count())(rng));
    backoff = std::min(options_.max_backoff, backoff * 2);
    if (WaitToRetry(wait)) return;
  }
}

void Uplink::ExplainTlsFailure(const std::string& address, const grpc::Status& status) const {
  if (!options_.tls.enabled || !LooksLikeTlsFailure(status.error_message())) return;
  if (auto why = ProbeTls(address, options_.tls, std::chrono::seconds(2))) {
    spdlog::error("TLS with exporter {} fails: {}", address, *why);
  }
}

bool Uplink::WaitToRetry(std::chrono::milliseconds wait) {
  const auto deadline = std::chrono::steady_clock::now() + wait;
  grpc::Channel& channel = *targets_[current_].channel;
  if (channel.GetState(false) == GRPC_CHANNEL_READY) {
    // Connected, yet the stream failed (a refusal): wait the whole step.
    std::unique_lock lock(mu_);
    return cv_.wait_until(lock, deadline, [&] { return stopping_; });
  }
  // Not connected: gRPC's channel tries to connect on the same schedule as ours (see the
  // constructor), and the stream starts as soon as it has, not at the end of the step.
  for (;;) {
    {
      std::lock_guard lock(mu_);
      if (stopping_) return true;
    }
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return false;
    const auto slice = std::min<std::chrono::steady_clock::duration>(deadline - now,
                                                                     std::chrono::milliseconds(50));
    if (channel.WaitForConnected(std::chrono::system_clock::now() + slice)) return false;
  }
}

}  // namespace accelmon
