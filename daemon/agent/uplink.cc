#include "daemon/agent/uplink.h"

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <random>

#include "daemon/agent/rendezvous.h"
#include "daemon/agent/spool.h"
#include "daemon/common/ingest_stream.h"
#include "daemon/common/log_limiter.h"
#include "proto/time_format.h"

namespace accelmon {
namespace {

// How soon to look again at a better exporter whose channel a probe has just woken.
constexpr std::chrono::milliseconds kReprobeSoon{1000};
// Reports handed to the stream and not yet written (the one being written included).
constexpr size_t kWriteAhead = 2;

}  // namespace

Uplink::Uplink(UplinkOptions options) : options_(std::move(options)) {
  const std::vector<std::string> addresses =
      options_.exporter_addresses.empty()
          ? std::vector<std::string>{options_.exporter_address}
          : RankByRendezvous(options_.node, options_.exporter_addresses);
  for (const auto& address : addresses) {
    grpc::ChannelArguments args;
    // Reconnect attempts are paced by our own backoff; keep gRPC's from adding long waits.
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, static_cast<int>(options_.max_backoff.count()));
    args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 30'000);
    args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 10'000);
    // Keep pinging while no report is in flight (long --collect.interval); the exporter allows it.
    args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
    args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
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
  if (options_.spool != nullptr) acked_sequence_ = options_.spool->acknowledged();
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
  Spool* const spool = options_.spool;
  const bool spooled = spool != nullptr && spool->Append(report);
  auto shared = std::make_shared<const v1::NodeReport>(std::move(report));
  {
    std::lock_guard lock(mu_);
    if (spool != nullptr) {
      // What the spool dropped for room (and counted) goes from memory too.
      const uint64_t gone = spool->dropped_through();
      while (!pending_.empty() && pending_.front()->sequence() <= gone) {
        if (unspooled_.erase(pending_.front()->sequence()) > 0) ++dropped_;
        pending_.pop_front();
      }
    }
    if (pending_.size() >= options_.max_pending && !pending_.empty()) {
      // A spooled report stays on disk and is read back from there when its turn comes.
      if (spool == nullptr || unspooled_.erase(pending_.front()->sequence()) > 0) ++dropped_;
      pending_.pop_front();
    }
    if (spool != nullptr && !spooled) unspooled_.insert(shared->sequence());
    pending_.push_back(std::move(shared));
  }
  cv_.notify_all();
}

UplinkStats Uplink::stats() const {
  std::lock_guard lock(mu_);
  UplinkStats s{pending_.size(), dropped_, acknowledged_, connected_, targets_[current_].address};
  if (options_.spool != nullptr) {
    s.pending = std::max<uint64_t>(s.pending, options_.spool->unacknowledged());
    s.dropped += options_.spool->dropped_reports();
  }
  return s;
}

bool Uplink::WaitUntilDrained(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, timeout, [&] {
    return pending_.empty() &&
           (options_.spool == nullptr || options_.spool->last_sequence() <= acked_sequence_);
  });
}

