// The exporter's HTTP side, on civetweb: /metrics rendered by our own text renderer (with basic
// auth from the web config, and gzip when the scraper asks), the status page at / with its JSON
// (/api/v1/status, same auth), /healthz and /readyz. TLS is civetweb's.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "daemon/exporter/text_exposition.h"
#include "daemon/exporter/web_config.h"

struct mg_connection;
struct mg_context;
struct ssl_ctx_st;

namespace accelmon {

// Replaces `pieces` with the /metrics exposition (text format 0.0.4), in pieces to write one
// after the other, rendered into `sink` and valid until it renders again. Called from several
// server threads at once, each with a sink of its own taken from a small pool: a sink grows to
// a whole exposition, so one per worker thread (hundreds) would make most scrapes start cold.
using RenderMetricsFn =
    std::function<void(TextExpositionSink& sink, std::vector<std::string_view>& pieces)>;

// Replaces `out` with the status page's JSON (status_json.h); `node` asks for one node's devices.
using RenderStatusFn = std::function<void(std::string_view node, std::string& out)>;

// Reloads the configuration (POST /-/reload); returns why it failed, empty when it did not.
using ReloadFn = std::function<std::string()>;

// Why the exporter is not ready (/readyz answers 503 with it), empty when it is.
using ReadinessFn = std::function<std::string()>;

// What one client may hold. civetweb serves a connection on one worker thread from its first
// byte to its last, so a client that sends its request slowly holds a thread: the timeout frees
// it, and enough threads keep a scrape answered while scanners or broken proxies hold sockets.
struct HttpServerLimits {
  int max_connections = 256;                       // served at once (worker threads)
  std::chrono::milliseconds read_timeout{10'000};  // a request's header, and each response
};

class HttpServer {
 public:
  // Listens on `listen_address` ("0.0.0.0:9477", "127.0.0.1:0"), with TLS and basic auth on
  // /metrics and the status page as `web` says (/healthz and /readyz stay open). Throws
  // std::runtime_error with a one-line reason when it cannot. Until set_status, / is a plain page
  // of links.
  HttpServer(const std::string& listen_address, RenderMetricsFn render_metrics,
             const WebConfig& web = {}, const HttpServerLimits& limits = {});
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // The port actually bound (useful with port 0).
  int port() const;

  // A reload's web config: basic auth users, and the certificate and key (every handshake from
  // now on serves the new pair). Whether TLS is on, its minimum version and client
  // certificates need a restart: then nothing changes and the reason is returned.
  std::optional<std::string> Reconfigure(const WebConfig& web);

  // With `reload` set, POST (or PUT) /-/reload calls it, behind the same TLS and basic auth as
  // /metrics (Prometheus' --web.enable-lifecycle); unset, /-/reload answers 403.
  void set_reload(ReloadFn reload);

  // Serves the status page (/, its files, /api/v1/status) from `status`.
  void set_status(RenderStatusFn status);

  // /readyz answers 503 with the reason `ready` returns while it is not empty; unset: ready.
  void set_readiness(ReadinessFn ready);

  // Answers one request; civetweb's begin_request hook, on its worker threads. Returns the HTTP
  // status sent, or 0 to let civetweb answer (404).
  int HandleRequest(mg_connection* conn) const;

 private:
  bool Authorized(mg_connection* conn) const;
  int ServeMetrics(mg_connection* conn, bool head) const;

  int ServeReload(mg_connection* conn, std::string_view method) const;
  // /, the page's files and /api/v1/status; 0 when `uri` is none of them.
  int ServeStatusPage(mg_connection* conn, std::string_view uri, std::string_view method) const;
  std::shared_ptr<const WebConfig> web() const;

 public:
  // The certificate and key handshakes serve: the TLS context they were loaded into.
  using TlsIdentity = std::shared_ptr<::ssl_ctx_st>;
  TlsIdentity identity() const;

 private:
  const RenderMetricsFn render_metrics_;
  mutable std::mutex mu_;  // guards what a reload changes
  std::shared_ptr<const WebConfig> web_;
  TlsIdentity identity_;
  ReloadFn reload_;
  ReadinessFn readiness_;
  RenderStatusFn status_;
  mg_context* context_ = nullptr;
};

}  // namespace accelmon
