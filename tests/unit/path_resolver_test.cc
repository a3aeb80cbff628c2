#include "collectors/path_resolver.h"

#include <gtest/gtest.h>

namespace accelmon::collectors {
namespace path_resolver_test {
namespace {

TEST(PathResolver, DefaultsToTheRealMounts) {
  PathResolver paths;
  EXPECT_EQ(paths.Proc("meminfo"), "/proc/meminfo");
  EXPECT_EQ(paths.Sys("class/net"), "/sys/class/net");
}

TEST(PathResolver, JoinsUnderConfiguredRoots) {
  PathResolver paths("/tmp/fixture/proc", "/tmp/fixture/sys");
  EXPECT_EQ(paths.Proc("meminfo"), "/tmp/fixture/proc/meminfo");
  EXPECT_EQ(paths.Proc("pressure/memory"), "/tmp/fixture/proc/pressure/memory");
  EXPECT_EQ(paths.Sys("class/infiniband"), "/tmp/fixture/sys/class/infiniband");
}

TEST(PathResolver, LeadingSlashStaysUnderTheRoot) {
  // A collector writing "/meminfo" must not escape to the host's /meminfo.
  PathResolver paths("fixtures/proc", "fixtures/sys");
  EXPECT_EQ(paths.Proc("/meminfo"), "fixtures/proc/meminfo");
  EXPECT_EQ(paths.Sys("//class/net"), "fixtures/sys/class/net");
  EXPECT_EQ(paths.Proc(""), "fixtures/proc");
}

}  // namespace
}  // namespace path_resolver_test
}  // namespace accelmon::collectors
