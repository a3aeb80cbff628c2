#include "collectors/open_file_cache.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <fstream>

#include "collectors/file_reader.h"
#include "collectors/thermal_zone.h"
#include "support/temp_dir.h"

namespace accelmon::collectors {
namespace open_file_cache_test {
namespace {

namespace fs = std::filesystem;

void WriteInPlace(const fs::path& path, const std::string& text) {
  std::ofstream(path, std::ios::trunc) << text;  // same inode, as a driver's value changes
}

class OpenFileCacheTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = testing::MakeTempDir("open_file_cache"); }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
  OpenFileCache cache_;
};

TEST_F(OpenFileCacheTest, KeepsAFileOpenAndSeesItsValueChangeInPlace) {
  WriteInPlace(dir_ / "temp", "41000\n");
  EXPECT_EQ(cache_.Attribute(dir_ / "temp"), "41000");
  EXPECT_EQ(cache_.open_files(), 1u);
  WriteInPlace(dir_ / "temp", "52000\n");
  EXPECT_EQ(cache_.Attribute(dir_ / "temp"), "52000");
  EXPECT_EQ(cache_.open_files(), 1u);
}

TEST_F(OpenFileCacheTest, ReadsAFileReplacedByRenameFromItsNewInode) {
  WriteInPlace(dir_ / "state", "4: ACTIVE\n");
  EXPECT_EQ(cache_.Attribute(dir_ / "state"), "4: ACTIVE");
  WriteInPlace(dir_ / "state.new", "1: DOWN\n");
  fs::rename(dir_ / "state.new", dir_ / "state");
  EXPECT_EQ(cache_.Attribute(dir_ / "state"), "1: DOWN");
  EXPECT_EQ(cache_.open_files(), 1u);
}

TEST_F(OpenFileCacheTest, ARemovedFileIsAbsentAndClosed) {
  WriteInPlace(dir_ / "speed", "100000\n");
  EXPECT_EQ(cache_.Attribute(dir_ / "speed"), "100000");
  fs::remove(dir_ / "speed");
  std::string out;
  EXPECT_EQ(cache_.ReadAttribute(dir_ / "speed", out), ENOENT);
  EXPECT_EQ(cache_.Attribute(dir_ / "speed"), std::nullopt);
  EXPECT_EQ(cache_.open_files(), 0u);
}

TEST_F(OpenFileCacheTest, AMissingFileAnswersItsErrnoAndIsNotKept) {
  std::string out = "stale";
  EXPECT_EQ(cache_.ReadText(dir_ / "absent", out), ENOENT);
  EXPECT_EQ(cache_.open_files(), 0u);
  EXPECT_THROW(cache_.Text(dir_ / "absent"), CollectorError);
}

TEST_F(OpenFileCacheTest, ReadTextReadsPastOnePage) {
  const std::string big(20000, 'x');
  WriteInPlace(dir_ / "big", big);
  EXPECT_EQ(cache_.Text(dir_ / "big"), big);
  EXPECT_EQ(cache_.Text(dir_ / "big"), big) << "a second read starts again at offset 0";
  std::string one_read;
  EXPECT_EQ(cache_.ReadAttribute(dir_ / "big", one_read), 0);
  EXPECT_EQ(one_read.size(), 4096u) << "an attribute is one read of at most a page";
}

TEST_F(OpenFileCacheTest, CloseUnreadClosesOnlyTheFilesNotReadSinceTheLastSweep) {
  WriteInPlace(dir_ / "a", "1");
  WriteInPlace(dir_ / "b", "2");
  cache_.Attribute(dir_ / "a");
  cache_.Attribute(dir_ / "b");
  cache_.CloseUnread();
  EXPECT_EQ(cache_.open_files(), 2u) << "both were read this cycle";
  cache_.Attribute(dir_ / "a");
  cache_.CloseUnread();
  EXPECT_EQ(cache_.open_files(), 1u) << "b, a vanished device's file, is closed";
  EXPECT_EQ(cache_.Attribute(dir_ / "b"), "2") << "and opened again when asked for";
}

TEST_F(OpenFileCacheTest, ListDirectorySeesEntriesComeAndGo) {
  fs::create_directory(dir_ / "hwmon0");
  std::vector<std::string> names;
  ASSERT_EQ(cache_.ListDirectory(dir_, names), 0);
  EXPECT_EQ(names, std::vector<std::string>{"hwmon0"});
  fs::create_directory(dir_ / "hwmon1");
  fs::remove(dir_ / "hwmon0");
  ASSERT_EQ(cache_.ListDirectory(dir_, names), 0);
  EXPECT_EQ(names, std::vector<std::string>{"hwmon1"});
  EXPECT_EQ(cache_.open_files(), 1u);
  EXPECT_EQ(cache_.ListDirectory(dir_ / "absent", names), ENOENT);
  EXPECT_TRUE(names.empty());
  EXPECT_EQ(cache_.ListDirectory(dir_ / "hwmon1", names), 0);
  EXPECT_TRUE(names.empty());
}

TEST_F(OpenFileCacheTest, ARecreatedDirectoryIsListedAfresh) {
  fs::create_directories(dir_ / "ports" / "1");
  std::vector<std::string> names;
  ASSERT_EQ(cache_.ListDirectory(dir_ / "ports", names), 0);
  EXPECT_EQ(names, std::vector<std::string>{"1"});
  fs::remove_all(dir_ / "ports");
  fs::create_directories(dir_ / "ports" / "2");
  ASSERT_EQ(cache_.ListDirectory(dir_ / "ports", names), 0);
  EXPECT_EQ(names, std::vector<std::string>{"2"});
}

// procfs renders a file on every read from offset 0: the kept-open descriptor follows the value.
TEST_F(OpenFileCacheTest, AKeptOpenProcfsFileIsRenderedAgainOnEachRead) {
  const std::string first = cache_.Text("/proc/uptime");
  std::string fresh;
  do {  // /proc/uptime moves every 10 ms
    ASSERT_EQ(TryReadTextFile("/proc/uptime", fresh), 0);
  } while (fresh == first);
  EXPECT_NE(cache_.Text("/proc/uptime"), first);
  EXPECT_EQ(cache_.open_files(), 1u);
}

// A collector keeps its files between cycles and still sees a zone's value change and a zone go.
TEST_F(OpenFileCacheTest, ACollectorFollowsChangesBetweenCycles) {
  const fs::path thermal = dir_ / "sys/class/thermal";
  fs::create_directories(thermal);
  fs::copy(fs::path(ACCELMON_FIXTURES_DIR) / "host/sys/class/thermal", thermal,
           fs::copy_options::recursive);
  ThermalZoneCollector collector(PathResolver(dir_ / "proc", dir_ / "sys"));
  v1::NodeReport first;
  collector.Collect(first);
  ASSERT_EQ(first.host().temperatures_size(), 3);
  EXPECT_DOUBLE_EQ(first.host().temperatures(0).celsius(), 52.0);

  WriteInPlace(thermal / "thermal_zone0/temp", "61500\n");
  fs::remove_all(thermal / "thermal_zone2");
  v1::NodeReport second;
  collector.Collect(second);
  ASSERT_EQ(second.host().temperatures_size(), 2);
  EXPECT_DOUBLE_EQ(second.host().temperatures(0).celsius(), 61.5);
  EXPECT_EQ(second.host().temperatures(1).chip(), "thermal_zone1");
}

}  // namespace
}  // namespace open_file_cache_test
}  // namespace accelmon::collectors
