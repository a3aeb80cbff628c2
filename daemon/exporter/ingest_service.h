// The exporter's gRPC ingest: one bidirectional stream per agent, on gRPC's callback API so a
// thousand idle streams cost no threads.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <unordered_set>

#include "accelmon/v1/ingest.grpc.pb.h"
#include "daemon/common/log_limiter.h"
#include "daemon/exporter/diagnostics_service.h"
#include "daemon/exporter/exporter_stats.h"
#include "daemon/exporter/node_store.h"
#include "daemon/exporter/series_budget.h"
#include "daemon/exporter/timer_queue.h"
#include "recording/recorder.h"

namespace accelmon {

// Reports arrive as raw bytes and are parsed here rather than by gRPC, so that one protobuf
// refuses (invalid UTF-8 in a string) is answered REJECTED and the stream goes on.
class IngestService final : public v1::Ingest::WithRawCallbackMethod_Stream<v1::Ingest::Service> {
 public:
  IngestService(NodeStore& store, ExporterStats& stats) : store_(store), stats_(stats) {}

  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* Stream(
      grpc::CallbackServerContext* context) override;

  // With mutual TLS: a stream whose report names a node its client certificate does not is
  // refused with PERMISSION_DENIED.
  void set_require_node_certificate(bool on) { require_node_certificate_ = on; }

  // A stream that sends faster than this is read more slowly (0: no limit). Bursts of up to
  // one second's worth pass unslowed. A reload changes it for open streams too.
  void set_max_reports_per_second(double rate) { max_reports_per_second_ = rate; }
  double max_reports_per_second() const { return max_reports_per_second_.load(); }

  // With a recorder, every applied report is appended to it (its wire bytes as received) and
  // acknowledged only once recorded; later acks of the same stream wait behind it. Set before
  // serving, cleared after the streams ended; it must outlive them.
  void set_recorder(recording::Recorder* recorder) { recorder_ = recorder; }
  recording::Recorder* recorder() const { return recorder_; }

  // Every applied report is also handed to diagnostics (null: none), which queues it for its own
  // thread. Set before serving.
  void set_diagnostics(DiagnosticsService* diagnostics) { diagnostics_ = diagnostics; }
  DiagnosticsService* diagnostics() const { return diagnostics_; }

  // Applies one report and says how (shared by every stream).
  // The store keeps `report` as the node's latest: the caller must not change it afterwards.
  // `dropped`: what Trim took out of it, counted (and logged once per node) when it is applied.
  // `*findings_ticket`, when acks wait for findings (acks_wait_for_findings): the diagnostics
  // ticket (DiagnosticsService::settled) its ack waits for besides the recording; 0: none.
  v1::Ack Handle(std::shared_ptr<const v1::NodeReport> report, const std::string& peer,
                 const Dropped& dropped = {}, uint64_t* findings_ticket = nullptr);
  // Whether an applied report's ack must also wait for diagnostics to save the findings it
  // changed: with a recorder (acks wait for the disk anyway) and findings saved beside it.
  bool acks_wait_for_findings() const {
    return recorder_ != nullptr && diagnostics_ != nullptr && diagnostics_->saves_findings();
  }
  // While the recording cannot be written, beyond a stream's read-ahead: shows one report
  // (NodeStore::Show) and diagnoses it, without an ack (the agent sends it again to be recorded).
  // A report the store refuses is counted and logged as Reject does.
  void Show(std::shared_ptr<const v1::NodeReport> report, const std::string& peer);
  // Whether the recording cannot be written now (its writes or syncs fail).
  bool recording_failing() const { return recorder_ != nullptr && stats_.recorder.failing != 0; }
  // Trims `report` to the store's limits before it is applied (series_budget.h).
  Dropped Trim(v1::NodeReport& report) const { return TrimReport(report, store_.limits().trim); }
  // Counts what trimming dropped from an applied report, and logs it once per node.
  void CountDropped(const v1::NodeReport& report, const Dropped& dropped, const std::string& peer);
  // Refuses one report for `reason`: counted, logged (rate-limited) and answered.
  v1::Ack Reject(const v1::NodeReport& report, const std::string& reason, const std::string& peer);

  // Resumes throttled streams. Outlives every stream: the server is shut down first.
  TimerQueue& timers() { return timers_; }
  // Client-caused log lines: at most one a minute per (peer, what).
  LogLimiter& log_limiter() { return log_limiter_; }

 private:
  NodeStore& store_;
  ExporterStats& stats_;
  bool require_node_certificate_ = false;
  std::atomic<double> max_reports_per_second_{0};
  recording::Recorder* recorder_ = nullptr;
  DiagnosticsService* diagnostics_ = nullptr;
  LogLimiter log_limiter_;
  std::mutex dropped_logged_mu_;
  std::unordered_set<std::string> dropped_logged_;  // nodes whose trimming was logged
  TimerQueue timers_;
};

}  // namespace accelmon
