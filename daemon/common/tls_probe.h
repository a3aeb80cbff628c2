// Why a TLS connection to the exporter fails, in words an operator can act on. gRPC says only
// "Socket closed" when the exporter refuses the agent's client certificate, and "certificate
// verify failed" without the reason; this handshake of our own, with the agent's CA, certificate
// and server name, finds out which.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "daemon/common/tls.h"

namespace accelmon {

// Connects to `address` (host:port), does a TLS handshake as `tls` configures the agent, and
// waits up to `timeout` for the server's first bytes (an alert arrives then when the server
// refuses the client certificate). Returns what went wrong, or nothing when the handshake and
// the first read succeed (or the address cannot be reached at all: not a TLS problem).
std::optional<std::string> ProbeTls(const std::string& address, const GrpcClientTls& tls,
                                    std::chrono::milliseconds timeout);

// Whether a gRPC error message looks like a failed TLS handshake (worth a ProbeTls).
bool LooksLikeTlsFailure(const std::string& grpc_error);

}  // namespace accelmon
