#include "daemon/exporter/exporter.h"

#include <fmt/ranges.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>
#include <spdlog/spdlog.h>

#include <stdexcept>

#include "daemon/common/flags.h"
#include "daemon/exporter/http_server.h"
#include "daemon/exporter/ingest_service.h"
#include "daemon/exporter/metrics_renderer.h"
#include "daemon/exporter/query_service.h"
#include "daemon/exporter/status_json.h"
#include "proto/time_format.h"

namespace accelmon {

Exporter::Exporter(ExporterOptions options)
    : options_(std::move(options)), store_(options_.node_expire_after, options_.limits) {}

Exporter::~Exporter() { Stop(); }

bool Exporter::StartOrLog() {
  try {
    Start();
    return true;
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    return false;
  }
}

void Exporter::Start() {
  RouteProtobufLogsToSpdlog();  // a client sending bad UTF-8 must not flood the log
  stats_.config_reload_success_seconds =
      std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
  service_ = std::make_unique<IngestService>(store_, stats_);
  DiagnosticsOptions diagnostics{.config = options_.diagnostics,
                                 .config_file = options_.diagnostics_config_file};
  if (options_.recording) {
    diagnostics.state_file = options_.recording->recording.dir + "/" + kFindingsStateFile;
    // Acks wait for the recording's sync and the findings' save: the same group commit for both.
    diagnostics.state_save_interval = options_.recording->sync_interval;
  }
  diagnostics_ = std::make_unique<DiagnosticsService>(std::move(diagnostics), store_);
  // Before any report: the recording's state first (nodes, open findings, dedup watermarks).
  if (options_.recording) {
    StartRecording();
  } else {
    spdlog::info(
        "exporter: no --record.dir, so the state starts empty and a restart forgets it: nodes "
        "come back as their agents report, open findings when their condition is seen again "
        "(docs/delivery.md, \"What a restart keeps\")");
  }
  diagnostics_->Start();
  service_->set_diagnostics(diagnostics_.get());
  query_ = std::make_unique<QueryService>(store_, *diagnostics_);
  if (options_.grpc_tls.mutual()) query_->set_reader_names(options_.grpc_tls.reader_names);
  service_->set_max_reports_per_second(options_.max_reports_per_second);
  // With mutual TLS, a report's node must be one the client certificate names.
  service_->set_require_node_certificate(options_.grpc_tls.mutual());
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options_.grpc_listen_address, MakeServerCredentials(options_.grpc_tls),
                           &grpc_port_);
  builder.RegisterService(service_.get());
  builder.RegisterService(query_.get());  // same port, same TLS
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

  renderer_ = std::make_unique<StateRenderer>(store_, stats_);
  renderer_->set_diagnostics(diagnostics_.get());
  http_ = std::make_unique<HttpServer>(
      options_.web_listen_address,
      [renderer = renderer_.get()](TextExpositionSink& sink,
                                   std::vector<std::string_view>& pieces) {
        renderer->RenderPieces(sink, pieces);
      },
      options_.web_config, options_.web_limits);
  status_ = std::make_unique<StatusRenderer>(store_, stats_, diagnostics_.get());
  http_->set_status([status = status_.get()](std::string_view node, std::string& out) {
    status->RenderJson(node, out);
  });
  // Not ready while the recording cannot be written: reports are not acknowledged meanwhile.
  http_->set_readiness([&recorder = stats_.recorder] { return recorder.failure(); });
  spdlog::info("exporter: ingest on {} (port {}), metrics on {} (port {})",
               options_.grpc_listen_address, grpc_port_, options_.web_listen_address,
               http_->port());
  spdlog::info("exporter: ingest {}, /metrics {}{}",
               options_.grpc_tls.mutual()    ? "mutual TLS"
               : options_.grpc_tls.enabled() ? "TLS"
                                             : "plain text",
               options_.web_config.tls ? "HTTPS" : "plain HTTP",
               options_.web_config.basic_auth_users.empty() ? "" : " with basic auth");
  if (options_.grpc_tls.mutual()) {
    spdlog::info(
        "exporter: Query API (GetNodes, GetFindings, Watch) readable by client "
        "certificates named {}",
        options_.grpc_tls.reader_names.empty()
            ? std::string("nobody (--grpc.reader-names is empty)")
            : fmt::format("{}", fmt::join(options_.grpc_tls.reader_names, ", ")));
  } else {
    spdlog::info("exporter: Query API readable by any client that can connect (docs/security.md)");
  }
  spdlog::info("diagnostics: {}", diagnostics_->Describe());
}

