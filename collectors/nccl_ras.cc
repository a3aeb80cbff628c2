#include "collectors/nccl_ras.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <google/protobuf/util/json_util.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <regex>

#include "nccl/ras_status.pb.h"

namespace accelmon::collectors {

namespace {

using Clock = std::chrono::steady_clock;

// ncclResult_t, as nccl.h numbers it.
std::string NcclResultName(int result) {
  static constexpr const char* kNames[] = {
      "success",       "unhandled CUDA error", "system error", "internal error", "invalid argument",
      "invalid usage", "remote error",         "in progress",  "timeout"};
  if (result >= 0 && result < static_cast<int>(std::size(kNames))) {
    return std::to_string(result) + " (" + kNames[result] + ")";
  }
  return std::to_string(result);
}

struct HostPort {
  std::string host, port;
};

HostPort SplitAddress(const std::string& address) {
  if (!address.empty() && address.find_first_not_of("0123456789") == std::string::npos) {
    return {"localhost", address};
  }
  if (!address.empty() && address.front() == '[') {
    const size_t close = address.find(']');
    if (close == std::string::npos) throw RasNotListening("bad address " + address);
    const std::string host = address.substr(1, close - 1);
    if (close + 1 < address.size() && address[close + 1] == ':') {
      return {host, address.substr(close + 2)};
    }
    return {host, "28028"};
  }
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) return {address, "28028"};
  return {address.substr(0, colon), address.substr(colon + 1)};
}

// A socket connected to `address` within the deadline.
class Connection {
 public:
  Connection(const std::string& address, Clock::time_point deadline) : deadline_(deadline) {
    const HostPort hp = SplitAddress(address);
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    if (const int rc = getaddrinfo(hp.host.c_str(), hp.port.c_str(), &hints, &found); rc != 0) {
      throw RasNotListening(address + ": " + gai_strerror(rc));
    }
    std::string why = "no address";
    bool refused = true;
    for (addrinfo* a = found; a != nullptr && fd_ < 0; a = a->ai_next) {
      const int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      if (fd < 0) continue;
      int error = 0;
      if (connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
        error = errno;
        if (error == EINPROGRESS) {
          error = Wait(fd, POLLOUT) ? 0 : ETIMEDOUT;
          if (error == 0) {
            socklen_t len = sizeof error;
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len);
          }
        }
      }
      if (error == 0) {
        fd_ = fd;
        break;
      }
      close(fd);
      why = std::strerror(error);
      if (error != ECONNREFUSED && error != EADDRNOTAVAIL && error != ENETUNREACH) refused = false;
    }
    freeaddrinfo(found);
    if (fd_ >= 0) return;
    if (refused) throw RasNotListening(address + ": " + why);
    throw RasAnswerError(address + ": connect: " + why);
  }
  ~Connection() {
    if (fd_ >= 0) close(fd_);
  }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  void Send(std::string_view line) {
    while (!line.empty()) {
      const ssize_t n = send(fd_, line.data(), line.size(), MSG_NOSIGNAL);
      if (n > 0) {
        line.remove_prefix(static_cast<size_t>(n));
      } else if (n < 0 && errno == EAGAIN) {
        if (!Wait(fd_, POLLOUT)) throw RasAnswerError("no answer in time (sending)");
      } else if (n < 0 && errno != EINTR) {
        throw RasAnswerError(std::string("send: ") + std::strerror(errno));
      }
    }
  }

  // The next line without its "\n" (and "\r"); nullopt when the server closed first.
  std::optional<std::string> Line() {
    for (;;) {
      if (const size_t nl = buffer_.find('\n'); nl != std::string::npos) {
        std::string line = buffer_.substr(0, nl);
        buffer_.erase(0, nl + 1);
        if (!line.empty() && line.back() == '\r') line.pop_back();
        return line;
      }
      if (!Fill()) return std::nullopt;
    }
  }

  // Everything up to the server's close.
  std::string Rest() {
    while (Fill()) {
    }
    return std::move(buffer_);
  }

