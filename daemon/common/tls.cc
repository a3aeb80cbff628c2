#include "daemon/common/tls.h"

#include <grpc/grpc_security_constants.h>
#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_credentials_options.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <cstdio>

namespace accelmon {
namespace {

struct FileCloser {
  void operator()(FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<FILE, FileCloser>;
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct KeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};

std::optional<std::string> OpenPem(const std::string& path, const std::string& what, File& out) {
  out.reset(std::fopen(path.c_str(), "r"));
  if (!out) return what + " " + path + ": cannot be read";
  return std::nullopt;
}

}  // namespace

std::optional<std::string> CheckKeyPair(const std::string& cert_file, const std::string& key_file,
                                        const std::string& what) {
  File f;
  if (auto e = OpenPem(cert_file, what + " certificate", f)) return e;
  std::unique_ptr<X509, X509Free> cert(PEM_read_X509(f.get(), nullptr, nullptr, nullptr));
  if (!cert) return what + " certificate " + cert_file + ": no PEM certificate in it";
  if (auto e = OpenPem(key_file, what + " key", f)) return e;
  std::unique_ptr<EVP_PKEY, KeyFree> key(PEM_read_PrivateKey(f.get(), nullptr, nullptr, nullptr));
  if (!key) return what + " key " + key_file + ": no unencrypted PEM private key in it";
  if (X509_check_private_key(cert.get(), key.get()) != 1) {
    return what + " key " + key_file + " does not belong to certificate " + cert_file;
  }
  return std::nullopt;
}

std::optional<std::string> CheckCaFile(const std::string& ca_file, const std::string& what) {
  File f;
  if (auto e = OpenPem(ca_file, what, f)) return e;
  std::unique_ptr<X509, X509Free> cert(PEM_read_X509(f.get(), nullptr, nullptr, nullptr));
  if (!cert) return what + " " + ca_file + ": no PEM certificate in it";
  return std::nullopt;
}

std::optional<std::string> CheckServerTls(const GrpcServerTls& tls) {
  if (tls.cert_file.empty() != tls.key_file.empty()) {
    return std::string("--grpc.tls-cert and --grpc.tls-key go together");
  }
  if (tls.mutual() && !tls.enabled()) {
    return std::string("--grpc.tls-client-ca needs --grpc.tls-cert and --grpc.tls-key");
  }
  if (!tls.enabled()) return std::nullopt;
  if (auto e = CheckKeyPair(tls.cert_file, tls.key_file, "--grpc.tls")) return e;
  if (tls.mutual()) return CheckCaFile(tls.client_ca_file, "--grpc.tls-client-ca");
  return std::nullopt;
}

std::optional<std::string> CheckClientTls(const GrpcClientTls& tls) {
  if (tls.cert_file.empty() != tls.key_file.empty()) {
    return std::string("--exporter.tls-cert and --exporter.tls-key go together");
  }
  if (!tls.cert_file.empty()) {
    if (auto e = CheckKeyPair(tls.cert_file, tls.key_file, "--exporter.tls")) return e;
  }
  if (!tls.ca_file.empty()) return CheckCaFile(tls.ca_file, "--exporter.tls-ca");
  return std::nullopt;
}

std::shared_ptr<grpc::ServerCredentials> MakeServerCredentials(const GrpcServerTls& tls) {
  if (!tls.enabled()) return grpc::InsecureServerCredentials();
  auto provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
      tls.key_file, tls.cert_file, tls.client_ca_file, kCertificateRefreshSeconds);
  grpc::experimental::TlsServerCredentialsOptions options(provider);
  options.watch_identity_key_cert_pairs();
  if (tls.mutual()) {
    options.watch_root_certs();
    options.set_cert_request_type(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  } else {
    options.set_cert_request_type(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  }
  return grpc::experimental::TlsServerCredentials(options);
}

std::shared_ptr<grpc::ChannelCredentials> MakeChannelCredentials(const GrpcClientTls& tls,
                                                                 grpc::ChannelArguments& args) {
  if (!tls.enabled) return grpc::InsecureChannelCredentials();
  grpc::experimental::TlsChannelCredentialsOptions options;
  if (!tls.ca_file.empty() || !tls.cert_file.empty()) {
    options.set_certificate_provider(
        std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
            tls.key_file, tls.cert_file, tls.ca_file, kCertificateRefreshSeconds));
    if (!tls.ca_file.empty()) options.watch_root_certs();  // else the system roots
    if (!tls.cert_file.empty()) options.watch_identity_key_cert_pairs();
  }
  if (!tls.server_name.empty()) args.SetSslTargetNameOverride(tls.server_name);
  return grpc::experimental::TlsCredentials(options);
}

std::vector<std::string> ClientCertificateNames(const grpc::AuthContext& context) {
  std::vector<std::string> names;
  for (const auto& v : context.FindPropertyValues(GRPC_PEER_DNS_PROPERTY_NAME)) {
    names.emplace_back(v.data(), v.size());
  }
  if (names.empty()) {
    for (const auto& v : context.FindPropertyValues(GRPC_X509_CN_PROPERTY_NAME)) {
      names.emplace_back(v.data(), v.size());
    }
  }
  return names;
}

}  // namespace accelmon