void Exporter::StartRecording() {
  const auto started = std::chrono::steady_clock::now();
  recording::RecorderOptions o = *options_.recording;
  o.recording.tail_index = true;
  // Dedup forgets an expired node in memory; the recording's headers forget it too.
  o.recording.forget_watermarks_after = options_.node_expire_after;
  // Opens and locks the directory and reads its newest segment: throws, stopping start-up.
  recorder_ = std::make_unique<recording::Recorder>(o, stats_.recorder);
  const recording::RecoveredWatermarks& recovered = recorder_->recovered();
  // Reports recorded before a restart are duplicates when agents send them again.
  const Clock::time_point now = Clock::now();
  for (const auto& [node, mark] : recovered.watermarks) {
    store_.Seed(node, mark.agent_instance_id, mark.sequence, now);
  }
  for (const std::string& damage : recovered.damage) {
    spdlog::warn("recording: {} (skipped while recovering watermarks)", damage);
  }
  spdlog::info(
      "recording to {} (segments of {}, at most {} in all, kept {}, fdatasync at most every {}, "
      "compression {})",
      o.recording.dir, FormatByteSize(o.recording.segment_bytes),
      o.recording.max_bytes == 0 ? "no limit" : FormatByteSize(o.recording.max_bytes),
      o.recording.retention.count() == 0 ? "forever"
                                         : FormatPrometheusDuration(o.recording.retention),
      FormatPrometheusDuration(o.sync_interval),
      o.recording.compression == recording::Compression::kZstd
          ? fmt::format("zstd level {}", o.recording.zstd_level)
          : std::string("none"));
  spdlog::info("recording: watermarks of {} node(s) recovered{}", recovered.watermarks.size(),
               recovered.segment.empty() ? std::string()
                                         : fmt::format(" from {} and {} report(s) after it",
                                                       recovered.segment, recovered.reports));
  RestoreState(now);
  spdlog::info("recording: start-up read the recording in {:.0f} ms",
               std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started)
                   .count());
  stats_.recording = true;
  service_->set_recorder(recorder_.get());
}

void Exporter::RestoreState(Clock::time_point now) {
  const std::string& dir = options_.recording->recording.dir;
  const recording::RecoveredLocations& located = recorder_->recovered_locations();
  if (!located.index_problem.empty() && !located.nodes.empty()) {
    spdlog::warn("recording: {}: nodes restored from the newest two segments only",
                 located.index_problem);
  }
  const int64_t oldest_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                (now - store_.expire_after()).time_since_epoch())
                                .count();
  const recording::LatestReports latest =
      recording::ReadLatestReports(dir, located.nodes, oldest_ns);
  for (const std::string& problem : latest.problems) {
    spdlog::warn("recording: {} (not restored)", problem);
  }
  uint64_t restored = 0;
  for (const std::string& wire : latest.reports) {
    std::shared_ptr<v1::NodeReport> report = NewArenaReport();
    if (report->ParseFromString(wire) && store_.Restore(std::move(report), now)) ++restored;
  }
  stats_.restored_nodes = restored;
  stats_.restored_findings = diagnostics_->RestoreState();
  spdlog::info(
      "recording: restored the latest report of {} node(s) from {} record(s) ({} older than "
      "--node.expire-after left out), shown down (accelmon_node_up 0) until they report again; "
      "{} open finding(s)",
      restored, latest.records_read, latest.too_old, stats_.restored_findings.load());
}

void Exporter::Stop() {
  if (server_) {
    // Watch streams end now rather than after the grace period (a stuck client's write is
    // cancelled).
    query_->Shutdown();
    // Open agent streams are cancelled after a short grace period.
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
    server_->Wait();
    server_.reset();
  }
  // After the streams: what they queued for diagnostics is processed, then its thread ends.
  if (diagnostics_) diagnostics_->Stop();
  // After the streams: what they queued is written, synced and its callbacks run.
  if (recorder_) {
    service_->set_recorder(nullptr);
    recorder_.reset();  // syncs and unlocks the directory
  }
  http_.reset();
}

std::optional<std::string> Exporter::Reconfigure(const ExporterOptions& next) {
  if (!http_) return std::string("the exporter is not serving");
  if (auto refused = http_->Reconfigure(next.web_config)) return refused;
  store_.Reconfigure(next.node_expire_after, next.limits);
  service_->set_max_reports_per_second(next.max_reports_per_second);
  if (next.diagnostics && diagnostics_) {
    diagnostics_->Reconfigure(*next.diagnostics, next.diagnostics_config_file);
  }
  return std::nullopt;
}

void Exporter::set_reload(std::function<std::string()> reload) {
  if (http_) http_->set_reload(std::move(reload));
}

int Exporter::web_port() const { return http_ ? http_->port() : 0; }

}  // namespace accelmon
