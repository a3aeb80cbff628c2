// NCCL's own view of its collectives. Every NCCL >= 2.24 process runs a RAS thread that answers on
// a local TCP port (localhost:28028; NCCL_RAS_ADDR moves it) with a line protocol: `CLIENT
// PROTOCOL 2`, `TIMEOUT n`, `SET FORMAT json` (NCCL >= 2.28.7), `STATUS`, then the report and
// the server closes (NVIDIA/nccl src/ras/client_support.cc). Any process answers for its whole
// job: every communicator, each rank's collective counts, the ranks it cannot reach.
//
// The "nccl_ras" collector asks each configured address once per collection interval on a thread
// of its own, under its own deadline; a tick takes the latest answer and never waits. It reports
// the communicators that have a rank on this node: those ranks, and the ranks elsewhere that are
// not OK or lag behind the others (the ones a hang is waiting for). docs/jobs.md "NCCL RAS".
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "collectors/collector.h"

namespace accelmon::collectors {

inline constexpr const char* kDefaultNcclRasAddress = "localhost:28028";
// Per communicator: ranks of other nodes kept in a report (the lowest ones), so a 4096-rank job
// whose RAS lists thousands of missing ranks stays within the exporter's limits.
inline constexpr size_t kMaxRemoteRanks = 64;
// Communicators per report.
inline constexpr size_t kMaxCommunicators = 64;
// The longest answer read (a 4096-rank communicator is about 2 MiB of JSON).
inline constexpr size_t kMaxRasAnswerBytes = 16 << 20;

// Nothing listens at the address (connection refused, or the name does not resolve): no NCCL
// process here, RAS off (NCCL_RAS_ENABLE=0), or NCCL_RAS_ADDR elsewhere.
class RasNotListening : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
// Something listens but the conversation failed: no answer in time, an answer that is not RAS's,
// closed mid-answer, an NCCL without JSON output.
class RasAnswerError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// One RAS conversation with `address` ("host:port", "[::1]:port", or a port alone for localhost),
// all of it within `timeout`: returns the JSON document. Throws RasNotListening or RasAnswerError.
std::string QueryRas(const std::string& address, std::chrono::milliseconds timeout);

// Adds the communicators of RAS's JSON `json` that have a rank on this node (`is_local(host)`) to
// `out`, as docs/jobs.md describes; `source` names the address in them. Throws RasAnswerError
// when the document is not RAS's.
void ParseRasStatus(std::string_view json, const std::function<bool(std::string_view)>& is_local,
                    std::string_view source,
                    google::protobuf::RepeatedPtrField<v1::Communicator>& out);

// This host's interface addresses (getifaddrs) and the loopback ones: a rank whose RAS host is
// one of them is on this node.
std::set<std::string, std::less<>> LocalAddresses();

struct NcclRasOptions {
  std::vector<std::string> addresses{kDefaultNcclRasAddress};  // --nccl-ras.address
  std::chrono::milliseconds timeout{5000};                     // --nccl-ras.timeout
  // How often to ask: the collection interval (at least 1 s).
  std::chrono::milliseconds period{10000};
  // Hosts that are this node; empty: LocalAddresses().
  std::set<std::string, std::less<>> local_hosts{};
};

class NcclRasCollector final : public Collector {
 public:
  explicit NcclRasCollector(NcclRasOptions options);
  ~NcclRasCollector() override;

  std::string_view name() const override { return "nccl_ras"; }
  // The communicators of the latest answer of each address (one no older than two periods plus
  // the timeout). SourceAbsent while nothing listens anywhere; CollectorError when no address
  // answered well and one failed (the reason).
  void Collect(v1::NodeReport& report) override;

 private:
  struct Shared;
  static void Work(const std::shared_ptr<Shared>& shared);
  std::shared_ptr<Shared> shared_;
  std::thread thread_;
};

}  // namespace accelmon::collectors
