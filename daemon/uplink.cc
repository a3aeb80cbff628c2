#include "daemon/uplink.h"

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <spdlog/spdlog.h>

#include <random>

namespace accelmon {

Uplink::Uplink(UplinkOptions options) : options_(std::move(options)) {
  grpc::ChannelArguments args;
  // Reconnect attempts are paced by our own backoff; keep gRPC's from adding long waits.
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, static_cast<int>(options_.max_backoff.count()));
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 30'000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 10'000);
  channel_ = grpc::CreateCustomChannel(options_.exporter_address,
                                       grpc::InsecureChannelCredentials(), args);
  stub_ = v1::Ingest::NewStub(channel_);
}

Uplink::~Uplink() { Stop(); }

void Uplink::Start() {
  thread_ = std::thread([this] { Run(); });
}

void Uplink::Stop() {
  {
    std::lock_guard lock(mu_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
    if (active_context_ != nullptr) active_context_->TryCancel();
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Uplink::Submit(v1::NodeReport report) {
  auto shared = std::make_shared<const v1::NodeReport>(std::move(report));
  {
    std::lock_guard lock(mu_);
    if (pending_.size() >= options_.max_pending && !pending_.empty()) {
      pending_.pop_front();
      ++dropped_;
    }
    pending_.push_back(std::move(shared));
  }
  cv_.notify_all();
}

UplinkStats Uplink::stats() const {
  std::lock_guard lock(mu_);
  return {pending_.size(), dropped_, acknowledged_, connected_};
}

bool Uplink::WaitUntilDrained(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return pending_.empty(); });
}

void Uplink::HandleAck(const v1::Ack& ack) {
  {
    std::lock_guard lock(mu_);
    connected_ = true;
    // Acks come in sending order: everything up to this sequence is settled.
    while (!pending_.empty() && pending_.front()->sequence() <= ack.sequence()) {
      pending_.pop_front();
      ++acknowledged_;
    }
  }
  if (ack.status() == v1::Ack::STATUS_REJECTED) {
    spdlog::warn("exporter rejected report {}: {}", ack.sequence(), ack.reason());
  }
  cv_.notify_all();
}

grpc::Status Uplink::StreamOnce(bool& got_ack) {
  grpc::ClientContext context;
  {
    std::lock_guard lock(mu_);
    if (stopping_) return grpc::Status::CANCELLED;
    active_context_ = &context;
  }
  auto stream = stub_->Stream(&context);

  bool reader_done = false;
  std::thread reader([&] {
    v1::Ack ack;
    while (stream->Read(&ack)) {
      if (!got_ack) {
        got_ack = true;
        spdlog::info("connected to exporter {}", options_.exporter_address);
      }
      HandleAck(ack);
    }
    std::lock_guard lock(mu_);
    reader_done = true;
    cv_.notify_all();
  });

  // Send every pending report after the last one sent on this stream, in order.
  uint64_t sent_up_to = 0;
  for (;;) {
    std::shared_ptr<const v1::NodeReport> next;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] {
        return stopping_ || reader_done ||
               (!pending_.empty() && pending_.back()->sequence() > sent_up_to);
      });
      if (stopping_ || reader_done) break;
      for (const auto& r : pending_) {
        if (r->sequence() > sent_up_to) {
          next = r;
          break;
        }
      }
    }
    if (!stream->Write(*next)) break;
    sent_up_to = next->sequence();
  }

  context.TryCancel();
  reader.join();
  grpc::Status status = stream->Finish();
  {
    std::lock_guard lock(mu_);
    active_context_ = nullptr;
    connected_ = false;
  }
  return status;
}

void Uplink::Run() {
  std::mt19937_64 rng(std::random_device{}());
  auto backoff = options_.min_backoff;
  bool logged_unreachable = false;
  for (;;) {
    bool got_ack = false;
    const grpc::Status status = StreamOnce(got_ack);
    {
      std::lock_guard lock(mu_);
      if (stopping_) return;
    }
    const size_t pending = stats().pending;
    if (got_ack) {
      backoff = options_.min_backoff;
      logged_unreachable = false;
      spdlog::warn("lost connection to exporter {}: {} ({} reports pending); reconnecting",
                   options_.exporter_address, status.error_message(), pending);
    } else if (!logged_unreachable) {
      logged_unreachable = true;
      spdlog::warn("exporter {} unreachable: {}; retrying with backoff up to {}ms",
                   options_.exporter_address, status.error_message(), options_.max_backoff.count());
    } else {
      spdlog::debug("exporter {} still unreachable ({} reports pending)", options_.exporter_address,
                    pending);
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
