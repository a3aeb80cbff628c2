#include "daemon/clients/top_screen.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <csignal>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include "proto/time_format.h"

// Last: ncurses' pseudo-function macros (move, erase, timeout, ...) would clash with the
// standard library; NCURSES_NOMACROS leaves only the real functions.
#define NCURSES_NOMACROS
#include <curses.h>

namespace accelmon::top {
namespace {

volatile std::sig_atomic_t g_stop = 0;
extern "C" void OnStopSignal(int) { g_stop = 1; }

enum ColorPair : short { kGreen = 1, kYellow, kRed, kCyan };

constexpr int kEscape = 27;
constexpr int kPollMillis = 200;  // how often the screen looks at keys, signals and new data

// Fetches on its own thread every `refresh`, keeping the latest answer for the screen.
class Fetcher {
 public:
  Fetcher(const std::function<Snapshot()>& fetch, std::chrono::milliseconds refresh)
      : fetch_(fetch), refresh_(refresh), thread_([this] { Run(); }) {}
  ~Fetcher() {
    Stop([] {});
  }

  void Stop(const std::function<void()>& cancel) {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    cancel();
    if (thread_.joinable()) thread_.join();
  }

  // The answer fetched after `version`, if any.
  std::optional<Snapshot> Take(uint64_t& version) {
    std::lock_guard lock(mu_);
    if (version_ == version) return std::nullopt;
    version = version_;
    return latest_;
  }

 private:
  void Run() {
    for (;;) {
      Snapshot snapshot = fetch_();
      std::unique_lock lock(mu_);
      latest_ = std::move(snapshot);
      ++version_;
      if (cv_.wait_for(lock, refresh_, [this] { return stopping_; })) return;
    }
  }

  const std::function<Snapshot()>& fetch_;
  const std::chrono::milliseconds refresh_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  Snapshot latest_;
  uint64_t version_ = 0;
  std::thread thread_;  // last: starts once the rest is ready
};

enum class Mode { kNodes, kDevices };

struct State {
  ViewOptions view{};
  Mode mode = Mode::kNodes;
  size_t selected = 0;          // row in the node list
  std::string selected_node{};  // kept across refreshes and sorts
  bool editing = false;         // typing a filter after `/`
  std::string edit{};
  // The last good answer, kept on screen while the exporter is unreachable.
  std::vector<v1::NodeReport> reports{};
  std::vector<v1::Finding> findings{};
  bool have_data = false;
  std::string error{};
  std::chrono::steady_clock::time_point updated{};
};

class Screen {
 public:
  Screen(const ScreenOptions& options, bool color) : options_(options), color_(color) {}

  void Draw(State& s) {
    const auto now = std::chrono::system_clock::now();
    const View view = BuildView(s.reports, s.findings, now, s.view);
    Select(s, view);
    werase(stdscr);
    rows_ = getmaxy(stdscr);
    cols_ = getmaxx(stdscr);

    std::string title =
        "accelmon top - " + options_.source + "  sort: " + std::string(SortKeyName(s.view.sort));
    if (!s.view.filter.empty()) title += "  filter: " + s.view.filter;
    Put(0, 0, title, A_BOLD);
    Put(1, 0, FormatSummary(view.summary), A_NORMAL);
    int body_top = 3;
    if (!s.error.empty()) {
      // Wrapped, up to three lines: the reason is what matters most when it is there.
      const std::string text =
          s.error + " - retrying every " + FormatPrometheusDuration(options_.refresh);
      const size_t width = static_cast<size_t>(std::max(1, cols_));
      for (size_t at = 0, line = 0; at < text.size() && line < 3; at += width, ++line) {
        Put(2 + static_cast<int>(line), 0, text.substr(at, width), A_BOLD | Color(kRed));
        body_top = 3 + static_cast<int>(line);
      }
    } else if (s.have_data) {
      const double ago =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - s.updated).count();
      Put(2, 0, "updated " + FormatAge(ago) + " ago", A_DIM);
    } else {
      Put(2, 0, "connecting to " + options_.source + " ...", A_DIM);
    }

