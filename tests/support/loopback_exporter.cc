#include "support/loopback_exporter.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "support/http_get.h"

namespace accelmon::testing {

std::string LoopbackAddress(int port) { return "127.0.0.1:" + std::to_string(port); }

std::vector<Sample> Scrape(const Exporter& exporter) {
  const auto response = HttpGet("127.0.0.1", exporter.web_port(), "/metrics");
  EXPECT_EQ(response.status, 200);
  return ParseExposition(response.body);
}

ExporterOptions OnLoopback(ExporterOptions options, int grpc_port) {
  options.web_listen_address = "127.0.0.1:0";
  options.grpc_listen_address = LoopbackAddress(grpc_port);
  return options;
}

ReservedPort::ReservedPort() {
  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
  const int on = 1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (::setsockopt(fd_, SOL_SOCKET, SO_REUSEPORT, &on, sizeof on) != 0 ||
      ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const std::string error = std::strerror(errno);
    ::close(fd_);
    throw std::runtime_error("reserving a loopback port: " + error);
  }
  port_ = ntohs(addr.sin_port);
}

ReservedPort::~ReservedPort() { ::close(fd_); }

LoopbackExporter::LoopbackExporter(ExporterOptions options, int grpc_port)
    : Exporter(OnLoopback(std::move(options), grpc_port)) {
  Start();
}

}  // namespace accelmon::testing
