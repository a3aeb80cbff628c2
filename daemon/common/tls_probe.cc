#include "daemon/common/tls_probe.h"

#include <fcntl.h>
#include <netdb.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <memory>

namespace accelmon {
namespace {

std::string OpenSslErrors() {
  std::string out;
  while (const unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out;
}

// A TCP connection to host:port within `timeout`, blocking afterwards with the same timeout on
// reads and writes; -1 when it cannot be made.
int Connect(const std::string& host, const std::string& port, std::chrono::milliseconds timeout) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), port.c_str(), &hints, &found) != 0) return -1;
  int fd = -1;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    if (connect(fd, a->ai_addr, a->ai_addrlen) != 0 && errno == EINPROGRESS) {
      pollfd p{.fd = fd, .events = POLLOUT, .revents = 0};
      int error = 0;
      socklen_t length = sizeof error;
      if (poll(&p, 1, static_cast<int>(timeout.count())) != 1 ||
          getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) != 0 || error != 0) {
        close(fd);
        fd = -1;
        continue;
      }
    }
  }
  freeaddrinfo(found);
  if (fd < 0) return -1;
  // Back to blocking, with the timeout on each read and write.
  const int fl = fcntl(fd, F_GETFL);
  fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
  timeval tv{.tv_sec = static_cast<time_t>(timeout.count() / 1000),
             .tv_usec = static_cast<suseconds_t>(timeout.count() % 1000 * 1000)};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  return fd;
}

}  // namespace

bool LooksLikeTlsFailure(const std::string& grpc_error) {
  for (const char* sign : {"Socket closed", "andshake", "verif", "SSL", "ssl", "certificate"}) {
    if (grpc_error.find(sign) != std::string::npos) return true;
  }
  return false;
}

std::optional<std::string> ProbeTls(const std::string& address, const GrpcClientTls& tls,
                                    std::chrono::milliseconds timeout) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) return std::nullopt;
  std::string host = address.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  const std::string name = tls.server_name.empty() ? host : tls.server_name;

  std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> ctx(SSL_CTX_new(TLS_client_method()),
                                                        SSL_CTX_free);
  if (!ctx) return std::nullopt;
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
  const bool roots = tls.ca_file.empty() ? SSL_CTX_set_default_verify_paths(ctx.get()) == 1
                                         : SSL_CTX_load_verify_locations(
                                               ctx.get(), tls.ca_file.c_str(), nullptr) == 1;
  if (!roots) return "cannot load the CA " + tls.ca_file + ": " + OpenSslErrors();
  if (!tls.cert_file.empty() &&
      (SSL_CTX_use_certificate_chain_file(ctx.get(), tls.cert_file.c_str()) != 1 ||
       SSL_CTX_use_PrivateKey_file(ctx.get(), tls.key_file.c_str(), SSL_FILETYPE_PEM) != 1)) {
    return "cannot load the client certificate " + tls.cert_file + ": " + OpenSslErrors();
  }
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);
  // gRPC speaks HTTP/2 over TLS: offer h2, as it does.
  static const unsigned char kAlpn[] = {2, 'h', '2'};
  SSL_CTX_set_alpn_protos(ctx.get(), kAlpn, sizeof kAlpn);

  const int fd = Connect(host, address.substr(colon + 1), timeout);
  if (fd < 0) return std::nullopt;  // unreachable: not a TLS problem
  std::unique_ptr<SSL, decltype(&SSL_free)> ssl(SSL_new(ctx.get()), SSL_free);
  SSL_set_fd(ssl.get(), fd);
  // SSL_set_tlsext_host_name, without its C cast.
  SSL_ctrl(ssl.get(), SSL_CTRL_SET_TLSEXT_HOSTNAME, TLSEXT_NAMETYPE_host_name,
           const_cast<char*>(name.c_str()));
  X509_VERIFY_PARAM* param = SSL_get0_param(ssl.get());
  if (X509_VERIFY_PARAM_set1_ip_asc(param, name.c_str()) != 1) {
    X509_VERIFY_PARAM_set1_host(param, name.c_str(), 0);
  }
  ERR_clear_error();
  std::optional<std::string> why;
  if (SSL_connect(ssl.get()) != 1) {
    const long verify = SSL_get_verify_result(ssl.get());
    if (verify != X509_V_OK) {
      why = "the exporter's certificate does not verify against " +
            (tls.ca_file.empty() ? std::string("the system's roots") : tls.ca_file) + " for \"" +
            name + "\": " + X509_verify_cert_error_string(verify);
    } else {
      why = "the TLS handshake failed: " + OpenSslErrors();
    }
  } else {
    // TLS 1.3: the server checks the client certificate after the client's handshake is done
    // and answers with an alert; otherwise it sends its HTTP/2 settings.
    char byte = 0;
    if (SSL_read(ssl.get(), &byte, 1) <= 0) {
      const std::string errors = OpenSslErrors();
      if (!errors.empty()) {
        why = "the exporter refused this agent's TLS client certificate (" + errors + "): " +
              (tls.cert_file.empty()
                   ? std::string("it requires one (--exporter.tls-cert and --exporter.tls-key)")
                   : "is " + tls.cert_file +
                         " signed by the CA the exporter trusts (--grpc.tls-client-ca)?");
      }
    }
  }
  SSL_shutdown(ssl.get());
  close(fd);
  return why;
}

}  // namespace accelmon
