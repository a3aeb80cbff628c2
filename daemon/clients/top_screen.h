// `accelmon top`'s terminal UI (ncurses): the node list with bars, a node's devices, the open
// findings, the keys. The data comes from a fetch function run on a thread of its own every
// refresh, so a slow or unreachable exporter never freezes the keys.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "daemon/clients/top_view.h"

namespace accelmon::top {

// One fetch: the latest reports and the findings, or why there are none this time.
struct Snapshot {
  std::vector<v1::NodeReport> reports{};
  std::vector<v1::Finding> findings{};
  std::string error{};   // empty: fetched
  bool partial = false;  // `error` names some sources only; the data is the others'
};

struct ScreenOptions {
  std::string source{};  // "exporter 127.0.0.1:9478", "local node gpu-01"
  std::chrono::milliseconds refresh{2000};
  ViewOptions view{};
  bool color = true;  // false: NO_COLOR is set
};

// Runs until `q`, SIGINT or SIGTERM; restores the terminal before it returns (0). `fetch` runs on
// the screen's own thread; `cancel` (called from the UI thread on exit) should end a fetch in
// flight early. Returns 1 when the terminal cannot be set up (no TERM, not a terminal).
int RunScreen(const std::function<Snapshot()>& fetch, const std::function<void()>& cancel,
              const ScreenOptions& options);

}  // namespace accelmon::top
