// The Query service (proto/accelmon/v1/diagnostics.proto) on the exporter's gRPC port, beside
// Ingest: the latest report of each node, the diagnostics findings, and a Watch stream of both.
//
// Each Watch client has a bounded queue, filled by the diagnostics worker: when it reads too
// slowly the oldest events are dropped (and counted), so a slow or stuck client never holds the
// worker, other clients or ingest.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "accelmon/v1/diagnostics.grpc.pb.h"
#include "daemon/exporter/diagnostics_service.h"
#include "daemon/exporter/node_store.h"

namespace accelmon {

class WatchReactor;
class WatchStream;

class QueryService final : public v1::Query::CallbackService {
 public:
  // Events a Watch client may have queued beyond its initial state.
  static constexpr size_t kWatchQueueCapacity = 1024;

  QueryService(NodeStore& store, DiagnosticsService& diagnostics);
  ~QueryService() override;

  grpc::ServerUnaryReactor* GetNodes(grpc::CallbackServerContext* context,
                                     const v1::GetNodesRequest* request,
                                     v1::GetNodesResponse* response) override;
  grpc::ServerUnaryReactor* GetFindings(grpc::CallbackServerContext* context,
                                        const v1::GetFindingsRequest* request,
                                        v1::GetFindingsResponse* response) override;
  grpc::ServerUnaryReactor* GetSummary(grpc::CallbackServerContext* context,
                                       const v1::GetSummaryRequest* request,
                                       v1::GetSummaryResponse* response) override;
  grpc::ServerWriteReactor<v1::WatchEvent>* Watch(grpc::CallbackServerContext* context,
                                                  const v1::WatchRequest* request) override;

  // With mutual TLS: only clients whose certificate names one of `names` may call; the others get
  // PERMISSION_DENIED. Unset (plain text or server-only TLS): anyone who can connect may read.
  void set_reader_names(std::vector<std::string> names) {
    reader_names_ = std::move(names);
    require_reader_ = true;
  }

  // Ends every Watch stream and refuses new ones (UNAVAILABLE). Called before the server shuts
  // down, so that shutdown need not wait out its grace period for streams that never end.
  void Shutdown();

  // Watch streams open now; events dropped for slow Watch clients so far.
  size_t watchers() const;
  uint64_t dropped() const;

 private:
  friend class WatchReactor;
  void Remove(const std::shared_ptr<WatchStream>& stream, uint64_t dropped);

  // Why `context`'s client may not read, or nothing when it may.
  std::optional<grpc::Status> RefuseReader(grpc::CallbackServerContext* context) const;

  NodeStore& store_;
  DiagnosticsService& diagnostics_;
  bool require_reader_ = false;
  std::vector<std::string> reader_names_;
  mutable std::mutex mu_;
  bool shutting_down_ = false;
  std::set<std::shared_ptr<WatchStream>> streams_;
  uint64_t dropped_ = 0;  // by streams that ended
};

}  // namespace accelmon
