// The agent's end of AllocatorPush (proto/accelmon/v1/push.proto): training processes on this
// node push their caching allocator's statistics over a Unix domain socket; what they push goes
// into a collectors::PushStore, which the "push" collector reads every tick.
#pragma once

#include <grpcpp/server.h>
#include <sys/types.h>

#include <memory>
#include <stdexcept>
#include <string>

#include "collectors/push.h"

namespace accelmon {

inline constexpr const char* kDefaultPushSocket = "/run/accelmon/agent.sock";

// Why the socket cannot be served, in one line that names its path.
class PushServiceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct PushServiceOptions {
  std::string socket_path;
  // Create the socket's directory (mode 0750) when it is missing and its parent exists.
  bool create_directory = false;
};

class PushService {
 public:
  PushService(PushServiceOptions options, collectors::PushStore& store);
  ~PushService();

  // Serves the socket (mode 0660), replacing a stale socket file left by an agent that died.
  // Throws PushServiceError when it cannot: a missing directory, a file that is not a socket,
  // a socket another process still serves, no permission.
  void Start();
  // Stops serving and removes the socket file (unless another process has replaced it).
  void Stop();

 private:
  class Handler;

  const PushServiceOptions options_;
  std::unique_ptr<Handler> handler_;
  std::unique_ptr<grpc::Server> server_;
  dev_t socket_dev_ = 0;
  ino_t socket_ino_ = 0;
};

}  // namespace accelmon