    const int body_bottom = rows_ - 2;  // the last line is the key help
    if (s.mode == Mode::kNodes) {
      DrawNodes(s, view, body_top, body_bottom);
    } else {
      DrawDevices(s, view, body_top, body_bottom);
    }
    DrawFooter(s);
    wrefresh(stdscr);
  }

 private:
  attr_t Color(ColorPair pair) const {
    return color_ ? static_cast<attr_t>(COLOR_PAIR(pair)) : A_NORMAL;
  }

  attr_t Level(std::optional<double> ratio) const {
    if (!ratio) return A_NORMAL;
    if (*ratio >= 0.85) return Color(kRed);
    if (*ratio >= 0.6) return Color(kYellow);
    return Color(kGreen);
  }

  attr_t TempLevel(std::optional<double> celsius) const {
    if (!celsius) return A_NORMAL;
    if (*celsius >= 85) return A_BOLD | Color(kRed);
    if (*celsius >= 75) return Color(kYellow);
    return A_NORMAL;
  }

  attr_t SeverityAttr(const std::string& severity) const {
    if (severity == "critical") return A_BOLD | Color(kRed);
    if (severity == "warning") return Color(kYellow);
    return A_NORMAL;
  }

  // Text at (y, x), cut at the right edge.
  void Put(int y, int x, const std::string& text, attr_t attr) {
    if (y < 0 || y >= rows_ || x >= cols_) return;
    wattr_on(stdscr, attr, nullptr);
    mvwaddnstr(stdscr, y, x, text.c_str(), std::min<int>(static_cast<int>(text.size()), cols_ - x));
    wattr_off(stdscr, attr, nullptr);
  }

  // A cell of `width`, left or right aligned, then one space.
  int Cell(int y, int x, const std::string& text, int width, bool right, attr_t attr) {
    std::string cell = text.substr(0, static_cast<size_t>(std::max(0, width)));
    const std::string pad(static_cast<size_t>(width) - cell.size(), ' ');
    Put(y, x, right ? pad + cell : cell + pad, attr);
    return x + width + 1;
  }

  // htop's bar: [||||||     label], the filled part coloured by level; "-" when absent.
  int Bar(int y, int x, int width, std::optional<double> ratio, const std::string& label) {
    const int inner = std::max(0, width - 2);
    const double r = ratio ? std::clamp(*ratio, 0.0, 1.0) : 0.0;
    const int filled = static_cast<int>(r * inner + 0.5);
    const std::string text = label.size() <= static_cast<size_t>(inner) ? label : "";
    const int label_at = inner - static_cast<int>(text.size());
    Put(y, x, "[", A_BOLD);
    for (int i = 0; i < inner; ++i) {
      char c = i < filled ? '|' : ' ';
      attr_t attr = i < filled ? Level(ratio) : A_NORMAL;
      if (i >= label_at) {
        c = text[static_cast<size_t>(i - label_at)];
        attr = A_DIM;
      }
      Put(y, x + 1 + i, std::string(1, c), attr);
    }
    Put(y, x + 1 + inner, "]", A_BOLD);
    return x + width + 1;
  }

  void Select(State& s, const View& view) {
    if (view.nodes.empty()) {
      s.selected = 0;
      return;
    }
    // Follow the node selected before, wherever sorting or filtering put it.
    for (size_t i = 0; i < view.nodes.size(); ++i) {
      if (view.nodes[i].node == s.selected_node) {
        s.selected = i;
        return;
      }
    }
    s.selected = std::min(s.selected, view.nodes.size() - 1);
    if (s.mode == Mode::kNodes || s.selected_node.empty()) {
      s.selected_node = view.nodes[s.selected].node;
    }
  }

