// Resolves procfs and sysfs paths against configurable roots (--path.procfs, --path.sysfs), as
// node_exporter does, so collectors run unchanged over fixture trees in tests.
#pragma once

#include <filesystem>
#include <string_view>

namespace accelmon::collectors {

class PathResolver {
 public:
  explicit PathResolver(std::filesystem::path procfs = "/proc",
                        std::filesystem::path sysfs = "/sys");

  // Proc("meminfo") -> <procfs>/meminfo. A leading '/' in `relative` is ignored.
  std::filesystem::path Proc(std::string_view relative) const;
  std::filesystem::path Sys(std::string_view relative) const;

  const std::filesystem::path& procfs_root() const { return procfs_; }
  const std::filesystem::path& sysfs_root() const { return sysfs_; }

 private:
  std::filesystem::path procfs_;
  std::filesystem::path sysfs_;
};

}  // namespace accelmon::collectors