 private:
  bool Wait(int fd, short events) const {
    for (;;) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - Clock::now()).count();
      if (left <= 0) return false;
      pollfd p{.fd = fd, .events = events, .revents = 0};
      const int rc = poll(&p, 1, static_cast<int>(left));
      if (rc > 0) return true;
      if (rc < 0 && errno != EINTR) return false;
    }
  }

  // Reads more; false at the server's close.
  bool Fill() {
    char chunk[65536];
    for (;;) {
      const ssize_t n = recv(fd_, chunk, sizeof chunk, 0);
      if (n > 0) {
        buffer_.append(chunk, static_cast<size_t>(n));
        if (buffer_.size() > kMaxRasAnswerBytes) {
          throw RasAnswerError("answer longer than " + std::to_string(kMaxRasAnswerBytes) +
                               " bytes");
        }
        return true;
      }
      if (n == 0) return false;
      if (errno == EINTR) continue;
      if (errno != EAGAIN) throw RasAnswerError(std::string("recv: ") + std::strerror(errno));
      if (!Wait(fd_, POLLIN)) {
        throw RasAnswerError("no answer within the timeout (" + std::to_string(buffer_.size()) +
                             " bytes so far)");
      }
    }
  }

  int fd_ = -1;
  Clock::time_point deadline_;
  std::string buffer_;
};

// A reply line of RAS must be exactly `want`; an ERROR line says what the server refused.
void Expect(std::optional<std::string> line, std::string_view want, std::string_view command) {
  if (!line) throw RasAnswerError("closed the connection after " + std::string(command));
  if (*line == want) return;
  if (command == "SET FORMAT json" && line->rfind("ERROR", 0) == 0) {
    throw RasAnswerError("answers no JSON (\"" + *line +
                         "\"): NCCL before 2.28.7 has no JSON output, not read");
  }
  throw RasAnswerError("answered \"" + line->substr(0, 80) + "\" to " + std::string(command) +
                       ", not \"" + std::string(want) + "\": not NCCL's RAS?");
}

uint64_t Total(const nccl::RasRank& rank) {
  uint64_t total = 0;
  for (const auto& [kind, count] : rank.collective_counts()) total += count;
  return total;
}

}  // namespace

std::string QueryRas(const std::string& address, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  Connection c(address, deadline);
  c.Send("CLIENT PROTOCOL 2\n");
  const std::optional<std::string> hello = c.Line();
  if (!hello) throw RasAnswerError("closed the connection without a greeting");
  if (hello->rfind("SERVER PROTOCOL ", 0) != 0) {
    throw RasAnswerError("greeted with \"" + hello->substr(0, 80) +
                         "\", not \"SERVER PROTOCOL n\": not NCCL's RAS?");
  }
  // RAS's own wait for its peers: half of ours, so that its partial answer still reaches us.
  const auto ras_timeout = std::max<int64_t>(1, timeout.count() / 2000);
  c.Send("TIMEOUT " + std::to_string(ras_timeout) + "\n");
  Expect(c.Line(), "OK", "TIMEOUT");
  c.Send("SET FORMAT json\n");
  Expect(c.Line(), "OK", "SET FORMAT json");
  c.Send("STATUS\n");
  std::string json = c.Rest();
  if (json.empty()) throw RasAnswerError("closed the connection without a report");
  return json;
}