  void DrawNodes(State& s, const View& view, int top, int bottom) {
    size_t name_width = 8;
    for (const NodeRow& n : view.nodes) name_width = std::max(name_width, n.node.size());
    const int name_w = static_cast<int>(std::min<size_t>(name_width, 28));
    // NODE STATE DEV [util] [memory] TEMP POWER FIND AGE
    const int fixed = name_w + 1 + 5 + 1 + 3 + 1 + 5 + 1 + 6 + 1 + 4 + 1 + 7 + 2;
    const int bars = std::max(20, cols_ - fixed);
    const int util_w = std::max(8, bars * 2 / 5);
    const int mem_w = std::max(12, bars - util_w);

    // The findings get the lower part of the screen, up to a third of it.
    const int finding_lines =
        view.findings.empty()
            ? 0
            : std::min(static_cast<int>(view.findings.size()) + 1, std::max(2, (bottom - top) / 3));
    const int table_bottom = bottom - finding_lines;

    int x = 0;
    const int y = top;
    Put(y, 0, std::string(static_cast<size_t>(std::max(0, cols_)), ' '), A_REVERSE);
    x = Cell(y, x, "NODE", name_w, false, A_REVERSE);
    x = Cell(y, x, "STATE", 5, false, A_REVERSE);
    x = Cell(y, x, "DEV", 3, true, A_REVERSE);
    x = Cell(y, x, "UTIL", util_w, false, A_REVERSE);
    x = Cell(y, x, "MEMORY", mem_w, false, A_REVERSE);
    x = Cell(y, x, "TEMP", 5, true, A_REVERSE);
    x = Cell(y, x, "POWER", 6, true, A_REVERSE);
    x = Cell(y, x, "FIND", 4, true, A_REVERSE);
    Cell(y, x, "AGE", 7, true, A_REVERSE);

    const int visible = std::max(1, table_bottom - top);
    if (view.nodes.empty()) {
      Put(top + 1, 0,
          s.have_data ? (s.view.filter.empty() ? "no nodes have reported"
                                               : "no node matches \"" + s.view.filter + "\"")
                      : "waiting for the first answer",
          A_DIM);
    }
    const size_t first = s.selected >= static_cast<size_t>(visible) ? s.selected - visible + 1 : 0;
    for (size_t i = first; i < view.nodes.size(); ++i) {
      const int row_y = top + 1 + static_cast<int>(i - first);
      if (row_y > table_bottom) break;
      const NodeRow& n = view.nodes[i];
      const attr_t base = i == s.selected ? A_REVERSE : (n.stale ? A_DIM : A_NORMAL);
      if (i == s.selected) Put(row_y, 0, std::string(static_cast<size_t>(cols_), ' '), base);
      int cx = Cell(row_y, 0, n.node, name_w, false, base | A_BOLD);
      cx = Cell(row_y, cx, n.stale ? "stale" : "live", 5, false,
                n.stale ? (base | Color(kRed)) : base);
      cx = Cell(row_y, cx, std::to_string(n.devices), 3, true, base);
      cx = Bar(row_y, cx, util_w, n.mean_util, FormatPercent(n.mean_util));
      std::optional<double> mem_ratio;
      if (n.mem_used && n.mem_total && *n.mem_total > 0) {
        mem_ratio = static_cast<double>(*n.mem_used) / static_cast<double>(*n.mem_total);
      }
      cx = Bar(row_y, cx, mem_w, mem_ratio, FormatMemory(n.mem_used, n.mem_total));
      cx = Cell(row_y, cx, FormatCelsius(n.max_temp), 5, true, base | TempLevel(n.max_temp));
      cx = Cell(row_y, cx, FormatWatts(n.power), 6, true, base);
      cx = Cell(row_y, cx, std::to_string(n.findings), 4, true,
                n.findings > 0 ? (base | A_BOLD | Color(kYellow)) : base);
      Cell(row_y, cx, FormatAge(n.age_seconds), 7, true, base);
    }
    DrawFindings(view.findings, table_bottom + 1, bottom, "");
  }

