#include "daemon/exporter.h"

#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>
#include <spdlog/spdlog.h>

#include <stdexcept>

#include "daemon/http_server.h"
#include "daemon/ingest_service.h"
#include "daemon/metrics_renderer.h"

namespace accelmon {

Exporter::Exporter(ExporterOptions options)
    : options_(std::move(options)), store_(options_.node_expire_after, options_.limits) {}

Exporter::~Exporter() { Stop(); }

void Exporter::Start() {
  RouteProtobufLogsToSpdlog();  // a client sending bad UTF-8 must not flood the log
  service_ = std::make_unique<IngestService>(store_, stats_);
  service_->set_max_reports_per_second(options_.max_reports_per_second);
  // With mutual TLS, a report's node must be one the client certificate names.
  service_->set_require_node_certificate(options_.grpc_tls.mutual());
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options_.grpc_listen_address, MakeServerCredentials(options_.grpc_tls),
                           &grpc_port_);
  builder.RegisterService(service_.get());
  // gRPC ends a stream that sends more with RESOURCE_EXHAUSTED before we see the message.
  builder.SetMaxReceiveMessageSize(options_.max_recv_msg_size);
  // Keepalive that agrees with the agents' (a ping every 30 s, see uplink.cc): accept their pings
  // even on a stream that is quiet between long collection intervals, instead of answering
  // GOAWAY "too_many_pings"; and ping them ourselves so a vanished node frees its stream.
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 20'000);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, 60'000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 20'000);
  server_ = builder.BuildAndStart();
  if (!server_ || grpc_port_ == 0) {
    server_.reset();
    throw std::runtime_error("cannot listen for gRPC on " + options_.grpc_listen_address +
                             " (address in use or not available on this host)");
  }

  collectable_ = std::make_shared<StateCollectable>(store_, stats_);
  http_ =
      std::make_unique<HttpServer>(options_.web_listen_address, collectable_, options_.web_config);
  spdlog::info("exporter: ingest on {} (port {}), metrics on {} (port {})",
               options_.grpc_listen_address, grpc_port_, options_.web_listen_address,
               http_->port());
  spdlog::info("exporter: ingest {}, /metrics {}{}",
               options_.grpc_tls.mutual()    ? "mutual TLS"
               : options_.grpc_tls.enabled() ? "TLS"
                                             : "plain text",
               options_.web_config.tls ? "HTTPS" : "plain HTTP",
               options_.web_config.basic_auth_users.empty() ? "" : " with basic auth");
}

void Exporter::Stop() {
  if (server_) {
    // Open agent streams are cancelled after a short grace period.
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
    server_->Wait();
    server_.reset();
  }
  http_.reset();
}

int Exporter::web_port() const { return http_ ? http_->port() : 0; }

}  // namespace accelmon
