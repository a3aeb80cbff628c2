#include "daemon/common/sd_notify.h"

#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <string>

namespace accelmon {

bool SdNotify(std::string_view state) {
  const char* env = std::getenv("NOTIFY_SOCKET");
  if (env == nullptr || env[0] == '\0') return false;
  const std::string path(env);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  // A path, or "@name" for a socket in the abstract namespace (a leading NUL byte).
  if ((path[0] != '/' && path[0] != '@') || path.size() >= sizeof addr.sun_path) {
    spdlog::debug("sd_notify: NOTIFY_SOCKET \"{}\" is not a socket path", path);
    return false;
  }
  std::memcpy(addr.sun_path, path.data(), path.size());
  if (path[0] == '@') addr.sun_path[0] = '\0';
  const auto length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size() +
                                             (path[0] == '@' ? 0 : 1));
  const int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    spdlog::debug("sd_notify: socket: {}", std::strerror(errno));
    return false;
  }
  const ssize_t sent = sendto(fd, state.data(), state.size(), MSG_NOSIGNAL,
                              reinterpret_cast<const sockaddr*>(&addr), length);
  const int send_errno = errno;
  close(fd);
  if (sent != static_cast<ssize_t>(state.size())) {
    spdlog::debug("sd_notify: sendto {}: {}", path, std::strerror(send_errno));
    return false;
  }
  return true;
}

}  // namespace accelmon
