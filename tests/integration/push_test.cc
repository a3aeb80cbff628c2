// Allocator statistics pushed over the agent's real Unix socket: a gRPC client pushes for a
// simulated device, the agent streams to a real exporter on loopback, and /metrics shows the
// process series and the device values derived from them, until the process stops pushing.
#include "collectors/push.h"

#include <grpcpp/create_channel.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "accelmon/v1/push.grpc.pb.h"
#include "collectors/sim.h"
#include "daemon/agent/agent.h"
#include "daemon/agent/push_service.h"
#include "daemon/exporter/exporter.h"
#include "support/http_get.h"
#include "support/loopback_exporter.h"
#include "support/prom_text.h"
#include "support/report_tap.h"
#include "support/temp_dir.h"
#include "support/wait.h"

namespace accelmon {
namespace push_test {
namespace {

using namespace std::chrono_literals;
using testing::FindValue;
using testing::HttpGet;
using testing::ParseExposition;
using testing::Scrape;
namespace fs = std::filesystem;

constexpr uint64_t kGiB = 1ULL << 30;

using testing::WaitFor;

TEST(AllocatorPush, ProcessSeriesAndDerivedValuesOverTheRealSocket) {
  testing::TempDir dir("accelmon-push");
  const std::string socket_path = dir.path() + "/agent.sock";
  collectors::PushStore store({.max_processes_per_device = 64, .expire_after = 2s});
  PushService service({.socket_path = socket_path}, store);
  service.Start();
  struct stat st {};
  ASSERT_EQ(lstat(socket_path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0660u);

  testing::LoopbackExporter exporter;
  Uplink uplink(UplinkOptions{.exporter_address = exporter.grpc_address()});
  std::vector<std::unique_ptr<collectors::Collector>> list;
  list.push_back(
      std::make_unique<collectors::SimCollector>(collectors::SimOptions{.devices = 2, .seed = 11}));
  list.push_back(std::make_unique<collectors::PushCollector>(store));
  Agent agent(AgentOptions{.node = "push-node", .interval = 50ms},
              collectors::CollectorSet(std::move(list)), uplink);
  testing::ReportTap tap;
  agent.set_report_observer(tap.Observer());
  uplink.Start();
  agent.Start();

  ASSERT_TRUE(WaitFor([&] { return tap.At(0).has_value(); }, 10s));
  const std::string uuid = tap.At(0)->devices(1).identity().uuid();
  const std::map<std::string, std::string> device{{"node", "push-node"}, {"uuid", uuid}};
  const std::string pid = std::to_string(getpid());

  auto stub = v1::AllocatorPush::NewStub(
      grpc::CreateChannel("unix:" + socket_path, grpc::InsecureChannelCredentials()));
  auto push = [&](const v1::AllocatorStats& stats) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + 5s);
    v1::PushReply reply;
    const grpc::Status status = stub->Push(&context, stats, &reply);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return reply;
  };
  v1::AllocatorStats stats;
  stats.set_pid(static_cast<uint32_t>(getpid()));
  stats.set_job("it-job");
  stats.set_rank("3");
  stats.set_device_uuid(uuid);
  stats.set_reserved_bytes(40 * kGiB);
  stats.set_allocated_bytes(30 * kGiB);
  stats.set_largest_free_block_bytes(6 * kGiB);
  stats.set_alloc_retries_total(5);
  stats.set_ooms_total(1);
  stats.set_backend("cuda");
  const v1::PushReply accepted = push(stats);
  EXPECT_TRUE(accepted.accepted());
  EXPECT_EQ(accepted.reason(), "");
  v1::AllocatorStats bad = stats;
  bad.set_device_uuid("GPU-not-on-this-node");
  const v1::PushReply refused = push(bad);
  EXPECT_FALSE(refused.accepted());
  EXPECT_EQ(refused.reason(), "unknown_device");

  auto ours = device;
  ours["pid"] = pid;
  ours["job_id"] = "it-job";
  ours["rank"] = "3";
  std::vector<testing::Sample> samples;
  ASSERT_TRUE(WaitFor(
      [&] {
        samples = Scrape(exporter);
        return FindValue(samples, "accelmon_process_memory_reserved_bytes", ours).has_value() &&
               FindValue(samples, "accelmon_agent_push_rejected_total",
                         {{"reason", "unknown_device"}}) == 1.0;
      },
      10s))
      << "the pushed process shows up and the refused push is counted";
  EXPECT_EQ(FindValue(samples, "accelmon_process_memory_reserved_bytes", ours), 40.0 * kGiB);
  EXPECT_EQ(FindValue(samples, "accelmon_process_memory_allocated_bytes", ours), 30.0 * kGiB);
  EXPECT_EQ(FindValue(samples, "accelmon_process_allocator_retries_total", ours), 5.0);
  EXPECT_EQ(FindValue(samples, "accelmon_process_allocator_ooms_total", ours), 1.0);
  EXPECT_EQ(FindValue(samples, "accelmon_agent_push_rejected_total", {{"reason", "missing_pid"}}),
            0.0);

