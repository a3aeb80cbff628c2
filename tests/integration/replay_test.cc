// `accelmon replay` against a real exporter in this process (gRPC over loopback, port 0): one
// stream per node, every ack counted, rejections with their reasons, duplicates on a second run.
#include "daemon/tools/replay.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "daemon/exporter/exporter.h"
#include "daemon/tools/progress.h"
#include "proto/time_format.h"
#include "recording/jsonl.h"
#include "recording/merged_reader.h"
#include "support/loopback_exporter.h"
#include "support/temp_dir.h"
#include "support/wait.h"

namespace accelmon {
namespace replay_test {
namespace {

namespace fs = std::filesystem;

v1::NodeReport Report(const std::string& node, uint64_t sequence, int64_t seconds) {
  v1::NodeReport r;
  r.set_node(node);
  r.set_agent_instance_id("instance-" + node);
  r.set_sequence(sequence);
  r.mutable_timestamp()->set_seconds(seconds);
  r.add_devices()->mutable_memory()->set_used_bytes(sequence);
  return r;
}

class ReplayTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::accelmon::testing::MakeTempDir("accelmon-replay-test");
    exporter_ = std::make_unique<testing::LoopbackExporter>();
  }
  void TearDown() override {
    exporter_->Stop();
    fs::remove_all(dir_);
  }

  std::string WriteJsonl(const std::vector<v1::NodeReport>& reports) const {
    const std::string path = dir_ + "/in.jsonl";
    recording::JsonlWriter writer;
    std::string text;
    for (const auto& r : reports) writer.Append(r, &text);
    std::ofstream(path) << text;
    return path;
  }

  ReplayOptions Options() const {
    return ReplayOptions{.exporter_address = exporter_->grpc_address(), .speed = 0};
  }

  std::string dir_;
  std::unique_ptr<testing::LoopbackExporter> exporter_;
};

TEST_F(ReplayTest, EveryReportIsAcknowledgedOnItsNodesStream) {
  const int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  std::vector<v1::NodeReport> reports;
  for (uint64_t seq = 1; seq <= 50; ++seq) {
    reports.push_back(Report("a", seq, now - 100 + static_cast<int64_t>(seq)));
    reports.push_back(Report("b", seq, now - 100 + static_cast<int64_t>(seq)));
  }
  reports.push_back(Report("c", 1, now + 3600));  // an hour ahead: refused
  const std::string path = WriteJsonl(reports);

  recording::MergedReader reader({path});
  const ReplayResult r = ReplayToExporter(reader, Options());
  EXPECT_TRUE(r.errors.empty()) << r.errors.front();
  EXPECT_EQ(r.nodes, 3u);
  EXPECT_EQ(r.read, 101u);
  EXPECT_EQ(r.sent, 101u);
  EXPECT_EQ(r.applied, 100u);
  EXPECT_EQ(r.duplicate, 0u);
  EXPECT_EQ(r.rejected, 1u);
  EXPECT_EQ(r.rejected_reasons.at("timestamp_in_future"), 1u);
  EXPECT_EQ(exporter_->store().size(), 2u);

  // The same reports again: the exporter has them already.
  recording::MergedReader again({path});
  const ReplayResult second = ReplayToExporter(again, Options());
  EXPECT_EQ(second.duplicate, 100u);
  EXPECT_EQ(second.applied, 0u);
}

TEST_F(ReplayTest, ShiftToNowStampsTheFirstReportNow) {
  const std::string path =
      WriteJsonl({Report("old", 1, 1'000'000'000), Report("old", 2, 1'000'000'001)});
  ReplayOptions options = Options();
  options.shift_to_now = true;
  const auto before = std::chrono::system_clock::now();
  recording::MergedReader reader({path});
  const ReplayResult r = ReplayToExporter(reader, options);
  ASSERT_EQ(r.applied, 2u);
  const auto nodes = exporter_->store().Snapshot(Clock::now());
  ASSERT_EQ(nodes.size(), 1u);
  const int64_t stamped = nodes[0].report->timestamp().seconds();
  const int64_t start =
      std::chrono::duration_cast<std::chrono::seconds>(before.time_since_epoch()).count();
  // The last report: one second after the first, which was stamped at the replay's start.
  EXPECT_GE(stamped, start);
  EXPECT_LE(stamped, start + 60);
}

TEST_F(ReplayTest, AnUnreachableExporterIsAnErrorNotAWait) {
  const std::string path = WriteJsonl({Report("a", 1, 1'000'000'000)});
  ReplayOptions options = Options();
  const testing::ReservedPort nothing_listens;  // and nothing else can take the port meanwhile
  options.exporter_address = nothing_listens.address();
  recording::MergedReader reader({path});
  const ReplayResult r = ReplayToExporter(reader, options);
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_NE(r.errors[0].find("cannot reach the exporter"), std::string::npos) << r.errors[0];
  EXPECT_EQ(r.sent, 0u);
}

TEST(TimeShiftTest, KeepsSpacingDividedBySpeed) {
  TimeShift off(false, 2);
  off.Start(100, 1000);
  EXPECT_EQ(off.Apply(150), 150);
  TimeShift twice(true, 2);
  twice.Start(100, 1000);
  EXPECT_EQ(twice.Apply(100), 1000);
  EXPECT_EQ(twice.Apply(300), 1100);
  TimeShift max(true, 0);
  max.Start(100, 1000);
  EXPECT_EQ(max.Apply(300), 1200);
}

TEST(ProgressTest, SilentUnlessDrawingToATerminal) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  {
    Progress quiet("test", 1000, fds[1], /*force=*/false);  // a pipe is not a terminal
    EXPECT_FALSE(quiet.enabled());
    quiet.Update(500, 5);
    Progress drawn("test", 1000, fds[1], /*force=*/true);
    // It redraws at most every 100 ms: update until it has drawn once, rather than sleeping
    // past that interval and hoping.
    ASSERT_TRUE(testing::WaitFor(
        [&] {
          drawn.Update(500, 5);
          pollfd readable{.fd = fds[0], .events = POLLIN, .revents = 0};
          return ::poll(&readable, 1, 0) == 1;
        },
        std::chrono::seconds(10)));
  }
  close(fds[1]);
  std::string out(4096, '\0');
  const ssize_t n = read(fds[0], out.data(), out.size());
  close(fds[0]);
  ASSERT_GT(n, 0);
  out.resize(static_cast<size_t>(n));
  EXPECT_EQ(out.rfind("\rtest ", 0), 0u) << out;
  EXPECT_NE(out.find("50%"), std::string::npos) << out;
  EXPECT_NE(out.find("\r\x1b[K"), std::string::npos) << "cleared at the end";
}

TEST(ProgressTest, BytesAndDurationsInHumanUnits) {
  EXPECT_EQ(HumanBytes(512), "512 B");
  EXPECT_EQ(HumanBytes(3 * 1024 * 1024 / 2), "1.5 MiB");
  EXPECT_EQ(FormatDuration(std::chrono::seconds(3723)), "1h02m03s");
  EXPECT_EQ(FormatDuration(std::chrono::milliseconds(300)), "0.3s");
}

}  // namespace
}  // namespace replay_test
}  // namespace accelmon
