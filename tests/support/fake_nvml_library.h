// The fake libnvidia-ml (tests/fakes/fake_nvml.cc) loaded for the rest of the test process, for
// tests that script it through its fake_nvml_* functions. The fake's state is never freed (a hung
// caller may outlive main); while the library stays loaded LeakSanitizer sees it as reachable,
// whereas a test that loads and unloads it leaves that state behind as a leak at exit.
#pragma once

#include "collectors/shared_library.h"

namespace accelmon::testing {

inline const collectors::SharedLibrary& FakeNvmlLibrary(const char* path) {
  static const auto* library = new collectors::SharedLibrary(path);  // never unloaded
  return *library;
}

}  // namespace accelmon::testing