void Uplink::HandleAck(const v1::Ack& ack) {
  {
    std::lock_guard lock(mu_);
    connected_ = true;
    if (ack.sequence() > acked_sequence_) {
      acked_sequence_ = ack.sequence();
      ++acknowledged_;
    }
    // Acks come in sending order: everything up to this sequence is settled.
    while (!pending_.empty() && pending_.front()->sequence() <= ack.sequence()) {
      unspooled_.erase(pending_.front()->sequence());
      pending_.pop_front();
    }
  }
  if (options_.spool != nullptr) options_.spool->Acknowledge(ack.sequence());
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

  // Send every unacknowledged report, in order: from memory, or from the spool for those memory
  // no longer (or never) held. A few at a time are handed to the stream, as it writes them.
  Spool* const spool = options_.spool;
  uint64_t sent_up_to = 0;
  {
    std::lock_guard lock(mu_);
    sent_up_to = acked_sequence_;
  }
  std::deque<std::shared_ptr<const v1::NodeReport>> from_spool;
  auto next_probe = std::chrono::steady_clock::now() + options_.return_probe_interval;
  for (;;) {
    std::shared_ptr<const v1::NodeReport> next;
    {
      std::unique_lock lock(mu_);
      const auto has_work = [&] {
        if (stopping_ || stream.over()) return true;
        if (stream.unwritten() >= kWriteAhead) return false;
        return !from_spool.empty() ||
               (!pending_.empty() && pending_.back()->sequence() > sent_up_to) ||
               (spool != nullptr && spool->last_sequence() > sent_up_to);
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
      if (from_spool.empty()) {
        for (const auto& r : pending_) {
          if (r->sequence() > sent_up_to) {
            next = r;
            break;
          }
        }
      }
    }
    if (from_spool.empty() && spool != nullptr &&
        (next == nullptr || next->sequence() > sent_up_to + 1)) {
      uint64_t scanned = 0;
      const uint64_t before = next ? next->sequence() : UINT64_MAX;
      for (auto& r : spool->Read(sent_up_to, before, 256, &scanned)) {
        from_spool.push_back(std::move(r));
      }
      if (from_spool.empty() && next == nullptr) {
        sent_up_to = std::max(sent_up_to, scanned);  // nothing left there to send
        continue;
      }
    }
    if (!from_spool.empty()) {
      next = std::move(from_spool.front());
      from_spool.pop_front();
    }
    if (stream.TrySend(*next) != IngestStream::SendResult::kQueued) break;
    sent_up_to = next->sequence();
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
  uint64_t after = 0;
  std::shared_ptr<const v1::NodeReport> culprit;
  {
    std::lock_guard lock(mu_);
    after = acked_sequence_;
    for (const auto& r : pending_) {
      if (r->sequence() > after && r->ByteSizeLong() > *limit) {
        culprit = r;
        break;
      }
    }
  }
  // Reports between the acknowledged one and memory's oldest are only in the spool.
  if (Spool* const spool = options_.spool; spool != nullptr) {
    uint64_t before = 0;
    {
      std::lock_guard lock(mu_);
      before = pending_.empty() ? UINT64_MAX : pending_.front()->sequence();
    }
    if (culprit) before = std::min(before, culprit->sequence());
    for (uint64_t from = after; from + 1 < before;) {
      uint64_t scanned = 0;
      const auto chunk = spool->Read(from, before, 256, &scanned);
      const auto big = std::find_if(chunk.begin(), chunk.end(),
                                    [&](const auto& r) { return r->ByteSizeLong() > *limit; });
      if (big != chunk.end()) {
        culprit = *big;
        break;
      }
      if (chunk.empty() || scanned <= from) break;
      from = std::max(scanned, chunk.back()->sequence());
    }
  }
  if (!culprit) {
    spdlog::warn(
        "exporter {} refused a report over its limit of {} bytes, but none pending is "
        "that large",
        targets_[current_].address, *limit);
    return;
  }
  const uint64_t sequence = culprit->sequence();
  {
    std::lock_guard lock(mu_);
    acked_sequence_ = std::max(acked_sequence_, sequence);
    ++dropped_;
    while (!pending_.empty() && pending_.front()->sequence() <= sequence) {
      unspooled_.erase(pending_.front()->sequence());
      pending_.pop_front();
    }
  }
  if (options_.spool != nullptr) options_.spool->Acknowledge(sequence);
  spdlog::error(
      "dropped report {} ({} bytes): the exporter {} takes at most {} bytes "
      "(--grpc.max-recv-msg-size); counted in accelmon_agent_dropped_reports_total",
      sequence, culprit->ByteSizeLong(), targets_[current_].address, *limit);
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
      FailOver(status, !logged_unreachable);
      logged_unreachable = true;
    } else if (!logged_unreachable) {
      logged_unreachable = true;
      spdlog::warn("exporter {} unreachable: {}; retrying with backoff up to {}", address,
                   status.error_message(), FormatPrometheusDuration(options_.max_backoff));
    } else {
      spdlog::debug("exporter {} still unreachable ({} reports pending)", address, pending);
    }
    // Full jitter: spreads the reconnects of a whole fleet after an exporter restart.
    const auto wait = std::chrono::milliseconds(
        std::uniform_int_distribution<int64_t>(backoff.count() / 2, backoff.count())(rng));
    backoff = std::min(options_.max_backoff, backoff * 2);
    std::unique_lock lock(mu_);
    if (cv_.wait_for(lock, wait, [&] { return stopping_; })) return;
  }
}

}  // namespace accelmon