  // The device values derive from the device's free memory, the simulated job's process and
  // ours, in the very report /metrics shows.
  const auto shown =
      tap.WithTimestamp(*FindValue(samples, "accelmon_node_last_report_timestamp_seconds"));
  ASSERT_TRUE(shown.has_value());
  const v1::DeviceTelemetry& d = shown->devices(1);
  ASSERT_EQ(d.processes_size(), 2) << "the simulated job's process and ours";
  const auto& sim_process = d.processes(0).pid() == stats.pid() ? d.processes(1) : d.processes(0);
  const double free = static_cast<double>(d.memory().free_bytes());
  const double largest =
      std::max({free, 6.0 * kGiB, static_cast<double>(sim_process.largest_free_block_bytes())});
  const double cached = 10.0 * kGiB + static_cast<double>(sim_process.reserved_bytes() -
                                                          sim_process.allocated_bytes());
  EXPECT_EQ(FindValue(samples, "accelmon_device_memory_largest_free_block_bytes", device), largest);
  EXPECT_DOUBLE_EQ(*FindValue(samples, "accelmon_device_memory_fragmentation_ratio", device),
                   1 - largest / (free + cached));

  // The process stops pushing: after --push.expire-after its series are gone, and the device's
  // values come from the simulated job alone again.
  ASSERT_TRUE(WaitFor(
      [&] {
        samples = Scrape(exporter);
        return !FindValue(samples, "accelmon_process_memory_reserved_bytes", ours).has_value();
      },
      15s));
  EXPECT_EQ(testing::CountSamples(samples, "accelmon_process_memory_reserved_bytes"), 2u)
      << "one simulated process per device";
  const auto later =
      tap.WithTimestamp(*FindValue(samples, "accelmon_node_last_report_timestamp_seconds"));
  ASSERT_TRUE(later.has_value());
  EXPECT_EQ(later->devices(1).processes_size(), 1);
  EXPECT_DOUBLE_EQ(*FindValue(samples, "accelmon_device_memory_fragmentation_ratio", device),
                   later->devices(1).memory().fragmentation_ratio());

  agent.Stop();
  uplink.Stop();
  exporter.Stop();
  service.Stop();
  EXPECT_FALSE(fs::exists(socket_path)) << "the agent removes its socket";
}

// Binds a Unix socket at `path`; listening or not (closed: a stale file).
int BindUnix(const std::string& path, bool listening) {
  const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
  EXPECT_EQ(bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr), 0);
  if (listening) {
    EXPECT_EQ(listen(fd, 1), 0);
    return fd;
  }
  close(fd);
  return -1;
}

std::string StartError(const std::string& path, bool create_directory = false) {
  collectors::PushStore store({});
  PushService service({.socket_path = path, .create_directory = create_directory}, store);
  try {
    service.Start();
  } catch (const PushServiceError& e) {
    return e.what();
  }
  return {};
}

TEST(AllocatorPush, StaleSocketReplacedLiveSocketOrOtherFileLeftAlone) {
  testing::TempDir dir("accelmon-push");
  const std::string path = dir.path() + "/agent.sock";

  BindUnix(path, /*listening=*/false);  // an agent that died left its socket behind
  EXPECT_EQ(StartError(path), "") << "a stale socket is replaced";

  const int live = BindUnix(path, /*listening=*/true);
  const std::string in_use = StartError(path);
  EXPECT_NE(in_use.find(path), std::string::npos) << in_use;
  EXPECT_NE(in_use.find("another process"), std::string::npos) << in_use;
  EXPECT_TRUE(fs::exists(path)) << "a socket in use is left alone";
  close(live);
  fs::remove(path);

  std::ofstream(path) << "not a socket";
  EXPECT_NE(StartError(path).find("not a socket"), std::string::npos);
  EXPECT_TRUE(fs::is_regular_file(path)) << "a file that is not a socket is never removed";

  const std::string missing = dir.path() + "/missing/agent.sock";
  EXPECT_NE(StartError(missing).find("does not exist"), std::string::npos);
  // The default socket's directory is created when its parent exists.
  EXPECT_EQ(StartError(missing, /*create_directory=*/true), "");
  struct stat st {};
  ASSERT_EQ(stat((dir.path() + "/missing").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0750u);
  EXPECT_NE(StartError(dir.path() + "/a/b/agent.sock", true).find("does not exist"),
            std::string::npos)
      << "only one level is created";
}

}  // namespace
}  // namespace push_test
}  // namespace accelmon
