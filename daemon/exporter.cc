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
    : options_(std::move(options)), store_(options_.node_expire_after) {}

Exporter::~Exporter() { Stop(); }

void Exporter::Start() {
  service_ = std::make_unique<IngestService>(store_, stats_);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options_.grpc_listen_address, grpc::InsecureServerCredentials(),
                           &grpc_port_);
  builder.RegisterService(service_.get());
  server_ = builder.BuildAndStart();
  if (!server_ || grpc_port_ == 0) {
    server_.reset();
    throw std::runtime_error("cannot listen for gRPC on " + options_.grpc_listen_address +
                             " (address in use or not available on this host)");
  }

  collectable_ = std::make_shared<StateCollectable>(store_, stats_);
  http_ = std::make_unique<HttpServer>(options_.web_listen_address, collectable_);
  spdlog::info("exporter: ingest on {} (port {}), metrics on {} (port {})",
               options_.grpc_listen_address, grpc_port_, options_.web_listen_address,
               http_->port());
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