  void DrawDevices(State& s, const View& view, int top, int bottom) {
    const NodeRow* node = nullptr;
    for (const NodeRow& n : view.nodes) {
      if (n.node == s.selected_node) node = &n;
    }
    Put(top, 0,
        "Devices of " + s.selected_node +
            (node != nullptr
                 ? fmt::format(" ({}, {} device(s))", node->stale ? "stale" : "live", node->devices)
                 : " (no report)"),
        A_BOLD | Color(kCyan));
    if (node == nullptr) return;

    size_t model_width = 5;
    for (const DeviceRow& d : node->device_rows) {
      model_width = std::max(model_width, d.model.size());
    }
    const int model_w = static_cast<int>(std::min<size_t>(model_width, 24));
    // IDX MODEL [util] [memory] FRAG TEMP POWER HOLDER
    const int fixed = 3 + 1 + model_w + 1 + 4 + 1 + 5 + 1 + 6 + 1 + 16;
    const int bars = std::max(20, cols_ - fixed);
    const int util_w = std::max(8, bars * 2 / 5);
    const int mem_w = std::max(12, bars - util_w);

    const int y = top + 1;
    Put(y, 0, std::string(static_cast<size_t>(std::max(0, cols_)), ' '), A_REVERSE);
    int x = Cell(y, 0, "IDX", 3, true, A_REVERSE);
    x = Cell(y, x, "MODEL", model_w, false, A_REVERSE);
    x = Cell(y, x, "UTIL", util_w, false, A_REVERSE);
    x = Cell(y, x, "MEMORY", mem_w, false, A_REVERSE);
    x = Cell(y, x, "FRAG", 4, true, A_REVERSE);
    x = Cell(y, x, "TEMP", 5, true, A_REVERSE);
    x = Cell(y, x, "POWER", 6, true, A_REVERSE);
    Cell(y, x, "HOLDER", 16, false, A_REVERSE);

    std::vector<FindingRow> findings;
    for (const FindingRow& f : view.findings) {
      if (f.node == node->node) findings.push_back(f);
    }
    const int finding_lines = findings.empty() ? 0
                                               : std::min(static_cast<int>(findings.size()) + 1,
                                                          std::max(2, (bottom - top) / 3));
    const int table_bottom = bottom - finding_lines;
    int row_y = y + 1;
    for (const DeviceRow& d : node->device_rows) {
      if (row_y > table_bottom) break;
      const attr_t base = d.up.has_value() && !*d.up ? (A_BOLD | Color(kRed)) : A_NORMAL;
      int cx = Cell(row_y, 0, std::to_string(d.index), 3, true, base | A_BOLD);
      cx = Cell(row_y, cx, d.model.empty() ? "-" : d.model, model_w, false, base);
      cx = Bar(row_y, cx, util_w, d.util, FormatPercent(d.util));
      std::optional<double> mem_ratio;
      if (d.mem_used && d.mem_total && *d.mem_total > 0) {
        mem_ratio = static_cast<double>(*d.mem_used) / static_cast<double>(*d.mem_total);
      }
      cx = Bar(row_y, cx, mem_w, mem_ratio, FormatMemory(d.mem_used, d.mem_total));
      cx = Cell(row_y, cx, FormatRatio(d.fragmentation), 4, true, base);
      cx = Cell(row_y, cx, FormatCelsius(d.temp), 5, true, base | TempLevel(d.temp));
      cx = Cell(row_y, cx, FormatWatts(d.power), 6, true, base);
      Put(row_y, cx, d.holder.empty() ? "-" : d.holder, base);
      ++row_y;
    }
    DrawFindings(findings, table_bottom + 1, bottom, node->node);
  }

