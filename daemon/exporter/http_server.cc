#include "daemon/exporter/http_server.h"

#include <arpa/inet.h>
#include <civetweb.h>
#include <netinet/in.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string_view>
#include <thread>
#include <vector>

#include "daemon/exporter/gzip_encoder.h"
#include "daemon/exporter/status_page_assets.h"
#include "daemon/exporter/zstd_encoder.h"

namespace accelmon {
namespace {

constexpr std::string_view kLandingPage =
    "<html><head><title>accelmon</title></head><body>"
    "<h1>accelmon exporter</h1>"
    "<p><a href=\"/metrics\">Metrics</a> &middot; <a href=\"/healthz\">Health</a></p>"
    "</body></html>\n";

// Returns `status`: non-zero, handled here, civetweb does nothing more.
int Answer(mg_connection* conn, int status, std::string_view reason, std::string_view content_type,
           std::string_view body, std::string_view extra_headers = "") {
  mg_printf(conn,
            "HTTP/1.1 %d %.*s\r\nContent-Type: %.*s\r\nContent-Length: %zu\r\n%.*s"
            "Cache-Control: no-store\r\nConnection: close\r\n\r\n",
            status, static_cast<int>(reason.size()), reason.data(),
            static_cast<int>(content_type.size()), content_type.data(), body.size(),
            static_cast<int>(extra_headers.size()), extra_headers.data());
  mg_write(conn, body.data(), body.size());
  return status;
}

int Reply(mg_connection* conn, std::string_view content_type, std::string_view body) {
  return Answer(conn, 200, "OK", content_type, body);
}

// Asks for basic auth (no body): a browser then asks its user for a password.
int Unauthorized(mg_connection* conn) {
  return Answer(conn, 401, "Unauthorized", "text/plain", "",
                "WWW-Authenticate: Basic realm=\"accelmon\"\r\n");
}

// Every request is answered here, before civetweb would look for a handler or a file.
int BeginRequest(mg_connection* conn) {
  const auto* server = static_cast<const HttpServer*>(mg_get_request_info(conn)->user_data);
  return server->HandleRequest(conn);
}

// RFC 4648 base64, as in an Authorization: Basic header; nullopt when malformed.
std::optional<std::string> DecodeBase64(std::string_view in) {
  static constexpr std::string_view kAlphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  while (!in.empty() && in.back() == '=') in.remove_suffix(1);
  std::string out;
  uint32_t bits = 0;
  int pending = 0;
  for (const char c : in) {
    const size_t value = kAlphabet.find(c);
    if (value == std::string_view::npos) return std::nullopt;
    bits = (bits << 6) | static_cast<uint32_t>(value);
    pending += 6;
    if (pending >= 8) {
      pending -= 8;
      out += static_cast<char>((bits >> pending) & 0xff);
    }
  }
  return out;
}

// Whether `accept` (an Accept-Encoding value) takes `coding` ("gzip", "gzip, deflate",
// "gzip;q=1.0"; not "gzip;q=0").
bool Accepts(std::string_view accept, std::string_view coding) {
  const size_t at = accept.find(coding);
  if (at == std::string_view::npos) return false;
  const std::string_view rest = accept.substr(at + coding.size());
  return !(rest.starts_with(";q=0") && !rest.starts_with(";q=0."));
}

enum class Coding { kIdentity, kGzip, kZstd };

// zstd when the client takes it (smaller and faster), else gzip (what Prometheus asks for).
Coding ChooseCoding(mg_connection* conn) {
  const char* header = mg_get_header(conn, "Accept-Encoding");
  if (header == nullptr) return Coding::kIdentity;
  if (Accepts(header, "zstd")) return Coding::kZstd;
  if (Accepts(header, "gzip")) return Coding::kGzip;
  return Coding::kIdentity;
}

// civetweb hands init_ssl only its own user data, so the server being started is passed here,
// under a lock held for the whole start.
std::mutex g_tls_start_mu;
const WebTlsConfig* g_tls_starting = nullptr;
const HttpServer* g_server_starting = nullptr;
bool g_tls_initialised = false;

// The certificate, its chain and the key of `tls`, loaded into a context of their own (which
// checks that they match); null with the reason in `error` when they do not load.
HttpServer::TlsIdentity LoadIdentity(const WebTlsConfig& tls, std::string* error) {
  HttpServer::TlsIdentity id(SSL_CTX_new(TLS_server_method()), SSL_CTX_free);
  if (!id || SSL_CTX_use_certificate_chain_file(id.get(), tls.cert_file.c_str()) != 1 ||
      SSL_CTX_use_PrivateKey_file(id.get(), tls.key_file.c_str(), SSL_FILETYPE_PEM) != 1 ||
      SSL_CTX_check_private_key(id.get()) != 1) {
    *error = "cannot load the certificate " + tls.cert_file + " with the key " + tls.key_file;
    return nullptr;
  }
  return id;
}

// OpenSSL's certificate callback, at every handshake: serves the identity of the latest reload.
int ServeCurrentIdentity(SSL* ssl, void* arg) {
  const HttpServer::TlsIdentity id = static_cast<const HttpServer*>(arg)->identity();
  if (!id) return 1;  // the context's own
  STACK_OF(X509)* chain = nullptr;
  SSL_CTX_get0_chain_certs(id.get(), &chain);
  return SSL_use_certificate(ssl, SSL_CTX_get0_certificate(id.get())) == 1 &&
                 SSL_use_PrivateKey(ssl, SSL_CTX_get0_privatekey(id.get())) == 1 &&
                 SSL_set1_chain(ssl, chain) == 1
             ? 1
             : 0;
}

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
  SSL_CTX_set_cert_cb(ctx, ServeCurrentIdentity, const_cast<HttpServer*>(g_server_starting));
  return 1;  // civetweb loads nothing more
}

// Opens and closes a connection to our own listener on loopback, which wakes its poll().
void PokeListener(int port, bool ipv6) {
  const int fd = socket(ipv6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return;
  sockaddr_storage address{};
  socklen_t length = 0;
  if (ipv6) {
    auto& a = reinterpret_cast<sockaddr_in6&>(address);
    a.sin6_family = AF_INET6;
    a.sin6_port = htons(static_cast<uint16_t>(port));
    a.sin6_addr = in6addr_loopback;
    length = sizeof a;
  } else {
    auto& a = reinterpret_cast<sockaddr_in&>(address);
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    length = sizeof a;
  }
  connect(fd, reinterpret_cast<const sockaddr*>(&address), length);  // refused is fine too
  close(fd);
}

// A hash of the same kind to check unknown users against, so their answer takes as long.
constexpr const char* kDummyBcrypt = "$2b$10$WZZqgg1a3oNs5I3uG9Zs/uu7WsMgWFrPtbOpAJdu2vfiy1BrKdWeC";

}  // namespace

// What one scrape renders into, kept between scrapes so that a steady-state scrape reuses the
// capacity; a few sets for the server, not one per worker thread (there are hundreds, and each
// set grows to a whole exposition).
struct ScrapeBuffers {
  TextExpositionSink metrics;            // /metrics, by family
  std::string body;                      // the status page's JSON
  std::vector<std::string_view> pieces;  // what the answer is, in order
  GzipEncoder gzip;
  ZstdEncoder zstd;
};

class ScrapeBufferPool {
 public:
  std::unique_ptr<ScrapeBuffers> Take() {
    std::lock_guard lock(mu_);
    if (free_.empty()) return std::make_unique<ScrapeBuffers>();
    auto buffers = std::move(free_.back());
    free_.pop_back();
    return buffers;
  }
  void Give(std::unique_ptr<ScrapeBuffers> buffers) {
    std::lock_guard lock(mu_);
    if (free_.size() < kKept) free_.push_back(std::move(buffers));
  }

