#pragma once

#include <string_view>

namespace accelmon {

// Tells the service manager about this process's state (systemd's Type=notify protocol): one
// datagram to the AF_UNIX socket named by $NOTIFY_SOCKET, e.g. "READY=1" or "STOPPING=1".
// Written here rather than linking libsystemd: the protocol is a single sendto(), and the
// package then needs no libsystemd0 at run time. Does nothing (and returns false) when
// $NOTIFY_SOCKET is unset, as when not started by systemd; a failure to send is logged once
// at debug level and never stops the daemon.
bool SdNotify(std::string_view state);

}  // namespace accelmon
