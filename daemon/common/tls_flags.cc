#include "daemon/common/tls_flags.h"

namespace accelmon {

void AddGrpcClientTlsFlags(CLI::App& cmd, GrpcClientTls& tls) {
  cmd.add_flag("--exporter.tls", tls.enabled,
               "Connect with TLS (implied by any other --exporter.tls-* flag); default plain text");
  cmd.add_option("--exporter.tls-ca", tls.ca_file,
                 "PEM CA bundle to verify the exporter with (default: the system's roots)");
  cmd.add_option("--exporter.tls-cert", tls.cert_file,
                 "PEM client certificate for mutual TLS (with --exporter.tls-key)");
  cmd.add_option("--exporter.tls-key", tls.key_file, "PEM private key of --exporter.tls-cert");
  cmd.add_option("--exporter.tls-server-name", tls.server_name,
                 "Name to verify in the exporter's certificate when it differs from the address");
}

void ImplyClientTls(GrpcClientTls& tls) {
  tls.enabled =
      tls.enabled || !tls.ca_file.empty() || !tls.cert_file.empty() || !tls.server_name.empty();
}

void AddGrpcServerTlsFlags(CLI::App& cmd, GrpcServerTls& tls) {
  cmd.add_option("--grpc.tls-cert", tls.cert_file,
                 "PEM certificate (chain) for agent streams; TLS when set (with --grpc.tls-key)");
  cmd.add_option("--grpc.tls-key", tls.key_file, "PEM private key of --grpc.tls-cert");
  cmd.add_option("--grpc.tls-client-ca", tls.client_ca_file,
                 "PEM CA bundle: require and verify agents' client certificates (mutual TLS); a "
                 "report's node must then match the certificate's DNS name (or common name)");
  cmd.add_option("--grpc.reader-names", tls.reader_names,
                 "With mutual TLS: client certificate names (DNS name, or common name) that may "
                 "read nodes and findings through the Query API (GetNodes, GetFindings, Watch); "
                 "comma-separated or repeated. Agents' certificates may not; empty: nobody")
      ->delimiter(',')
      ->allow_extra_args(false);
}

}  // namespace accelmon