 private:
  static constexpr size_t kKept = 2;  // Prometheus pairs scrape at once, rarely more
  std::mutex mu_;
  std::vector<std::unique_ptr<ScrapeBuffers>> free_;
};

ScrapeBufferPool& ScrapeBuffersOf() {
  static ScrapeBufferPool pool;
  return pool;
}

namespace {

// Answers 200 with `buffers.pieces` one after the other, compressed when the client accepts it.
void SendRendered(mg_connection* conn, std::string_view content_type, ScrapeBuffers& buffers,
                  bool head) {
  const Coding coding = ChooseCoding(conn);
  std::string_view compressed;
  size_t length = 0;
  if (coding == Coding::kGzip) compressed = buffers.gzip.Encode(buffers.pieces);
  if (coding == Coding::kZstd) compressed = buffers.zstd.Encode(buffers.pieces);
  if (coding == Coding::kIdentity) {
    for (const std::string_view piece : buffers.pieces) length += piece.size();
  } else {
    length = compressed.size();
  }
  const char* encoding = coding == Coding::kGzip   ? "Content-Encoding: gzip\r\n"
                         : coding == Coding::kZstd ? "Content-Encoding: zstd\r\n"
                                                   : "";
  mg_printf(conn,
            "HTTP/1.1 200 OK\r\nContent-Type: %.*s\r\n"
            "%sVary: Accept-Encoding\r\nContent-Length: %zu\r\nCache-Control: no-store\r\n"
            "Connection: close\r\n\r\n",
            static_cast<int>(content_type.size()), content_type.data(), encoding, length);
  if (head) return;
  if (coding != Coding::kIdentity) {
    mg_write(conn, compressed.data(), compressed.size());
    return;
  }
  for (const std::string_view piece : buffers.pieces) mg_write(conn, piece.data(), piece.size());
}

}  // namespace

HttpServer::HttpServer(const std::string& listen_address, RenderMetricsFn render_metrics,
                       const WebConfig& web_config, const HttpServerLimits& limits)
    : render_metrics_(std::move(render_metrics)),
      web_(std::make_shared<const WebConfig>(web_config)) {
  const WebConfig& web = *web_;
  if (web.tls) {
    std::string error;
    identity_ = LoadIdentity(web.tls_config, &error);
    if (!identity_)
      throw std::runtime_error("cannot serve HTTPS on " + listen_address + ": " + error);
  }
  static const mg_callbacks callbacks = [] {
    mg_callbacks c;
    std::memset(&c, 0, sizeof c);
    c.begin_request = BeginRequest;
    c.init_ssl = InitSsl;
    return c;
  }();
  // civetweb's suffix "s" makes a port HTTPS.
  const std::string ports = web.tls ? listen_address + "s" : listen_address;
  if (web.tls) accelmon_civetweb_ssl_compat();  // loaded: civetweb's dlopen finds it
  const std::string threads = std::to_string(std::max(1, limits.max_connections));
  const std::string timeout_ms = std::to_string(std::max<int64_t>(1, limits.read_timeout.count()));
  // request_timeout_ms bounds the whole request header (a client sending a byte a second is cut
  // off), a TLS handshake, and each response write.
  std::vector<const char*> options{"listening_ports", ports.c_str(),        "num_threads",
                                   threads.c_str(),   "request_timeout_ms", timeout_ms.c_str()};
  if (web.tls) options.insert(options.end(), {"ssl_certificate", web.tls_config.cert_file.c_str()});
  options.push_back(nullptr);
  std::unique_lock tls_lock(g_tls_start_mu);
  g_tls_starting = web.tls ? &web.tls_config : nullptr;
  g_server_starting = this;
  g_tls_initialised = false;
  context_ = mg_start(&callbacks, this, options.data());
  g_tls_starting = nullptr;
  g_server_starting = nullptr;
  if (context_ == nullptr) {
    if (web.tls && !g_tls_initialised) {
      throw std::runtime_error("cannot serve HTTPS on " + listen_address +
                               ": civetweb could not load libssl.so (install libssl-dev), or the "
                               "address is in use");
    }
    throw std::runtime_error("cannot listen for HTTP" + std::string(web.tls ? "S" : "") + " on " +
                             listen_address + " (address in use or not available on this host)");
  }
}

HttpServer::~HttpServer() {
  // civetweb's listener thread sees the stop flag only when its poll() returns, which it does
  // every 2 s when idle: every exporter stop (a restart, every test) waited for that. A
  // connection to our own port wakes it at once; when the listener is not reachable on loopback
  // the stop takes the 2 s as before.
  mg_server_port listener{};
  const bool poke = mg_get_server_ports(context_, 1, &listener) > 0;
  std::atomic<bool> stopped{false};
  std::thread stopper([&] {
    mg_stop(context_);
    stopped = true;
  });
  for (int i = 0; poke && !stopped && i < 250; ++i) {
    PokeListener(listener.port, listener.protocol == 2);  // 1: IPv4, 2: IPv6 (civetweb.h)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  stopper.join();
}

int HttpServer::port() const {
  mg_server_port port{};
  return mg_get_server_ports(context_, 1, &port) > 0 ? port.port : 0;
}

std::shared_ptr<const WebConfig> HttpServer::web() const {
  std::lock_guard lock(mu_);
  return web_;
}

HttpServer::TlsIdentity HttpServer::identity() const {
  std::lock_guard lock(mu_);
  return identity_;
}

void HttpServer::set_reload(ReloadFn reload) {
  std::lock_guard lock(mu_);
  reload_ = std::move(reload);
}

void HttpServer::set_status(RenderStatusFn status) {
  std::lock_guard lock(mu_);
  status_ = std::move(status);
}

void HttpServer::set_readiness(ReadinessFn ready) {
  std::lock_guard lock(mu_);
  readiness_ = std::move(ready);
}

std::optional<std::string> HttpServer::Reconfigure(const WebConfig& next) {
  const std::shared_ptr<const WebConfig> current = web();
  const WebTlsConfig& was = current->tls_config;
  const WebTlsConfig& now = next.tls_config;
  if (next.tls != current->tls) {
    return std::string("TLS on /metrics was turned ") + (next.tls ? "on" : "off") +
           " (tls_server_config): that needs a restart";
  }
  if (next.tls &&
      (now.min_version != was.min_version || now.client_auth_type != was.client_auth_type ||
       now.client_ca_file != was.client_ca_file)) {
    return std::string(
        "tls_server_config's min_version, client_auth_type or client_ca_file changed: that "
        "needs a restart (cert_file, key_file and basic_auth_users change live)");
  }
  TlsIdentity id;
  if (next.tls) {
    std::string error;
    id = LoadIdentity(now, &error);
    if (!id) return error;
  }
  std::lock_guard lock(mu_);
  web_ = std::make_shared<const WebConfig>(next);
  identity_ = std::move(id);
  return std::nullopt;
}

int HttpServer::ServeReload(mg_connection* conn, std::string_view method) const {
  if (method != "POST" && method != "PUT") {
    return Answer(conn, 405, "Method Not Allowed", "text/plain", "use POST or PUT\n",
                  "Allow: POST, PUT\r\n");
  }
  if (!Authorized(conn)) {
    return Unauthorized(conn);
  }
  ReloadFn reload;
  {
    std::lock_guard lock(mu_);
    reload = reload_;
  }
  // As Prometheus answers without --web.enable-lifecycle.
  if (!reload)
    return Answer(conn, 403, "Forbidden", "text/plain", "Lifecycle API is not enabled.\n");
  const std::string error = reload();
  if (!error.empty()) {
    return Answer(conn, 500, "Internal Server Error", "text/plain",
                  "failed to reload config: " + error + "\n");
  }
  return Reply(conn, "text/plain", "");
}

int HttpServer::HandleRequest(mg_connection* conn) const {
  const mg_request_info* info = mg_get_request_info(conn);
  const std::string_view uri = info->local_uri != nullptr ? info->local_uri : "";
  if (uri == "/healthz") return Reply(conn, "text/plain", "ok\n");
  // Ready once constructed: the gRPC server starts before the HTTP side.
  if (uri == "/readyz") {
    ReadinessFn readiness;
    {
      std::lock_guard lock(mu_);
      readiness = readiness_;
    }
    const std::string why = readiness ? readiness() : std::string();
    if (!why.empty()) {
      return Answer(conn, 503, "Service Unavailable", "text/plain", "not ready: " + why + "\n");
    }
    return Reply(conn, "text/plain", "ready\n");
  }
  const std::string_view method = info->request_method != nullptr ? info->request_method : "";
  if (const int status = ServeStatusPage(conn, uri, method); status != 0) return status;
  if (uri == "/-/reload") return ServeReload(conn, method);
  if (uri != "/metrics") return 0;
  if (method != "GET" && method != "HEAD") {
    mg_printf(conn,
              "HTTP/1.1 405 Method Not Allowed\r\nAllow: GET, HEAD\r\nContent-Length: 0\r\n"
              "Connection: close\r\n\r\n");
    return 405;
  }
  if (!Authorized(conn)) return Unauthorized(conn);
  return ServeMetrics(conn, method == "HEAD");
}

// As prometheus-cpp's Exposer checked it: "Authorization: Basic base64(user:password)", the
// password against the user's bcrypt hash; an unknown user costs a bcrypt check too, so its
// answer takes as long.
bool HttpServer::Authorized(mg_connection* conn) const {
  const std::shared_ptr<const WebConfig> web = this->web();  // a reload may swap it meanwhile
  const auto& users = web->basic_auth_users;
  if (users.empty()) return true;
  const char* header = mg_get_header(conn, "Authorization");
  if (header == nullptr) return false;
  const std::string_view value = header;
  if (!value.starts_with("Basic ")) return false;
  const std::optional<std::string> credentials = DecodeBase64(value.substr(6));
  if (!credentials) return false;
  const size_t colon = credentials->find(':');
  if (colon == std::string::npos) return false;
  const std::string user = credentials->substr(0, colon);
  const std::string password = credentials->substr(colon + 1);
  const auto it = users.find(user);
  if (it == users.end()) {
    CheckBcrypt(kDummyBcrypt, password);
    return false;
  }
  return CheckBcrypt(it->second, password);
}

int HttpServer::ServeStatusPage(mg_connection* conn, std::string_view uri,
                                std::string_view method) const {
  const StaticAsset* asset = nullptr;
  const bool api = uri == "/api/v1/status";
  if (!api) {
    const std::string_view path = uri == "/" ? "/index.html" : uri;
    for (const StaticAsset& a : StatusPageAssets()) {
      if (a.path == path) asset = &a;
    }
    if (asset == nullptr && uri != "/") return 0;
  }
  if (method != "GET" && method != "HEAD") {
    return Answer(conn, 405, "Method Not Allowed", "text/plain", "use GET\n",
                  "Allow: GET, HEAD\r\n");
  }
  // The page shows every node and finding: it needs what /metrics needs.
  if (!Authorized(conn)) {
    return Unauthorized(conn);
  }
  RenderStatusFn status;
  {
    std::lock_guard lock(mu_);
    status = status_;
  }
  if (!status) {
    if (uri == "/") return Reply(conn, "text/html; charset=utf-8", kLandingPage);
    return 0;
  }
  if (!api) return Reply(conn, asset->content_type, asset->body);
  char node[256] = "";
  const mg_request_info* info = mg_get_request_info(conn);
  if (info->query_string != nullptr) {
    const std::string_view query = info->query_string;
    mg_get_var(query.data(), query.size(), "node", node, sizeof node);  // < 0: absent
  }
  std::unique_ptr<ScrapeBuffers> buffers = ScrapeBuffersOf().Take();
  status(node, buffers->body);
  buffers->pieces.assign(1, buffers->body);
  SendRendered(conn, "application/json", *buffers, method == "HEAD");
  ScrapeBuffersOf().Give(std::move(buffers));
  return 200;
}

int HttpServer::ServeMetrics(mg_connection* conn, bool head) const {
  std::unique_ptr<ScrapeBuffers> buffers = ScrapeBuffersOf().Take();
  render_metrics_(buffers->metrics, buffers->pieces);
  SendRendered(conn, "text/plain; version=0.0.4; charset=utf-8", *buffers, head);
  ScrapeBuffersOf().Give(std::move(buffers));
  return 200;
}

}  // namespace accelmon
