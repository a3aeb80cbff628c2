// TLS for the agent -> exporter stream: gRPC's TLS credentials over a file-watching certificate
// provider, so certificates are re-read when they change on disk. Plain text stays the default.
#pragma once

#include <grpcpp/security/auth_context.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/support/channel_arguments.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace accelmon {

// How often gRPC re-reads the certificate, key and CA files (agent and exporter alike).
inline constexpr unsigned kCertificateRefreshSeconds = 10;

// The exporter's ingest port. TLS when cert and key are set; mutual TLS with a client CA.
struct GrpcServerTls {
  std::string cert_file;
  std::string key_file;
  std::string client_ca_file;  // requires and verifies client certificates
  // With mutual TLS: the client certificate names that may read through the Query API (GetNodes,
  // GetFindings, Watch). An agent's certificate is not a reader's: empty, nobody may read.
  std::vector<std::string> reader_names;

  bool enabled() const { return !cert_file.empty(); }
  bool mutual() const { return !client_ca_file.empty(); }
};

// The agent's connection. TLS when `enabled`; the system roots unless ca_file is set.
struct GrpcClientTls {
  bool enabled = false;
  std::string ca_file;
  std::string cert_file;  // client certificate for mutual TLS
  std::string key_file;
  std::string server_name;  // name to verify when it differs from the address
};

// One line saying what is wrong with the settings or their files, or nothing when all is well
// (both halves of a key pair given, readable PEM, key matching certificate).
std::optional<std::string> CheckServerTls(const GrpcServerTls& tls);
std::optional<std::string> CheckClientTls(const GrpcClientTls& tls);

std::shared_ptr<grpc::ServerCredentials> MakeServerCredentials(const GrpcServerTls& tls);
// May add the target name override to `args`.
std::shared_ptr<grpc::ChannelCredentials> MakeChannelCredentials(const GrpcClientTls& tls,
                                                                 grpc::ChannelArguments& args);

// The names a verified client certificate vouches for: its DNS subject alternative names, or
// its common name when it has none. Empty without a client certificate.
std::vector<std::string> ClientCertificateNames(const grpc::AuthContext& context);

// PEM checks shared with the HTTPS side. `what` names the setting in the message.
std::optional<std::string> CheckKeyPair(const std::string& cert_file, const std::string& key_file,
                                        const std::string& what);
std::optional<std::string> CheckCaFile(const std::string& ca_file, const std::string& what);

}  // namespace accelmon