  void DrawFindings(const std::vector<FindingRow>& findings, int top, int bottom,
                    const std::string& node) {
    if (findings.empty() || top > bottom) return;
    Put(top, 0,
        fmt::format("Open findings{} ({})", node.empty() ? "" : " on " + node, findings.size()),
        A_BOLD);
    int y = top + 1;
    for (const FindingRow& f : findings) {
      if (y > bottom) break;
      int x = Cell(y, 0, f.severity, 8, false, SeverityAttr(f.severity));
      x = Cell(y, x, f.rule, 22, false, A_BOLD);
      x = Cell(y, x, f.node + (f.device.empty() ? "" : "/" + f.device), 20, false, A_NORMAL);
      x = Cell(y, x, FormatAge(f.since_seconds), 7, true, A_DIM);
      Put(y, x, f.summary, A_NORMAL);
      ++y;
    }
  }

  void DrawFooter(const State& s) {
    const int y = rows_ - 1;
    if (s.editing) {
      Put(y, 0, "Filter (node or job): " + s.edit + "_", A_BOLD);
      Put(y, std::max(0, cols_ - 28), "Enter apply  Esc clear", A_DIM);
      return;
    }
    Put(y, 0,
        s.mode == Mode::kNodes ? "Up/Down select  Enter/Right devices  s sort  / filter  q quit"
                               : "Esc/Left back  s sort  / filter  q quit",
        A_REVERSE);
  }

  const ScreenOptions& options_;
  const bool color_;
  int rows_ = 0;
  int cols_ = 0;
};

// Moves the selection in the node list by `delta` rows.
void MoveSelection(State& s, const std::vector<v1::NodeReport>& reports,
                   const std::vector<v1::Finding>& findings, long delta) {
  const View view = BuildView(reports, findings, std::chrono::system_clock::now(), s.view);
  if (view.nodes.empty()) return;
  const long last = static_cast<long>(view.nodes.size()) - 1;
  const long at = std::clamp(static_cast<long>(s.selected) + delta, 0L, last);
  s.selected = static_cast<size_t>(at);
  s.selected_node = view.nodes[s.selected].node;
}

// Returns false when the screen should close.
bool HandleKey(State& s, int key) {
  if (s.editing) {
    if (key == '\n' || key == '\r' || key == KEY_ENTER) {
      s.view.filter = s.edit;
      s.editing = false;
      s.selected = 0;
      s.selected_node.clear();
      s.mode = Mode::kNodes;
    } else if (key == kEscape) {
      s.view.filter.clear();
      s.edit.clear();
      s.editing = false;
    } else if (key == KEY_BACKSPACE || key == 127 || key == 8) {
      if (!s.edit.empty()) s.edit.pop_back();
    } else if (key >= 32 && key < 127) {
      s.edit.push_back(static_cast<char>(key));
    }
    return true;
  }
  switch (key) {
    case 'q':
    case 'Q':
      return false;
    case 's':
      s.view.sort = NextSortKey(s.view.sort);
      break;
    case '/':
      s.editing = true;
      s.edit = s.view.filter;
      break;
    case KEY_UP:
    case 'k':
      if (s.mode == Mode::kNodes) MoveSelection(s, s.reports, s.findings, -1);
      break;
    case KEY_DOWN:
    case 'j':
      if (s.mode == Mode::kNodes) MoveSelection(s, s.reports, s.findings, 1);
      break;
    case KEY_PPAGE:
      if (s.mode == Mode::kNodes) MoveSelection(s, s.reports, s.findings, -10);
      break;
    case KEY_NPAGE:
      if (s.mode == Mode::kNodes) MoveSelection(s, s.reports, s.findings, 10);
      break;
    case KEY_HOME:
      if (s.mode == Mode::kNodes) MoveSelection(s, s.reports, s.findings, -1'000'000);
      break;
    case KEY_END:
      if (s.mode == Mode::kNodes) MoveSelection(s, s.reports, s.findings, 1'000'000);
      break;
    case '\n':
    case '\r':
    case KEY_ENTER:
    case KEY_RIGHT:
    case 'l':
      if (s.mode == Mode::kNodes && !s.selected_node.empty()) s.mode = Mode::kDevices;
      break;
    case kEscape:
    case KEY_LEFT:
    case KEY_BACKSPACE:
    case 127:
    case 'h':
      s.mode = Mode::kNodes;
      break;
    default:
      break;  // KEY_RESIZE and the rest: just draw again
  }
  return true;
}

// While the screen is up, stderr (logs, gRPC's own complaints) would write over it.
class QuietStderr {
 public:
  QuietStderr() {
    if (isatty(STDERR_FILENO) == 0) return;
    const int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (null < 0) return;
    saved_ = dup(STDERR_FILENO);
    if (saved_ >= 0) dup2(null, STDERR_FILENO);
    close(null);
  }
  ~QuietStderr() {
    if (saved_ < 0) return;
    dup2(saved_, STDERR_FILENO);
    close(saved_);
  }
  QuietStderr(const QuietStderr&) = delete;
  QuietStderr& operator=(const QuietStderr&) = delete;

