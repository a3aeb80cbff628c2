#include "daemon/exporter/web_config.h"

#include <crypt.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <set>

#include "daemon/common/tls.h"

namespace accelmon {
namespace {

class Reader {
 public:
  explicit Reader(std::string path) : path_(std::move(path)) {
    dir_ = std::filesystem::path(path_).parent_path();
  }

  [[noreturn]] void Fail(const YAML::Node& at, const std::string& what) const {
    const int line = at.Mark().line >= 0 ? at.Mark().line + 1 : 1;
    throw WebConfigError(path_ + ":" + std::to_string(line) + ": " + what);
  }

  // Checks every key of `map` against the supported and the known-but-unsupported ones.
  void CheckKeys(const YAML::Node& map, const std::string& section,
                 const std::set<std::string>& supported,
                 const std::set<std::string>& unsupported) const {
    if (!map.IsMap()) Fail(map, section + " must be a mapping");
    for (const auto& kv : map) {
      const auto key = kv.first.as<std::string>();
      const std::string name = section.empty() ? key : section + "." + key;
      if (unsupported.count(key) != 0) Fail(kv.first, name + " is not supported by accelmon");
      if (supported.count(key) == 0) Fail(kv.first, "unknown key " + name);
    }
  }

  void Readable(const YAML::Node& at, const std::string& file, const std::string& name) const {
    if (!std::ifstream(file)) Fail(at, name + " " + file + " cannot be read");
  }

  std::string String(const YAML::Node& node, const std::string& name) const {
    if (!node.IsScalar()) Fail(node, name + " must be a string");
    return node.as<std::string>();
  }

  std::string File(const YAML::Node& node, const std::string& name) const {
    const std::string value = String(node, name);
    if (value.empty()) Fail(node, name + " is empty");
    std::filesystem::path p(value);
    return p.is_absolute() || dir_.empty() ? value : (dir_ / p).string();
  }

 private:
  std::string path_;
  std::filesystem::path dir_;
};

const std::set<std::string> kClientAuthTypes = {"NoClientCert", "RequestClientCert",
                                                "RequireAnyClientCert", "VerifyClientCertIfGiven",
                                                "RequireAndVerifyClientCert"};

void ReadTls(const Reader& r, const YAML::Node& node, WebConfig& config) {
  r.CheckKeys(node, "tls_server_config",
              {"cert_file", "key_file", "client_ca_file", "client_auth_type", "min_version"},
              {"cert", "key", "client_ca", "client_allowed_sans", "cipher_suites",
               "curve_preferences", "max_version", "prefer_server_cipher_suites"});
  WebTlsConfig& tls = config.tls_config;
  if (!node["cert_file"]) r.Fail(node, "tls_server_config.cert_file is missing");
  if (!node["key_file"]) r.Fail(node, "tls_server_config.key_file is missing");
  tls.cert_file = r.File(node["cert_file"], "tls_server_config.cert_file");
  tls.key_file = r.File(node["key_file"], "tls_server_config.key_file");
  r.Readable(node["cert_file"], tls.cert_file, "tls_server_config.cert_file");
  r.Readable(node["key_file"], tls.key_file, "tls_server_config.key_file");
  if (auto e = CheckKeyPair(tls.cert_file, tls.key_file, "tls_server_config")) {
    r.Fail(node["key_file"], *e);
  }
  if (node["client_auth_type"]) {
    tls.client_auth_type = r.String(node["client_auth_type"], "tls_server_config.client_auth_type");
    if (kClientAuthTypes.count(tls.client_auth_type) == 0) {
      r.Fail(node["client_auth_type"],
             "client_auth_type \"" + tls.client_auth_type +
                 "\" is not one of NoClientCert, RequestClientCert, RequireAnyClientCert, "
                 "VerifyClientCertIfGiven, RequireAndVerifyClientCert");
    }
  }
  const bool verifies = tls.client_auth_type == "VerifyClientCertIfGiven" ||
                        tls.client_auth_type == "RequireAndVerifyClientCert";
  if (node["client_ca_file"]) {
    tls.client_ca_file = r.File(node["client_ca_file"], "tls_server_config.client_ca_file");
    if (auto e = CheckCaFile(tls.client_ca_file, "tls_server_config.client_ca_file")) {
      r.Fail(node["client_ca_file"], *e);
    }
    if (tls.client_auth_type == "NoClientCert") {
      r.Fail(node["client_ca_file"],
             "client_ca_file is set but client_auth_type is NoClientCert (set "
             "RequireAndVerifyClientCert)");
    }
  } else if (verifies) {
    r.Fail(node, "client_auth_type " + tls.client_auth_type + " needs client_ca_file");
  }
  if (node["min_version"]) {
    tls.min_version = r.String(node["min_version"], "tls_server_config.min_version");
    if (tls.min_version != "TLS12" && tls.min_version != "TLS13") {
      r.Fail(node["min_version"], "min_version must be TLS12 or TLS13 (older versions are off)");
    }
  }
  config.tls = true;
}

void ReadUsers(const Reader& r, const YAML::Node& node, WebConfig& config) {
  if (node.IsNull()) return;
  if (!node.IsMap()) r.Fail(node, "basic_auth_users must be a mapping of user: bcrypt hash");
  for (const auto& kv : node) {
    const std::string user = r.String(kv.first, "a basic_auth_users name");
    if (user.empty() || user.find(':') != std::string::npos) {
      r.Fail(kv.first, "basic_auth_users: \"" + user + "\" is not a valid user name");
    }
    const std::string hash = r.String(kv.second, "basic_auth_users." + user);
    if (hash.rfind("$2", 0) != 0 || crypt_checksalt(hash.c_str()) != CRYPT_SALT_OK) {
      r.Fail(kv.second, "basic_auth_users." + user +
                            " is not a bcrypt hash (make one with `htpasswd -nBC 10 \"\" | tr "
                            "-d ':\\n'`)");
    }
    config.basic_auth_users[user] = hash;
  }
}

}  // namespace

WebConfig LoadWebConfig(const std::string& path) {
  const Reader r(path);
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::BadFile&) {
    throw WebConfigError(path + ":1: cannot be read");
  } catch (const YAML::ParserException& e) {
    throw WebConfigError(path + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
  WebConfig config;
  if (root.IsNull()) return config;
  try {
    r.CheckKeys(root, "", {"tls_server_config", "basic_auth_users"}, {"http_server_config"});
    if (root["tls_server_config"] && !root["tls_server_config"].IsNull()) {
      ReadTls(r, root["tls_server_config"], config);
    }
    if (root["basic_auth_users"]) ReadUsers(r, root["basic_auth_users"], config);
  } catch (const YAML::Exception& e) {
    throw WebConfigError(path + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
  return config;
}

bool CheckBcrypt(const std::string& hash, const std::string& password) {
  // crypt_data is 32 KiB: keep it off civetweb's worker stacks.
  auto data = std::make_unique<crypt_data>();
  const char* out = crypt_r(password.c_str(), hash.c_str(), data.get());
  // crypt() reads up to the first NUL: "s3cret\0anything" would pass as "s3cret". Checked after
  // the hash, so such a try takes as long as any other.
  if (password.find('\0') != std::string::npos) return false;
  if (out == nullptr || out[0] == '*') return false;
  const std::string_view result(out);
  if (result.size() != hash.size()) return false;
  unsigned char diff = 0;  // constant time over the hash
  for (size_t i = 0; i < hash.size(); ++i) diff |= static_cast<unsigned char>(result[i] ^ hash[i]);
  return diff == 0;
}

}  // namespace accelmon
