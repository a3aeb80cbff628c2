// The libFuzzer entry points of accelmon_fuzz: LLVMFuzzerInitialize picks the target that
// ACCELMON_FUZZ_TARGET names (fuzz_target.h), LLVMFuzzerTestOneInput runs it.
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

#include "fuzz_target.h"

namespace accelmon::fuzz {
namespace {

std::map<std::string, Target>& Targets() {
  static auto* targets = new std::map<std::string, Target>;
  return *targets;
}

Target chosen = nullptr;

}  // namespace

bool Register(const char* name, Target target) {
  Targets()[name] = target;
  return true;
}

}  // namespace accelmon::fuzz

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  using namespace accelmon::fuzz;
  const char* name = std::getenv("ACCELMON_FUZZ_TARGET");
  const auto it = name == nullptr ? Targets().end() : Targets().find(name);
  if (it == Targets().end()) {
    std::fprintf(stderr, "accelmon_fuzz: set ACCELMON_FUZZ_TARGET to one of:");
    for (const auto& [n, t] : Targets()) std::fprintf(stderr, " %s", n.c_str());
    std::fprintf(stderr, "\n");
    std::exit(2);
  }
  chosen = it->second;
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return accelmon::fuzz::chosen(data, size);
}
