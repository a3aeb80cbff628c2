#include "daemon/tools/replay.h"

#include <grpcpp/client_context.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/generic/generic_stub.h>

#include <cmath>
#include <memory>
#include <optional>
#include <thread>
#include <unordered_map>

#include "accelmon/v1/ingest.grpc.pb.h"
#include "daemon/agent/ingest_stream.h"
#include "daemon/common/grpc_status.h"
#include "daemon/tools/progress.h"
#include "proto/time_format.h"

namespace accelmon {
namespace {

using SteadyClock = std::chrono::steady_clock;

// Waits until `channel` is connected. The first failed attempt is the answer: a tool should not
// retry for long against an exporter that is not there.
std::optional<std::string> Connect(grpc::Channel& channel, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::system_clock::now() + timeout;
  for (;;) {
    const grpc_connectivity_state state = channel.GetState(/*try_to_connect=*/true);
    if (state == GRPC_CHANNEL_READY) return std::nullopt;
    if (state == GRPC_CHANNEL_TRANSIENT_FAILURE || state == GRPC_CHANNEL_SHUTDOWN) {
      // The channel does not say why; a call that fails at once does ("Connection refused").
      grpc::ClientContext context;
      context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
      auto stream = v1::Ingest::NewStub(channel.shared_from_this())->Stream(&context);
      stream->WritesDone();
      const grpc::Status status = stream->Finish();
      return status.ok() ? std::string("connection failed") : DescribeStatus(status);
    }
    if (!channel.WaitForStateChange(state, deadline)) {
      return "no connection within " + FormatDuration(timeout);
    }
  }
}

}  // namespace

void TimeShift::Start(int64_t first_ns, int64_t now_ns) {
  first_ns_ = first_ns;
  now_ns_ = now_ns;
}

int64_t TimeShift::Apply(int64_t ns) const {
  if (!enabled_) return ns;
  const double offset = static_cast<double>(ns - first_ns_);
  return now_ns_ + static_cast<int64_t>(speed_ > 0 ? offset / speed_ : offset);
}

ReplayResult ReplayToExporter(recording::MergedReader& reader, const ReplayOptions& options,
                              Progress* progress) {
  ReplayResult result;
  const auto started = SteadyClock::now();
  grpc::ChannelArguments args;
  auto credentials = MakeChannelCredentials(options.tls, args);
  auto channel = grpc::CreateCustomChannel(options.exporter_address, credentials, args);
  // Say so at once when nothing listens there, rather than queueing reports for nobody.
  if (auto error = Connect(*channel, options.connect_timeout)) {
    result.errors.push_back("cannot reach the exporter at " + options.exporter_address + ": " +
                            *error + " (is it running, with --grpc.listen-address there?)");
    return result;
  }
  grpc::GenericStub stub(channel);

  // One stream per node, as an agent would hold it.
  std::unordered_map<std::string, std::unique_ptr<IngestStream>> streams;
  std::vector<std::pair<std::string, IngestStream*>> order;  // for a stable summary
  std::map<std::string, std::string> failed;                 // node -> why its reports stopped
  TimeShift shift(options.shift_to_now, options.speed);
  bool first = true;
  int64_t first_ns = 0;
  SteadyClock::time_point pace_start;

  while (const v1::NodeReport* report = reader.Next()) {
    ++result.read;
    if (progress != nullptr) progress->Update(reader.bytes_done(), result.read);
    const bool timed = report->has_timestamp();
    const int64_t ns = timed ? ToNanos(report->timestamp()) : 0;
    if (first && timed) {
      first = false;
      first_ns = ns;
      pace_start = SteadyClock::now();
      shift.Start(ns, WallClockNowNanos());
    }
    // Keep the recorded spacing, sped up.
    if (options.speed > 0 && timed && !first && ns > first_ns) {
      const auto due = pace_start + std::chrono::duration_cast<SteadyClock::duration>(
                                        std::chrono::duration<double, std::nano>(
                                            static_cast<double>(ns - first_ns) / options.speed));
      std::this_thread::sleep_until(due);
    }
    auto it = streams.find(report->node());
    if (it == streams.end()) {
      it = streams
               .emplace(report->node(),
                        std::make_unique<IngestStream>(
                            stub, nullptr,
                            IngestStream::Options{.max_unacknowledged =
                                                      options.max_unacknowledged_per_node}))
               .first;
      order.emplace_back(report->node(), it->second.get());
    }
    if (failed.count(report->node()) > 0) continue;
    v1::NodeReport copy = *report;
    if (timed && options.shift_to_now)
      *copy.mutable_timestamp() = TimestampFromNanos(shift.Apply(ns));
    if (!it->second->Send(copy)) failed[report->node()] = "stream ended";
  }
  if (progress != nullptr) progress->Clear();

  for (const auto& [node, stream] : order) stream->Close();
  for (const auto& [node, stream] : order) {
    const grpc::Status status = stream->Wait();
    const IngestAckCounts c = stream->counts();
    result.sent += c.sent;
    result.applied += c.applied;
    result.duplicate += c.duplicate;
    result.rejected += c.rejected;
    for (const auto& [reason, n] : c.rejected_reasons) result.rejected_reasons[reason] += n;
    const uint64_t acknowledged = c.acknowledged();
    if (!status.ok() || acknowledged < c.sent || failed.count(node) > 0) {
      result.errors.push_back("node \"" + node + "\": the stream ended (" + DescribeStatus(status) +
                              ") with " + std::to_string(c.sent - std::min(c.sent, acknowledged)) +
                              " report(s) unacknowledged" +
                              (failed.count(node) > 0 ? "; its later reports not sent" : ""));
    }
  }
  result.nodes = order.size();
  result.elapsed = SteadyClock::now() - started;
  return result;
}

OpenMetricsWriter::Summary ReplayToOpenMetrics(recording::MergedReader& reader,
                                               const std::string& out_dir, Progress* progress) {
  OpenMetricsWriter writer(out_dir);
  uint64_t read = 0;
  while (const v1::NodeReport* report = reader.Next()) {
    writer.Add(*report);
    ++read;
    if (progress != nullptr) progress->Update(reader.bytes_done(), read);
  }
  if (progress != nullptr) progress->Clear();
  return writer.Finish();
}

}  // namespace accelmon
