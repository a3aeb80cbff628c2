// What a user would run instead of accelmon's exporter: the same fleet's samples pushed into a
// time-series database by Prometheus remote write 1.0 (protobuf WriteRequest, snappy block
// compression, HTTP POST), as Prometheus and vmagent send it. bench/ingest_vs_vm.sh points it at
// VictoriaMetrics and compares VictoriaMetrics' CPU per device-sample with the exporter's.
//
//   remote_write_load METRICS_FILE HOST:PORT SECONDS [CONNECTIONS]
//
// METRICS_FILE is a /metrics scrape of an exporter fed by `accelmon loadgen`: its series with a
// `node` label are the fleet's (the exporter's own series are left out). Each node becomes one
// WriteRequest holding one sample of each of its series, as one scrape of that node would; the
// requests are sent over CONNECTIONS keep-alive connections (default 4) for SECONDS, every round
// with timestamps one second later, so that nothing is a duplicate. Prints "key value" lines:
// nodes, devices (distinct node and device labels), series, requests, samples, errors, seconds.
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <snappy.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "remote_write.pb.h"

namespace {

namespace prompb = accelmon::bench::prompb;
using Labels = std::vector<std::pair<std::string, std::string>>;

// One exposition line, `name{a="x",b="y"} value`, as sorted labels (with __name__) and a value;
// false for comments, blank lines and what does not parse.
bool ParseLine(std::string_view line, Labels& labels, double& value) {
  labels.clear();
  if (line.empty() || line[0] == '#') return false;
  const size_t name_end = line.find_first_of("{ ");
  if (name_end == std::string_view::npos) return false;
  labels.emplace_back("__name__", std::string(line.substr(0, name_end)));
  size_t i = name_end;
  if (line[i] == '{') {
    ++i;
    while (i < line.size() && line[i] != '}') {
      const size_t eq = line.find('=', i);
      if (eq == std::string_view::npos || eq + 1 >= line.size() || line[eq + 1] != '"')
        return false;
      std::string name(line.substr(i, eq - i));
      std::string text;
      size_t j = eq + 2;
      for (; j < line.size() && line[j] != '"'; ++j) {
        if (line[j] == '\\' && j + 1 < line.size()) {
          ++j;
          text += line[j] == 'n' ? '\n' : line[j];
        } else {
          text += line[j];
        }
      }
      if (j >= line.size()) return false;
      labels.emplace_back(std::move(name), std::move(text));
      i = j + 1;
      if (i < line.size() && line[i] == ',') ++i;
    }
    ++i;  // '}'
  }
  while (i < line.size() && line[i] == ' ') ++i;
  value = std::strtod(std::string(line.substr(i)).c_str(), nullptr);
  std::sort(labels.begin(), labels.end());
  return true;
}

struct Fleet {
  std::vector<prompb::WriteRequest> requests;  // one a node
  size_t devices = 0;
  size_t series = 0;
};

Fleet LoadFleet(const char* path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(std::string("cannot read ") + path);
  std::map<std::string, prompb::WriteRequest> by_node;
  std::set<std::pair<std::string, std::string>> devices;
  Fleet fleet;
  Labels labels;
  double value = 0;
  for (std::string line; std::getline(in, line);) {
    if (!ParseLine(line, labels, value)) continue;
    const auto node =
        std::find_if(labels.begin(), labels.end(), [](const auto& l) { return l.first == "node"; });
    if (node == labels.end()) continue;
    const auto device = std::find_if(labels.begin(), labels.end(),
                                     [](const auto& l) { return l.first == "device"; });
    if (device != labels.end()) devices.emplace(node->second, device->second);
    prompb::TimeSeries* series = by_node[node->second].add_timeseries();
    for (const auto& [n, v] : labels) {
      prompb::Label* label = series->add_labels();
      label->set_name(n);
      label->set_value(v);
    }
    series->add_samples()->set_value(value);
    ++fleet.series;
  }
  for (auto& [node, request] : by_node) fleet.requests.push_back(std::move(request));
  fleet.devices = devices.size();
  return fleet;
}

int Connect(const std::string& host, const std::string& port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), port.c_str(), &hints, &found) != 0 || found == nullptr) {
    throw std::runtime_error("cannot resolve " + host);
  }
  const int fd = socket(found->ai_family, found->ai_socktype, found->ai_protocol);
  const bool connected = fd >= 0 && connect(fd, found->ai_addr, found->ai_addrlen) == 0;
  freeaddrinfo(found);
  if (!connected) throw std::runtime_error("cannot connect to " + host + ":" + port);
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

