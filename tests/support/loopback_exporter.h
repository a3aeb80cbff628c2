// Exporters for tests on loopback ports that the kernel chooses and the test reads back: no test
// picks a port, lets it go and uses it later, so tests running in parallel never race for one.
#pragma once

#include <string>
#include <vector>

#include "daemon/exporter/exporter.h"
#include "support/prom_text.h"

namespace accelmon::testing {

// "127.0.0.1:PORT".
std::string LoopbackAddress(int port);

// `options` listening on loopback: /metrics on a port of the kernel's choosing, gRPC ingest on
// `grpc_port` (0: the kernel's choice too). For an Exporter a test starts itself.
ExporterOptions OnLoopback(ExporterOptions options = {}, int grpc_port = 0);

// A TCP port on 127.0.0.1 that the kernel chose, kept bound (not listening) for this object's
// life with SO_REUSEPORT, as gRPC binds its listening sockets: an exporter can listen on it, stop,
// and listen on it again, while the kernel hands it to nobody else (a bind to port 0 never shares
// a port). Until an exporter listens there, connections are refused. For tests that need an
// exporter's ingest address before it starts, or the same one across its restart.
class ReservedPort {
 public:
  ReservedPort();
  ~ReservedPort();
  ReservedPort(const ReservedPort&) = delete;
  ReservedPort& operator=(const ReservedPort&) = delete;

  int port() const { return port_; }
  std::string address() const { return LoopbackAddress(port_); }

 private:
  int fd_ = -1;
  int port_ = 0;
};

// An exporter on loopback (OnLoopback), started on construction and, as every Exporter, stopped
// on destruction. Pass a ReservedPort's port as `grpc_port` to keep one address across restarts.
// Read the ports back with web_port() and grpc_port().
class LoopbackExporter : public Exporter {
 public:
  explicit LoopbackExporter(ExporterOptions options = {}, int grpc_port = 0);

  std::string grpc_address() const { return LoopbackAddress(grpc_port()); }
};

// GET /metrics of `exporter` (plain HTTP), parsed; a status other than 200 fails the test.
std::vector<Sample> Scrape(const Exporter& exporter);

}  // namespace accelmon::testing
