#include "daemon/agent/push_service.h"

#include <fcntl.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>

#include "accelmon/v1/push.grpc.pb.h"
#include "daemon/common/log_limiter.h"

namespace accelmon {
namespace {

namespace fs = std::filesystem;

// One push is a few hundred bytes; nothing bigger is accepted.
constexpr int kMaxPushBytes = 64 * 1024;

std::string Errno(int err) { return std::strerror(err); }

// Whether a process accepts connections on the socket at `path` (false: ECONNREFUSED, a stale
// file); nullopt with the reason in `error` when that cannot be told (no permission, ...).
std::optional<bool> SomeoneServes(const std::string& path, std::string* error) {
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *error = "socket(): " + Errno(errno);
    return std::nullopt;
  }
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  const int rc = connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr);
  const int err = errno;
  close(fd);
  if (rc == 0) return true;
  if (err == ECONNREFUSED) return false;
  *error = "cannot tell whether it is in use: " + Errno(err);
  return std::nullopt;
}

}  // namespace

class PushService::Handler final : public v1::AllocatorPush::Service {
 public:
  explicit Handler(collectors::PushStore& store) : store_(store) {}

  grpc::Status Push(grpc::ServerContext* /*context*/, const v1::AllocatorStats* stats,
                    v1::PushReply* reply) override {
    const auto now = std::chrono::steady_clock::now();
    const std::string reason = store_.Accept(*stats, now);
    reply->set_accepted(reason.empty());
    reply->set_reason(reason);
    if (!reason.empty()) {
      // A client can cause these as often as it likes: one line a minute per reason.
      if (const auto suppressed = limiter_.Admit(reason, now)) {
        spdlog::warn(
            "allocator push from pid {} (device \"{}\"{}) refused: {}{}", stats->pid(),
            stats->device_uuid(),
            stats->has_device_index() ? fmt::format(", index {}", stats->device_index()) : "",
            reason, *suppressed == 0 ? "" : fmt::format(" ({} more not logged)", *suppressed));
      }
    }
    return grpc::Status::OK;
  }

 private:
  collectors::PushStore& store_;
  LogLimiter limiter_;
};

PushService::PushService(PushServiceOptions options, collectors::PushStore& store)
    : options_(std::move(options)), handler_(std::make_unique<Handler>(store)) {}

PushService::~PushService() { Stop(); }

void PushService::Start() {
  const std::string& path = options_.socket_path;
  auto fail = [&](const std::string& why) {
    throw PushServiceError("cannot serve allocator pushes on " + path + ": " + why);
  };
  if (path.size() >= sizeof(sockaddr_un::sun_path)) {
    fail("too long for a Unix socket path (at most " +
         std::to_string(sizeof(sockaddr_un::sun_path) - 1) + " bytes)");
  }
  const fs::path dir =
      fs::path(path).parent_path().empty() ? fs::path(".") : fs::path(path).parent_path();
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    if (!options_.create_directory || !fs::is_directory(dir.parent_path(), ec)) {
      fail("directory " + dir.string() + " does not exist");
    }
    if (mkdir(dir.c_str(), 0750) != 0 && errno != EEXIST) {
      fail("cannot create directory " + dir.string() + ": " + Errno(errno));
    }
    chmod(dir.c_str(), 0750);  // mkdir's mode is cut by the umask
    spdlog::info("created {} (mode 0750) for the allocator push socket", dir.string());
  }
  if (access(dir.c_str(), W_OK | X_OK) != 0) {
    fail("cannot create a socket in " + dir.string() + ": " + Errno(errno));
  }

  struct stat st {};
  if (lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) fail("the file exists and is not a socket");
    std::string error;
    const auto served = SomeoneServes(path, &error);
    if (!served) fail(error);
    if (*served) fail("another process (another agent?) serves it");
    // A stale socket left by an agent that did not stop cleanly.
    if (unlink(path.c_str()) != 0) fail("cannot remove the stale socket: " + Errno(errno));
    spdlog::info("replaced the stale allocator push socket {}", path);
  }

  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix:" + path, grpc::InsecureServerCredentials());
  builder.RegisterService(handler_.get());
  builder.SetMaxReceiveMessageSize(kMaxPushBytes);
  // A few threads are plenty for pushes every few seconds; more clients wait, the agent does not.
  grpc::ResourceQuota quota("accelmon-push");
  quota.SetMaxThreads(4);
  builder.SetResourceQuota(quota);
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::NUM_CQS, 1);
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MIN_POLLERS, 1);
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS, 2);
  server_ = builder.BuildAndStart();
  if (!server_) fail("gRPC could not bind it");

  // Training processes of the socket's group may push; others may not (connect needs write).
  if (chmod(path.c_str(), 0660) != 0 || lstat(path.c_str(), &st) != 0) {
    const int err = errno;
    Stop();
    fail("cannot set its mode to 0660: " + Errno(err));
  }
  socket_dev_ = st.st_dev;
  socket_ino_ = st.st_ino;
  spdlog::info("allocator pushes on unix:{} (mode 0660)", path);
}

void PushService::Stop() {
  if (!server_) return;
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  server_->Wait();
  server_.reset();
  struct stat st {};
  if (socket_ino_ != 0 && lstat(options_.socket_path.c_str(), &st) == 0 &&
      st.st_dev == socket_dev_ && st.st_ino == socket_ino_) {
    unlink(options_.socket_path.c_str());
  }
  socket_ino_ = 0;
}

}  // namespace accelmon
