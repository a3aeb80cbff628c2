// The exporter's HTTP side: /metrics through prometheus-cpp's Exposer, plus /healthz, /readyz
// and a landing page answered before the Exposer's handlers see the request.
#pragma once

#include <prometheus/collectable.h>

#include <memory>
#include <string>

#include "daemon/web_config.h"

namespace prometheus {
class Exposer;
}

namespace accelmon {

class HttpServer {
 public:
  // Listens on `listen_address` ("0.0.0.0:9477", "127.0.0.1:0"), with TLS and basic auth on
  // /metrics as `web` says (/healthz, /readyz and / stay open). Throws std::runtime_error with
  // a one-line reason when it cannot.
  HttpServer(const std::string& listen_address, std::weak_ptr<prometheus::Collectable> metrics,
             const WebConfig& web = {});
  ~HttpServer();

  // The port actually bound (useful with port 0).
  int port() const;

 private:
  std::shared_ptr<const WebConfig> web_;  // outlives the Exposer's auth callback
  std::unique_ptr<prometheus::Exposer> exposer_;
};

}  // namespace accelmon
