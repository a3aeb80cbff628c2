// The exporter's gRPC ingest: one bidirectional stream per agent, on gRPC's callback API so a
// thousand idle streams cost no threads.
#pragma once

#include "accelmon/v1/ingest.grpc.pb.h"
#include "daemon/exporter_stats.h"
#include "daemon/node_store.h"

namespace accelmon {

class IngestService final : public v1::Ingest::CallbackService {
 public:
  IngestService(NodeStore& store, ExporterStats& stats) : store_(store), stats_(stats) {}

  grpc::ServerBidiReactor<v1::NodeReport, v1::Ack>* Stream(
      grpc::CallbackServerContext* context) override;

  // Applies one report and says how (shared by every stream).
  v1::Ack Handle(const v1::NodeReport& report, const std::string& peer);

 private:
  NodeStore& store_;
  ExporterStats& stats_;
};

}  // namespace accelmon
