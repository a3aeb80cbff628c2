#include "support/fake_nccl_ras.h"

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace accelmon::testing {

namespace {

void SendAll(int fd, const std::string& s) {
  size_t sent = 0;
  while (sent < s.size()) {
    const ssize_t n = send(fd, s.data() + sent, s.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return;
    sent += static_cast<size_t>(n);
  }
}

}  // namespace

FakeNcclRas::FakeNcclRas() {
  listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      listen(listen_fd_, 16) != 0) {
    throw std::runtime_error(std::string("fake RAS: ") + std::strerror(errno));
  }
  socklen_t len = sizeof addr;
  getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  thread_ = std::thread([this] { Serve(); });
}

FakeNcclRas::~FakeNcclRas() {
  stop_ = true;
  thread_.join();
  close(listen_fd_);
}

void FakeNcclRas::SetRanks(std::vector<Rank> ranks, std::vector<MissingRank> missing) {
  std::lock_guard lock(mu_);
  ranks_ = std::move(ranks);
  missing_ = std::move(missing);
}

void FakeNcclRas::StopRank(int rank) {
  std::lock_guard lock(mu_);
  uint64_t at = 0;
  for (const Rank& r : ranks_) at = std::max(at, r.all_reduce);
  for (Rank& r : ranks_) {
    r.all_reduce = r.rank == rank ? at : at + 1;
    r.running = false;
  }
}

void FakeNcclRas::SetMode(Mode mode) {
  std::lock_guard lock(mu_);
  mode_ = mode;
}

std::string FakeNcclRas::Report() {
  std::lock_guard lock(mu_);
  std::string o;
  o += "{\n  \"nccl_version\": \"2.29.2\",\n  \"cuda_runtime_version\": 12090,\n";
  o += "  \"cuda_driver_version\": 12090,\n  \"timestamp\": \"2026-12-07 10:15:42\",\n";
  o += "  \"communicators_count\": 1,\n  \"communicators\": [\n";
  o += "    {\n      \"hash\": \"0x9e17999afaa87dbb\",\n";
  o += "      \"secondary_hash\": \"0x7cbcd4b24fb45306:0x83984de1c6807cf8\",\n";
  o += "      \"size\": " + std::to_string(ranks_.size() + missing_.size()) + ",\n";
  o += "      \"ranks_count\": " + std::to_string(ranks_.size()) + ",\n";
  o += "      \"missing_ranks_count\": " + std::to_string(missing_.size()) + ",\n";
  o += "      \"ranks\": [\n";
  for (size_t i = 0; i < ranks_.size(); ++i) {
    Rank& r = ranks_[i];
    if (i > 0) o += ",\n";
    o += "        {\n          \"rank\": " + std::to_string(r.rank) + ",\n";
    o += "          \"host\": \"" + r.host + "\",\n";
    o += "          \"pid\": " + std::to_string(r.pid) + ",\n";
    o += "          \"cuda_dev\": " + std::to_string(r.nvml_dev) + ",\n";
    o += "          \"nvml_dev\": " + std::to_string(r.nvml_dev) + ",\n";
    o += "          \"status\": {\n            \"init_state\": 0,\n";
    o += "            \"async_error\": " + std::to_string(r.async_error) + ",\n";
    o += "            \"finalize_called\": false,\n            \"destroy_flag\": false,\n";
    o += "            \"abort_flag\": false\n          },\n";
    o += "          \"collective_counts\": {\n            \"Broadcast\": 1,\n";
    o += "            \"Reduce\": 0,\n            \"AllGather\": 12,\n";
    o += "            \"ReduceScatter\": 0,\n";
    o += "            \"AllReduce\": " + std::to_string(r.all_reduce) + "\n          }\n        }";
    if (r.running) r.all_reduce += step;
  }
  o += "\n      ],\n      \"missing_ranks\": [\n";
  for (size_t i = 0; i < missing_.size(); ++i) {
    const MissingRank& m = missing_[i];
    if (i > 0) o += ",\n";
    o += "        {\n          \"rank\": " + std::to_string(m.rank) + ",\n";
    o += "          \"host\": \"" + m.host + "\",\n          \"pid\": -1,\n";
    o += "          \"cuda_dev\": " + std::to_string(m.nvml_dev) + ",\n";
    o += "          \"nvml_dev\": " + std::to_string(m.nvml_dev) + ",\n";
    o += "          \"status\": {\n            \"unresponsive\": " +
         std::string(m.unresponsive ? "true" : "false") + ",\n";
    o += "            \"considered_dead\": " + std::string(m.dead ? "true" : "false") +
         "\n          }\n        }";
  }
  if (missing_.empty()) o += "\n";
  o += "\n      ]\n    }\n  ],\n  \"ras\": {\n    \"collection_time_sec\": 0.002,\n";
  o += "    \"timeouts_count\": 0\n  }\n}\n";
  return o;
}

void FakeNcclRas::Serve() {
  while (!stop_) {
    pollfd p{.fd = listen_fd_, .events = POLLIN, .revents = 0};
    if (poll(&p, 1, 50) <= 0) continue;
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    ++connections_;
    Converse(fd);
    close(fd);
  }
}

void FakeNcclRas::Converse(int fd) {
  std::string buffer;
  const auto line = [&]() -> std::string {
    for (;;) {
      if (const size_t nl = buffer.find('\n'); nl != std::string::npos) {
        std::string l = buffer.substr(0, nl);
        buffer.erase(0, nl + 1);
        return l;
      }
      pollfd p{.fd = fd, .events = POLLIN, .revents = 0};
      if (stop_ || poll(&p, 1, 50) < 0) return {};
      if (p.revents == 0) continue;
      char chunk[1024];
      const ssize_t n = recv(fd, chunk, sizeof chunk, 0);
      if (n <= 0) return {};
      buffer.append(chunk, static_cast<size_t>(n));
    }
  };
  Mode mode;
  {
    std::lock_guard lock(mu_);
    mode = mode_;
  }
  for (std::string l = line(); !l.empty(); l = line()) {
    if (mode == Mode::kGarbage) {
      SendAll(fd, "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
      return;
    }
    if (l.rfind("CLIENT PROTOCOL", 0) == 0) {
      SendAll(fd, "SERVER PROTOCOL 2\n");
    } else if (l.rfind("TIMEOUT ", 0) == 0) {
      SendAll(fd, "OK\n");
    } else if (l == "SET FORMAT json") {
      SendAll(fd, mode == Mode::kNoJson ? "ERROR: Unknown command SET FORMAT json\n" : "OK\n");
    } else if (l == "STATUS" || l == "VERBOSE STATUS") {
      ++queries_;
      if (mode == Mode::kSilent) {
        // RAS collecting from peers that never answer: the connection stays open, silent.
        holding_ = true;
        while (!stop_) {
          std::lock_guard lock(mu_);
          if (mode_ != Mode::kSilent) break;
          pollfd p{.fd = fd, .events = POLLIN, .revents = 0};
          if (poll(&p, 1, 20) > 0) {
            char c;
            if (recv(fd, &c, 1, 0) <= 0) break;  // the client gave up
          }
        }
        holding_ = false;
        return;
      }
      const std::string report = Report();
      SendAll(fd, mode == Mode::kCloseMidAnswer ? report.substr(0, report.size() / 2) : report);
      return;  // the server closes after the report
    } else {
      SendAll(fd, "ERROR: Unknown command " + l + "\n");
    }
  }
}

}  // namespace accelmon::testing
