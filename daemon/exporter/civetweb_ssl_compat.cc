// Makes Debian 12's civetweb (1.15) serve HTTPS with OpenSSL 3. civetweb loads libssl with
// dlopen("libssl.so") and looks up SSL_get_peer_certificate, which OpenSSL 3 has only as a macro;
// the missing entry is called on every HTTPS connection and crashes (civetweb issue #1334). This
// library's soname is "libssl.so": loaded before civetweb starts, it is what that dlopen finds,
// and civetweb's other lookups reach the real libssl.so.3 through this library's dependency.
#include <openssl/ssl.h>

#undef SSL_get_peer_certificate

extern "C" {

__attribute__((visibility("default"))) X509* SSL_get_peer_certificate(const SSL* ssl) {
  return SSL_get1_peer_certificate(ssl);
}

// Referenced by the HTTP server so that the linker keeps this library loaded.
__attribute__((visibility("default"))) int accelmon_civetweb_ssl_compat() { return 1; }
}
