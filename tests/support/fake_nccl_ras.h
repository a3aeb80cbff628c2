// A stand-in for NCCL's RAS thread, written from its protocol (NVIDIA/nccl src/ras/client.cc and
// client_support.cc): TCP on 127.0.0.1 (port from the kernel), `CLIENT PROTOCOL n` answered with
// `SERVER PROTOCOL 2`, `TIMEOUT n` and `SET FORMAT json` with `OK`, `STATUS` with the JSON report
// laid out as rasDumpCommsToJSON prints it, then the connection closed. Its ranks are set by the
// test; each STATUS advances the running ones' AllReduce count by `step`, as a live job would.
// Modes for the failures a collector must survive: never answering, garbage, closing mid-answer.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace accelmon::testing {

class FakeNcclRas {
 public:
  struct Rank {
    int rank = 0;
    std::string host = "127.0.0.1";
    int pid = 1000;
    int nvml_dev = 0;
    uint64_t all_reduce = 1000;  // its AllReduce count
    bool running = true;         // false: it stopped, its count stays
    int async_error = 0;
  };
  struct MissingRank {
    int rank = 0;
    std::string host;
    int nvml_dev = 0;
    bool unresponsive = true;
    bool dead = false;
  };
  enum class Mode { kAnswer, kSilent, kGarbage, kCloseMidAnswer, kNoJson };

  FakeNcclRas();
  ~FakeNcclRas();
  FakeNcclRas(const FakeNcclRas&) = delete;
  FakeNcclRas& operator=(const FakeNcclRas&) = delete;

  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  void SetRanks(std::vector<Rank> ranks, std::vector<MissingRank> missing = {});
  // Stops `rank` where it is: the others launch one more collective and wait there.
  void StopRank(int rank);
  void SetMode(Mode mode);
  uint64_t step = 4;  // collectives a running rank launches between two STATUS (set before use)

  // STATUS requests answered (or, silent, held), and whether a connection is held open now.
  uint64_t queries() const { return queries_.load(); }
  uint64_t connections() const { return connections_.load(); }
  bool holding() const { return holding_.load(); }

  // The JSON report of the ranks now, as RAS lays it out.
  std::string Report();

 private:
  void Serve();
  void Converse(int fd);

  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> queries_{0};
  std::atomic<uint64_t> connections_{0};
  std::atomic<bool> holding_{false};
  std::mutex mu_;
  Mode mode_ = Mode::kAnswer;
  std::vector<Rank> ranks_;
  std::vector<MissingRank> missing_;
  std::thread thread_;
};

}  // namespace accelmon::testing
