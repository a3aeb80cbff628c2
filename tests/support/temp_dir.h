// A fresh directory under /tmp for one test: MakeTempDir (the test removes it in TearDown), or a
// TempDir that removes it when it goes. Short enough for a Unix socket path inside it.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <stdexcept>
#include <string>

namespace accelmon::testing {

inline std::string MakeTempDir(const std::string& prefix) {
  std::string pattern = "/tmp/" + prefix + ".XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp " + pattern);
  return pattern;
}

class TempDir {
 public:
  explicit TempDir(const std::string& prefix) : path_(MakeTempDir(prefix)) {}
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace accelmon::testing
