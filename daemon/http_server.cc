#include "daemon/http_server.h"

#include <CivetServer.h>
#include <civetweb.h>
#include <prometheus/exposer.h>

#include <stdexcept>
#include <string_view>

namespace accelmon {
namespace {

constexpr std::string_view kLandingPage =
    "<html><head><title>accelmon</title></head><body>"
    "<h1>accelmon exporter</h1>"
    "<p><a href=\"/metrics\">Metrics</a> &middot; <a href=\"/healthz\">Health</a></p>"
    "</body></html>\n";

int Reply(mg_connection* conn, std::string_view content_type, std::string_view body) {
  mg_printf(conn,
            "HTTP/1.1 200 OK\r\nContent-Type: %.*s\r\nContent-Length: %zu\r\n"
            "Cache-Control: no-store\r\nConnection: close\r\n\r\n",
            static_cast<int>(content_type.size()), content_type.data(), body.size());
  mg_write(conn, body.data(), body.size());
  return 200;  // non-zero: handled here, civetweb does nothing more
}

// Runs for every request before civetweb's URI handlers (the Exposer's /metrics).
int BeginRequest(mg_connection* conn) {
  const mg_request_info* info = mg_get_request_info(conn);
  const std::string_view uri = info->local_uri != nullptr ? info->local_uri : "";
  if (uri == "/healthz") return Reply(conn, "text/plain", "ok\n");
  // Ready once constructed: the gRPC server starts before the HTTP side.
  if (uri == "/readyz") return Reply(conn, "text/plain", "ready\n");
  if (uri == "/") return Reply(conn, "text/html; charset=utf-8", kLandingPage);
  return 0;
}

}  // namespace

HttpServer::HttpServer(const std::string& listen_address,
                       std::weak_ptr<prometheus::Collectable> metrics) {
  static const CivetCallbacks callbacks = [] {
    CivetCallbacks c;  // its constructor zeroes every callback
    c.begin_request = BeginRequest;
    return c;
  }();
  try {
    exposer_ = std::make_unique<prometheus::Exposer>(
        std::vector<std::string>{"listening_ports", listen_address, "num_threads", "4"},
        &callbacks);
  } catch (const std::exception& e) {
    throw std::runtime_error("cannot listen for HTTP on " + listen_address +
                             " (address in use or not available on this host)");
  }
  exposer_->RegisterCollectable(metrics);
}

HttpServer::~HttpServer() = default;

int HttpServer::port() const {
  const auto ports = exposer_->GetListeningPorts();
  return ports.empty() ? 0 : ports.front();
}

}  // namespace accelmon
