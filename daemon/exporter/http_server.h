// The exporter's HTTP side, on civetweb: /metrics rendered by our own text renderer (with basic
// auth from the web config, and gzip when the scraper asks), /healthz, /readyz and a landing
// page. TLS is civetweb's.
#pragma once

#include <functional>
#include <string>

#include "daemon/exporter/web_config.h"

struct mg_connection;
struct mg_context;

namespace accelmon {

// Replaces `out` with the /metrics exposition (text format 0.0.4). Called from several server
// threads at once.
using RenderMetricsFn = std::function<void(std::string& out)>;

class HttpServer {
 public:
  // Listens on `listen_address` ("0.0.0.0:9477", "127.0.0.1:0"), with TLS and basic auth on
  // /metrics as `web` says (/healthz, /readyz and / stay open). Throws std::runtime_error with
  // a one-line reason when it cannot.
  HttpServer(const std::string& listen_address, RenderMetricsFn render_metrics,
             const WebConfig& web = {});
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // The port actually bound (useful with port 0).
  int port() const;

  // Answers one request; civetweb's begin_request hook, on its worker threads. Returns the HTTP
  // status sent, or 0 to let civetweb answer (404).
  int HandleRequest(mg_connection* conn) const;

 private:
  bool Authorized(mg_connection* conn) const;
  int ServeMetrics(mg_connection* conn, bool head) const;

  const WebConfig web_;
  const RenderMetricsFn render_metrics_;
  mg_context* context_ = nullptr;
};

}  // namespace accelmon
