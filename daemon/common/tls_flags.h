// The command-line flags of TLS to an exporter (agent, replay) and of TLS on the ingest port
// (exporter), declared once.
#pragma once

#include <CLI/CLI.hpp>

#include "daemon/common/tls.h"

namespace accelmon {

// --exporter.tls, --exporter.tls-ca, --exporter.tls-cert, --exporter.tls-key,
// --exporter.tls-server-name.
void AddGrpcClientTlsFlags(CLI::App& cmd, GrpcClientTls& tls);

// Any --exporter.tls-* file or name implies --exporter.tls; call after parsing.
void ImplyClientTls(GrpcClientTls& tls);

// --grpc.tls-cert, --grpc.tls-key, --grpc.tls-client-ca. Certificate files are re-read when they
// change (checked every 10s).
void AddGrpcServerTlsFlags(CLI::App& cmd, GrpcServerTls& tls);

}  // namespace accelmon
