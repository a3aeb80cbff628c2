// The central exporter: gRPC ingest from agents -> state -> Prometheus /metrics.
#pragma once

#include <grpcpp/server.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "daemon/common/tls.h"
#include "daemon/exporter/diagnostics_service.h"
#include "daemon/exporter/exporter_stats.h"
#include "daemon/exporter/http_server.h"
#include "daemon/exporter/node_store.h"
#include "daemon/exporter/web_config.h"
#include "recording/recorder.h"

namespace accelmon {

// The open findings beside the recording (diagnostics_service.h, DiagnosticsOptions).
inline constexpr const char* kFindingsStateFile = "findings.state";

class HttpServer;
class IngestService;
class QueryService;
class StateRenderer;
class StatusRenderer;

struct ExporterOptions {
  std::string web_listen_address = "0.0.0.0:9477";   // HTTP /metrics, /healthz
  std::string grpc_listen_address = "0.0.0.0:9478";  // agent streams
  std::chrono::milliseconds node_expire_after = std::chrono::minutes(10);
  ValidationLimits limits{};           // what a report may contain
  int max_recv_msg_size = 1 << 20;     // bytes; a larger report ends its stream
  double max_reports_per_second = 50;  // per stream; faster streams are read more slowly
  GrpcServerTls grpc_tls{};            // plain text unless set
  WebConfig web_config{};              // TLS and basic auth for /metrics
  HttpServerLimits web_limits{};       // what one HTTP client may hold
  // The flight recorder (--record.*): every applied report is recorded, and acknowledged only
  // once written. Off when absent.
  std::optional<recording::RecorderOptions> recording{};
  // The diagnostics rules' thresholds (--diagnostics.config); nullopt: --no-diagnostics.
  std::optional<diagnostics::Config> diagnostics = diagnostics::Config{};
  std::string diagnostics_config_file{};  // for the log; empty: built-in defaults
};

class Exporter {
 public:
  explicit Exporter(ExporterOptions options);
  ~Exporter();

  // Opens the recording (when configured), binds both ports and starts serving. Throws
  // std::runtime_error with a one-line reason.
  void Start();
  // Start() for a command: false, with the reason logged, when it cannot start (a port in use, a
  // recording that cannot be opened), which the command exits 1 for.
  bool StartOrLog();
  // Stops accepting, ends open streams, closes the recording, and stops serving HTTP.
  void Stop();

  // A reload, once started: applies what may change live from `next` (node expiry, limits, the
  // per-stream read rate, the web config's basic auth and certificate, the diagnostics
  // thresholds) and ignores the rest, which the caller compares itself. When the web config
  // cannot change live, nothing changes and the reason is returned.
  std::optional<std::string> Reconfigure(const ExporterOptions& next);
  // POST /-/reload calls `reload` (--web.enable-lifecycle); unset, it answers 403.
  void set_reload(std::function<std::string()> reload);

  int grpc_port() const { return grpc_port_; }
  int web_port() const;
  NodeStore& store() { return store_; }
  ExporterStats& stats() { return stats_; }
  // Set once started.
  DiagnosticsService* diagnostics() { return diagnostics_.get(); }
  QueryService* query() { return query_.get(); }

 private:
  void StartRecording();
  // From the recording: every node's latest report and the open findings.
  void RestoreState(Clock::time_point now);

  ExporterOptions options_;
  NodeStore store_;
  ExporterStats stats_;
  std::unique_ptr<recording::Recorder> recorder_;    // outlives the streams that append to it
  std::unique_ptr<DiagnosticsService> diagnostics_;  // outlives the streams that feed it
  std::unique_ptr<IngestService> service_;
  std::unique_ptr<QueryService> query_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<StateRenderer> renderer_;  // outlives http_, which calls it
  std::unique_ptr<StatusRenderer> status_;   // the same
  std::unique_ptr<HttpServer> http_;
  int grpc_port_ = 0;
};

}  // namespace accelmon