bool WriteAll(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// Reads one HTTP response (headers, then Content-Length bytes); returns its status, 0 when the
// connection broke.
int ReadResponse(int fd, std::string& buffer) {
  buffer.clear();
  size_t header_end = std::string::npos;
  char chunk[4096];
  while ((header_end = buffer.find("\r\n\r\n")) == std::string::npos) {
    const ssize_t n = recv(fd, chunk, sizeof chunk, 0);
    if (n <= 0) return 0;
    buffer.append(chunk, static_cast<size_t>(n));
  }
  const int status = buffer.size() > 12 ? std::atoi(buffer.c_str() + 9) : 0;
  size_t length = 0;
  std::string lower(buffer, 0, header_end);
  std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
  if (const size_t at = lower.find("content-length:"); at != std::string::npos) {
    length = std::strtoul(lower.c_str() + at + 15, nullptr, 10);
  }
  while (buffer.size() < header_end + 4 + length) {
    const ssize_t n = recv(fd, chunk, sizeof chunk, 0);
    if (n <= 0) return 0;
    buffer.append(chunk, static_cast<size_t>(n));
  }
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s METRICS_FILE HOST:PORT SECONDS [CONNECTIONS]\n", argv[0]);
    return 2;
  }
  try {
    const Fleet fleet = LoadFleet(argv[1]);
    if (fleet.requests.empty()) throw std::runtime_error("no series with a node label");
    const std::string address = argv[2];
    const size_t colon = address.rfind(':');
    const std::string host = address.substr(0, colon), port = address.substr(colon + 1);
    const double seconds = std::atof(argv[3]);
    const size_t connections = argc > 4 ? std::strtoul(argv[4], nullptr, 10) : 4;

    std::atomic<uint64_t> requests{0}, samples{0}, errors{0};
    const auto start = std::chrono::steady_clock::now();
    const auto deadline = start + std::chrono::duration<double>(seconds);
    const int64_t base_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                std::chrono::system_clock::now().time_since_epoch())
                                .count() -
                            3'600'000;  // an hour back: every round stays in the past
    std::vector<std::thread> senders;
    for (size_t c = 0; c < connections; ++c) {
      senders.emplace_back([&, c] {
        const int fd = Connect(host, port);
        std::vector<prompb::WriteRequest> mine;
        for (size_t i = c; i < fleet.requests.size(); i += connections) {
          mine.push_back(fleet.requests[i]);
        }
        std::string wire, compressed, message, response;
        for (int64_t round = 0; std::chrono::steady_clock::now() < deadline; ++round) {
          for (prompb::WriteRequest& request : mine) {
            for (prompb::TimeSeries& series : *request.mutable_timeseries()) {
              prompb::Sample* sample = series.mutable_samples(0);
              sample->set_timestamp(base_ms + round * 1000);
              sample->set_value(sample->value() + 1);
            }
            request.SerializeToString(&wire);
            snappy::Compress(wire.data(), wire.size(), &compressed);
            message = "POST /api/v1/write HTTP/1.1\r\nHost: " + address +
                      "\r\nContent-Type: application/x-protobuf\r\nContent-Encoding: snappy\r\n"
                      "X-Prometheus-Remote-Write-Version: 0.1.0\r\nContent-Length: " +
                      std::to_string(compressed.size()) + "\r\n\r\n";
            message += compressed;
            const int status = WriteAll(fd, message) ? ReadResponse(fd, response) : 0;
            if (status == 0) {
              ++errors;
              close(fd);
              return;
            }
            if (status / 100 != 2) {
              ++errors;
              continue;
            }
            ++requests;
            samples += static_cast<uint64_t>(request.timeseries_size());
          }
        }
        close(fd);
      });
    }
    for (std::thread& t : senders) t.join();
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf(
        "nodes %zu\ndevices %zu\nseries %zu\nrequests %llu\nsamples %llu\nerrors %llu\n"
        "seconds %.3f\n",
        fleet.requests.size(), fleet.devices, fleet.series,
        static_cast<unsigned long long>(requests.load()),
        static_cast<unsigned long long>(samples.load()),
        static_cast<unsigned long long>(errors.load()), elapsed);
    return errors.load() > 0 && requests.load() == 0 ? 1 : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "remote_write_load: %s\n", e.what());
    return 1;
  }
}