void ParseRasStatus(std::string_view json, const std::function<bool(std::string_view)>& is_local,
                    std::string_view source,
                    google::protobuf::RepeatedPtrField<v1::Communicator>& out) {
  std::string text(json);
  const size_t end = text.find_last_not_of(" \t\r\n");
  if (text.empty() || text.front() != '{' || end == std::string::npos || text[end] != '}') {
    throw RasAnswerError(text.empty() || text.front() != '{'
                             ? "the report is not a JSON document: \"" + text.substr(0, 40) + "\""
                             : "the report ended mid-document (" + std::to_string(text.size()) +
                                   " bytes)");
  }
  // NCCL 2.28.9 leaves out the comma after a missing rank's nvml_dev (fixed by 2.29.2).
  static const std::regex missing_comma(R"re(("nvml_dev": -?[0-9]+)(\s*\n\s*"status"))re");
  text = std::regex_replace(text, missing_comma, "$1,$2");
  nccl::RasStatus status;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;  // a newer NCCL may say more
  if (const auto parsed = google::protobuf::util::JsonStringToMessage(text, &status, options);
      !parsed.ok()) {
    throw RasAnswerError("the report is not RAS's JSON: " + std::string(parsed.message()));
  }
  const bool partial = status.ras().timeouts_count() > 0;
  for (const nccl::RasCommunicator& comm : status.communicators()) {
    if (static_cast<size_t>(out.size()) >= kMaxCommunicators) break;
    if (std::any_of(out.begin(), out.end(),
                    [&](const v1::Communicator& c) { return c.hash() == comm.hash(); })) {
      continue;  // a second address of the same job
    }
    const bool here =
        std::any_of(comm.ranks().begin(), comm.ranks().end(),
                    [&](const nccl::RasRank& r) { return is_local(r.host()); }) ||
        std::any_of(comm.missing_ranks().begin(), comm.missing_ranks().end(),
                    [&](const nccl::RasMissingRank& r) { return is_local(r.host()); });
    if (!here) continue;  // its own nodes report it
    v1::Communicator c;
    c.set_hash(comm.hash());
    c.set_size(static_cast<uint32_t>(std::max(0, comm.size())));
    c.set_ranks_reporting(static_cast<uint32_t>(comm.ranks_size()));
    c.set_missing_ranks(static_cast<uint32_t>(comm.missing_ranks_size()));
    c.set_source(std::string(source));
    c.set_nccl_version(status.nccl_version());
    c.set_partial(partial);
    uint64_t max = 0;
    for (const nccl::RasRank& r : comm.ranks()) max = std::max(max, Total(r));
    if (comm.ranks_size() > 0) c.set_collectives_max(max);
    // Ranks of other nodes: only those a hang waits for, the lowest kMaxRemoteRanks.
    std::map<uint32_t, v1::CommunicatorRank> ranks;
    size_t remote = 0;
    const auto keep = [&](v1::CommunicatorRank rank) {
      if (!rank.local()) {
        if (remote == kMaxRemoteRanks) return;
        ++remote;
      }
      const uint32_t key = rank.rank();
      ranks.emplace(key, std::move(rank));
    };
    const auto identify = [&](v1::CommunicatorRank& rank, const auto& r) {
      rank.set_rank(static_cast<uint32_t>(std::max(0, r.rank())));
      rank.set_local(is_local(r.host()));
      if (r.nvml_dev() >= 0) rank.set_device(static_cast<uint32_t>(r.nvml_dev()));
      if (r.pid() > 0) rank.set_pid(static_cast<uint32_t>(r.pid()));
      rank.set_host(r.host());
    };
    for (const nccl::RasRank& r : comm.ranks()) {
      v1::CommunicatorRank rank;
      identify(rank, r);
      const uint64_t total = Total(r);
      rank.set_collectives(total);
      for (const auto& [kind, count] : r.collective_counts()) {
        (*rank.mutable_collectives_by_kind())[kind] = count;
      }
      const nccl::RasRankStatus& s = r.status();
      rank.set_state(v1::RANK_STATE_OK);
      if (s.abort_flag()) {
        rank.set_state(v1::RANK_STATE_ERROR);
        rank.set_error("aborted");
      } else if (s.async_error() != 0 && s.async_error() != 7) {
        rank.set_state(v1::RANK_STATE_ERROR);
        rank.set_error("async error " + NcclResultName(s.async_error()));
      } else if (s.init_state() != 0 && s.init_state() != 7) {
        rank.set_state(v1::RANK_STATE_ERROR);
        rank.set_error("init error " + NcclResultName(s.init_state()));
      }
      if (rank.local() || rank.state() != v1::RANK_STATE_OK || total < max) keep(std::move(rank));
    }
    for (const nccl::RasMissingRank& r : comm.missing_ranks()) {
      v1::CommunicatorRank rank;
      identify(rank, r);
      rank.set_state(r.status().considered_dead() ? v1::RANK_STATE_DEAD
                     : r.status().unresponsive()  ? v1::RANK_STATE_UNRESPONSIVE
                                                  : v1::RANK_STATE_MISSING);
      keep(std::move(rank));
    }
    for (auto& [number, rank] : ranks) *c.add_ranks() = std::move(rank);
    *out.Add() = std::move(c);
  }
}

std::set<std::string, std::less<>> LocalAddresses() {
  std::set<std::string, std::less<>> hosts{"127.0.0.1", "::1", "localhost"};
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return hosts;
  for (const ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
    if (a->ifa_addr == nullptr) continue;
    char text[INET6_ADDRSTRLEN] = {};
    if (a->ifa_addr->sa_family == AF_INET) {
      inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(a->ifa_addr)->sin_addr, text,
                sizeof text);
    } else if (a->ifa_addr->sa_family == AF_INET6) {
      inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(a->ifa_addr)->sin6_addr, text,
                sizeof text);
    } else {
      continue;
    }
    hosts.emplace(text);
  }
  freeifaddrs(list);
  return hosts;
}

// ---------------------------------------------------------------------------------------------

