#include "collectors/path_resolver.h"

#include <utility>

namespace accelmon::collectors {
namespace {

std::filesystem::path Join(const std::filesystem::path& root, std::string_view relative) {
  while (!relative.empty() && relative.front() == '/') relative.remove_prefix(1);
  if (relative.empty()) return root;
  return root / std::filesystem::path(relative);
}

}  // namespace

PathResolver::PathResolver(std::filesystem::path procfs, std::filesystem::path sysfs)
    : procfs_(std::move(procfs)), sysfs_(std::move(sysfs)) {}

std::filesystem::path PathResolver::Proc(std::string_view relative) const {
  return Join(procfs_, relative);
}

std::filesystem::path PathResolver::Sys(std::string_view relative) const {
  return Join(sysfs_, relative);
}

}  // namespace accelmon::collectors
