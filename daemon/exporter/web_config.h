// The /metrics side's TLS and basic auth, from a Prometheus exporter-toolkit web config file
// (--web.config.file), so the same file works for accelmon and Prometheus' own exporters.
#pragma once

#include <map>
#include <stdexcept>
#include <string>

namespace accelmon {

struct WebTlsConfig {
  std::string cert_file;  // resolved against the config file's folder
  std::string key_file;
  std::string client_ca_file;
  // exporter-toolkit's names: NoClientCert, RequestClientCert, RequireAnyClientCert,
  // VerifyClientCertIfGiven, RequireAndVerifyClientCert.
  std::string client_auth_type = "NoClientCert";
  std::string min_version = "TLS12";  // TLS12 or TLS13
};

struct WebConfig {
  bool tls = false;
  WebTlsConfig tls_config;
  std::map<std::string, std::string> basic_auth_users;  // user -> bcrypt hash
};

// "FILE:LINE: what is wrong".
class WebConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Reads and checks the file (unknown keys are errors, as in exporter-toolkit; certificate and
// key must load and match). An empty file means no TLS and no auth.
WebConfig LoadWebConfig(const std::string& path);

// True when `password` matches the bcrypt `hash` ($2y$, $2b$, $2a$). Takes bcrypt's time.
bool CheckBcrypt(const std::string& hash, const std::string& password);

}  // namespace accelmon