struct NcclRasCollector::Shared {
  enum class Status { kNone, kOk, kAbsent, kFailed };
  struct Latest {
    Status status = Status::kNone;
    std::string error;  // kAbsent, kFailed
    Clock::time_point time;
    google::protobuf::RepeatedPtrField<v1::Communicator> communicators;
  };
  explicit Shared(NcclRasOptions o) : options(std::move(o)), latest(options.addresses.size()) {}

  const NcclRasOptions options;
  std::mutex mu;
  std::condition_variable wake;
  bool stop = false;
  std::vector<Latest> latest;  // by address; under mu
};

NcclRasCollector::NcclRasCollector(NcclRasOptions options)
    : shared_(std::make_shared<Shared>(std::move(options))) {
  thread_ = std::thread(Work, shared_);
}

NcclRasCollector::~NcclRasCollector() {
  {
    std::lock_guard lock(shared_->mu);
    shared_->stop = true;
  }
  shared_->wake.notify_all();
  thread_.join();  // a query in flight ends by its deadline
}

void NcclRasCollector::Work(const std::shared_ptr<Shared>& shared) {
  const NcclRasOptions& o = shared->options;
  const auto period = std::max(o.period, std::chrono::milliseconds(1000));
  // What was last said in the log per address: a state (or a reason) is said once.
  std::vector<std::string> said(o.addresses.size());
  for (;;) {
    const auto started = Clock::now();
    const std::set<std::string, std::less<>> local =
        o.local_hosts.empty() ? LocalAddresses() : o.local_hosts;
    const auto is_local = [&](std::string_view host) { return local.count(host) > 0; };
    for (size_t i = 0; i < o.addresses.size(); ++i) {
      const std::string& address = o.addresses[i];
      Shared::Latest result;
      result.time = Clock::now();
      std::string log;
      try {
        const std::string json = QueryRas(address, o.timeout);
        ParseRasStatus(json, is_local, address, result.communicators);
        result.status = Shared::Status::kOk;
        log = "ok";
        if (said[i] != log) {
          spdlog::info("nccl_ras: {} answers: {} communicator(s) with a rank on this node", address,
                       result.communicators.size());
        }
      } catch (const RasNotListening& e) {
        result.status = Shared::Status::kAbsent;
        result.error = std::string("nothing listening: ") + e.what();
        log = "absent";
        if (said[i] != log) {
          spdlog::info(
              "nccl_ras: nothing listening on {} ({}): no NCCL job here, RAS off or "
              "NCCL_RAS_ADDR elsewhere; no collective series until it answers",
              address, e.what());
        }
      } catch (const RasAnswerError& e) {
        result.status = Shared::Status::kFailed;
        result.error = address + ": " + e.what();
        log = e.what();
        if (said[i] != log) spdlog::warn("nccl_ras: {} (said once until it changes)", result.error);
      }
      said[i] = log;
      std::lock_guard lock(shared->mu);
      shared->latest[i] = std::move(result);
      if (shared->stop) return;
    }
    std::unique_lock lock(shared->mu);
    if (shared->wake.wait_until(lock, started + period, [&] { return shared->stop; })) return;
  }
}

void NcclRasCollector::Collect(v1::NodeReport& report) {
  const NcclRasOptions& o = shared_->options;
  const auto fresh = 2 * std::max(o.period, std::chrono::milliseconds(1000)) + o.timeout;
  const auto now = Clock::now();
  std::string failed, absent;
  bool any_ok = false;
  std::lock_guard lock(shared_->mu);
  for (const Shared::Latest& l : shared_->latest) {
    if (l.status == Shared::Status::kNone || now - l.time > fresh) continue;
    if (l.status == Shared::Status::kAbsent && absent.empty()) absent = l.error;
    if (l.status == Shared::Status::kFailed && failed.empty()) failed = l.error;
    if (l.status != Shared::Status::kOk) continue;
    any_ok = true;
    for (const v1::Communicator& c : l.communicators) {
      if (static_cast<size_t>(report.communicators_size()) >= kMaxCommunicators) break;
      const auto& have = report.communicators();
      if (std::none_of(have.begin(), have.end(),
                       [&](const v1::Communicator& h) { return h.hash() == c.hash(); })) {
        *report.add_communicators() = c;
      }
    }
  }
  if (any_ok) return;
  if (!failed.empty()) throw CollectorError(failed);
  throw SourceAbsent(absent.empty() ? "no RAS answer yet" : absent);
}

}  // namespace accelmon::collectors
