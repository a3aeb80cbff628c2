#include "daemon/http_server.h"

#include <CivetServer.h>
#include <civetweb.h>
#include <openssl/ssl.h>
#include <prometheus/exposer.h>

#include <mutex>
#include <stdexcept>
#include <string_view>

namespace accelmon {
namespace {

constexpr std::string_view kLandingPage =
    "<html><head><title>accelmon</title></head><body>"
    "<h1>accelmon exporter</h1>"
    "<p><a href=\"/metrics\">Metrics</a> &middot; <a href=\"/healthz\">Health</a></p>"
    "</body></html>\n";

int Reply(mg_connection* conn, std::string_view content_type, std::string_view body) {
  mg_printf(conn,
            "HTTP/1.1 200 OK\r\nContent-Type: %.*s\r\nContent-Length: %zu\r\n"
            "Cache-Control: no-store\r\nConnection: close\r\n\r\n",
            static_cast<int>(content_type.size()), content_type.data(), body.size());
  mg_write(conn, body.data(), body.size());
  return 200;  // non-zero: handled here, civetweb does nothing more
}

// Runs for every request before civetweb's URI handlers (the Exposer's /metrics).
int BeginRequest(mg_connection* conn) {
  const mg_request_info* info = mg_get_request_info(conn);
  const std::string_view uri = info->local_uri != nullptr ? info->local_uri : "";
  if (uri == "/healthz") return Reply(conn, "text/plain", "ok\n");
  // Ready once constructed: the gRPC server starts before the HTTP side.
  if (uri == "/readyz") return Reply(conn, "text/plain", "ready\n");
  if (uri == "/") return Reply(conn, "text/html; charset=utf-8", kLandingPage);
  return 0;
}

// civetweb hands init_ssl only its own user data, so the server being started is passed here,
// under a lock held for the whole start.
std::mutex g_tls_start_mu;
const WebTlsConfig* g_tls_starting = nullptr;
bool g_tls_initialised = false;

extern "C" int accelmon_civetweb_ssl_compat();

int AcceptAnyCertificate(int, X509_STORE_CTX*) { return 1; }

// Sets up civetweb's SSL_CTX ourselves: certificate and key from separate files (civetweb wants
// them in one), TLS 1.2 at least, and exporter-toolkit's client_auth_type semantics.
int InitSsl(void* ssl_ctx, void*) {
  const WebTlsConfig* tls = g_tls_starting;
  if (tls == nullptr) return -1;
  g_tls_initialised = true;
  auto* ctx = static_cast<SSL_CTX*>(ssl_ctx);
  SSL_CTX_set_min_proto_version(ctx, tls->min_version == "TLS13" ? TLS1_3_VERSION : TLS1_2_VERSION);
  if (SSL_CTX_use_certificate_chain_file(ctx, tls->cert_file.c_str()) != 1 ||
      SSL_CTX_use_PrivateKey_file(ctx, tls->key_file.c_str(), SSL_FILETYPE_PEM) != 1 ||
      SSL_CTX_check_private_key(ctx) != 1) {
    return -1;
  }
  const std::string& type = tls->client_auth_type;
  if (!tls->client_ca_file.empty()) {
    if (SSL_CTX_load_verify_locations(ctx, tls->client_ca_file.c_str(), nullptr) != 1) return -1;
    SSL_CTX_set_client_CA_list(ctx, SSL_load_client_CA_file(tls->client_ca_file.c_str()));
  }
  if (type == "RequestClientCert") {
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, AcceptAnyCertificate);
  } else if (type == "RequireAnyClientCert") {
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT,
                       AcceptAnyCertificate);
  } else if (type == "VerifyClientCertIfGiven") {
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
  } else if (type == "RequireAndVerifyClientCert") {
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  } else {
    SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, nullptr);
  }
  return 1;  // civetweb loads nothing more
}

// A hash of the same kind to check unknown users against, so their answer takes as long.
constexpr const char* kDummyBcrypt = "$2b$10$WZZqgg1a3oNs5I3uG9Zs/uu7WsMgWFrPtbOpAJdu2vfiy1BrKdWeC";

}  // namespace

HttpServer::HttpServer(const std::string& listen_address,
                       std::weak_ptr<prometheus::Collectable> metrics, const WebConfig& web)
    : web_(std::make_shared<const WebConfig>(web)) {
  static const CivetCallbacks callbacks = [] {
    CivetCallbacks c;  // its constructor zeroes every callback
    c.begin_request = BeginRequest;
    c.init_ssl = InitSsl;
    return c;
  }();
  // civetweb's suffix "s" makes a port HTTPS.
  const std::string ports = web_->tls ? listen_address + "s" : listen_address;
  if (web_->tls) accelmon_civetweb_ssl_compat();  // loaded: civetweb's dlopen finds it
  std::unique_lock tls_lock(g_tls_start_mu);
  g_tls_starting = web_->tls ? &web_->tls_config : nullptr;
  g_tls_initialised = false;
  try {
    std::vector<std::string> options{"listening_ports", ports, "num_threads", "4"};
    if (web_->tls) {
      options.insert(options.end(), {"ssl_certificate", web_->tls_config.cert_file});
    }
    exposer_ = std::make_unique<prometheus::Exposer>(std::move(options), &callbacks);
  } catch (const std::exception& e) {
    g_tls_starting = nullptr;
    if (web_->tls && !g_tls_initialised) {
      throw std::runtime_error("cannot serve HTTPS on " + listen_address +
                               ": civetweb could not load libssl.so (install libssl-dev), or the "
                               "address is in use");
    }
    throw std::runtime_error("cannot listen for HTTP" + std::string(web_->tls ? "S" : "") + " on " +
                             listen_address + " (address in use or not available on this host)");
  }
  g_tls_starting = nullptr;
  tls_lock.unlock();
  if (!web_->basic_auth_users.empty()) {
    // Registered before the collectable: /metrics never answers without it.
    std::weak_ptr<const WebConfig> config = web_;
    exposer_->RegisterAuth(
        [config](const std::string& user, const std::string& password) {
          const auto web_config = config.lock();
          if (!web_config) return false;
          const auto it = web_config->basic_auth_users.find(user);
          if (it == web_config->basic_auth_users.end()) {
            CheckBcrypt(kDummyBcrypt, password);
            return false;
          }
          return CheckBcrypt(it->second, password);
        },
        "accelmon", "/metrics");
  }
  exposer_->RegisterCollectable(metrics);
}

HttpServer::~HttpServer() = default;

int HttpServer::port() const {
  const auto ports = exposer_->GetListeningPorts();
  return ports.empty() ? 0 : ports.front();
}

}  // namespace accelmon