 private:
  int saved_ = -1;
};

}  // namespace

int RunScreen(const std::function<Snapshot()>& fetch, const std::function<void()>& cancel,
              const ScreenOptions& options) {
  if (isatty(STDIN_FILENO) == 0 || isatty(STDOUT_FILENO) == 0) {
    std::fputs("accelmon: top needs a terminal (or --once for text)\n", stderr);
    return 1;
  }
  // Our handlers before ncurses starts: it then leaves SIGINT and SIGTERM to us, and the loop
  // below restores the terminal however the screen is asked to close.
  struct sigaction action = {};
  action.sa_handler = OnStopSignal;
  sigemptyset(&action.sa_mask);
  struct sigaction old_int = {}, old_term = {};
  sigaction(SIGINT, &action, &old_int);
  sigaction(SIGTERM, &action, &old_term);
  g_stop = 0;

  SCREEN* screen = newterm(nullptr, stdout, stdin);
  if (screen == nullptr) {
    sigaction(SIGINT, &old_int, nullptr);
    sigaction(SIGTERM, &old_term, nullptr);
    std::fputs("accelmon: top cannot drive this terminal (is TERM set?); try --once\n", stderr);
    return 1;
  }
  set_term(screen);
  const bool color = options.color && has_colors();
  if (color) {
    start_color();
    use_default_colors();
    init_pair(kGreen, COLOR_GREEN, -1);
    init_pair(kYellow, COLOR_YELLOW, -1);
    init_pair(kRed, COLOR_RED, -1);
    init_pair(kCyan, COLOR_CYAN, -1);
  }
  cbreak();
  noecho();
  nonl();
  keypad(stdscr, TRUE);
  curs_set(0);
  set_escdelay(25);
  wtimeout(stdscr, kPollMillis);

  {
    QuietStderr quiet;
    State state{.view = options.view};
    Screen ui(options, color);
    Fetcher fetcher(fetch, options.refresh);
    uint64_t version = 0;
    while (g_stop == 0) {
      if (std::optional<Snapshot> snapshot = fetcher.Take(version)) {
        state.error = std::move(snapshot->error);
        if (state.error.empty() || snapshot->partial) {
          state.reports = std::move(snapshot->reports);
          state.findings = std::move(snapshot->findings);
          state.have_data = true;
          state.updated = std::chrono::steady_clock::now();
        }
      }
      ui.Draw(state);
      const int key = wgetch(stdscr);
      if (key == ERR) continue;
      if (!HandleKey(state, key)) break;
    }
    fetcher.Stop(cancel);
  }
  endwin();
  delscreen(screen);
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  return 0;
}

}  // namespace accelmon::top
