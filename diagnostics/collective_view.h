// One job's collectives as NCCL RAS reports them on its nodes (NodeReport.communicators): each
// node's latest view merged into one per communicator, and whether it has stopped. The job rules
// use it to name the rank the others wait for (docs/jobs.md "NCCL RAS").
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "accelmon/v1/telemetry.pb.h"

namespace accelmon::diagnostics {

// A rank the others wait for: furthest behind them, or not answering.
struct WaitedRank {
  uint32_t rank = 0;
  std::string node;  // the node whose own rank it is; empty when only others listed it
  std::optional<uint32_t> device;
  std::string host;  // as RAS names it (where node is empty)
  v1::RankState state = v1::RANK_STATE_UNSPECIFIED;
  std::optional<uint64_t> collectives;
};

struct CollectiveVerdict {
  std::string communicator;  // its hash
  uint32_t size = 0;
  uint64_t others_at = 0;          // the most collectives any rank launched
  bool others_between = false;     // some of the others are behind others_at too
  int64_t since_ns = 0;            // when that last grew
  std::vector<WaitedRank> waited;  // ascending by rank
  std::string
      node;  // where a finding about it belongs: the first waited rank's node, or a reporter
  // "rank 13 on sim-1 device 5 stopped after 4,411 collectives; the other 31 ranks are at 4,412"
  std::string Describe() const;
};

class CollectiveView {
 public:
  // `node`'s latest report of the job: its communicators (none: it has none, or left the job).
  void Update(std::string_view node, const std::vector<const v1::Communicator*>& communicators,
              int64_t now_ns);
  // The largest communicator with a rank that lags or does not answer, or nullopt.
  std::optional<CollectiveVerdict> Lagging() const;
  // The same, once no rank has launched a collective for at least `for_ns`.
  std::optional<CollectiveVerdict> Stopped(int64_t now_ns, int64_t for_ns) const;
  // Whether some communicator's most advanced rank launched a collective after `since_ns`.
  bool ProgressedAfter(int64_t since_ns) const;
  bool empty() const { return progress_.empty(); }

 private:
  struct NodeCommunicator {
    uint32_t size = 0;
    std::optional<uint64_t> max;
    std::vector<v1::CommunicatorRank> ranks;
  };
  struct Progress {
    uint64_t max = 0;
    int64_t moved_ns = 0;
  };
  std::optional<CollectiveVerdict> Judge(const std::string& hash, const Progress& p) const;

  // By node, then by communicator hash.
  std::map<std::string, std::map<std::string, NodeCommunicator>, std::less<>> nodes_;
  std::map<std::string, Progress> progress_;  // by communicator hash
};

// 4411 -> "4,411".
std::string GroupThousands(uint64_t n);

}  // namespace accelmon::diagnostics
