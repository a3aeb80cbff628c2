// A minimal HTTP/1.0 GET over a real TCP socket, for scraping /metrics in tests.
#pragma once

#include <string>
#include <vector>

namespace accelmon::testing {

struct HttpResponse {
  int status = 0;
  std::string headers;
  std::string body;
};

// GET http://host:port/path. Throws std::runtime_error when the connection fails.
HttpResponse HttpGet(const std::string& host, int port, const std::string& path);
// The same with extra request header lines ("Accept-Encoding: gzip").
HttpResponse HttpGet(const std::string& host, int port, const std::string& path,
                     const std::vector<std::string>& headers);

// The body of a gzip'd answer, inflated; a body that is not gzip fails the test.
std::string Gunzip(const std::string& in);

}  // namespace accelmon::testing
