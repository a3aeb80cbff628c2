// A fresh directory under /tmp for one test; the test removes it in TearDown.
#pragma once

#include <stdlib.h>

#include <stdexcept>
#include <string>

namespace accelmon::testing {

inline std::string MakeTempDir(const std::string& prefix) {
  std::string pattern = "/tmp/" + prefix + ".XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp " + pattern);
  return pattern;
}

}  // namespace accelmon::testing
