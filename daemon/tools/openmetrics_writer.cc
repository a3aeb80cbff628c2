#include "daemon/tools/openmetrics_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <stdexcept>
#include <string_view>
#include <system_error>

#include "daemon/exporter/metrics_renderer.h"
#include "proto/time_format.h"

namespace accelmon {
namespace {

using prometheus::MetricType;

// Output is written in pieces of about this size.
constexpr size_t kFlushBytes = size_t{1} << 20;

int64_t FloorDiv(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

std::string ErrnoText() { return std::strerror(errno); }

// OpenMetrics escapes backslash, double quote and line feed in label values and HELP text.
void AppendEscaped(std::string_view text, std::string* out) {
  if (text.find_first_of("\\\"\n") == std::string_view::npos) {
    out->append(text);  // the usual case
    return;
  }
  for (const char c : text) {
    switch (c) {
      case '\\':
        out->append("\\\\");
        break;
      case '"':
        out->append("\\\"");
        break;
      case '\n':
        out->append("\\n");
        break;
      default:
        out->push_back(c);
    }
  }
}

void AppendLabels(const std::vector<prometheus::ClientMetric::Label>& labels, std::string* out) {
  if (labels.empty()) return;
  out->push_back('{');
  for (size_t i = 0; i < labels.size(); ++i) {
    if (i > 0) out->push_back(',');
    out->append(labels[i].name);
    out->append("=\"");
    AppendEscaped(labels[i].value, out);
    out->push_back('"');
  }
  out->push_back('}');
}

// Shortest text that parses back to the same double; OpenMetrics spells the specials NaN, +Inf,
// -Inf.
void AppendValue(double v, std::string* out) {
  if (std::isnan(v)) {
    out->append("NaN");
  } else if (std::isinf(v)) {
    out->append(v > 0 ? "+Inf" : "-Inf");
  } else {
    char buf[32];
    const auto r = std::to_chars(buf, buf + sizeof(buf), v);
    out->append(buf, r.ptr);
  }
}

// The unit OpenMetrics declares for a family: the base unit its name ends in, if any.
std::string UnitOf(std::string_view family_name) {
  static constexpr std::string_view kUnits[] = {
      "bytes_per_second", "seconds", "bytes", "celsius", "watts", "joules", "hertz", "ratio"};
  for (const std::string_view unit : kUnits) {
    if (family_name.size() > unit.size() + 1 && family_name.ends_with(unit) &&
        family_name[family_name.size() - unit.size() - 1] == '_') {
      return std::string(unit);
    }
  }
  return {};
}

void WriteAll(int fd, std::string_view data, const std::string& path) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error("cannot write " + path + ": " + ErrnoText());
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
}

}  // namespace

struct OpenMetricsWriter::Family {
  std::string name;         // the OpenMetrics family name: a counter's without "_total"
  std::string sample_name;  // the name on sample lines, the same as on /metrics
  std::string help;
  const char* type;  // "gauge", "counter" or "unknown"
  std::string unit;  // empty when the name ends in no base unit
};

// What one buffered sample costs: a 4-byte offset from the window's start (2 h fits in 32 bits
// of milliseconds) and an 8-byte value, in two parallel vectors: 12 bytes, up to twice that while
// the vectors grow. A node of `standalone --sim 8` renders about 760 samples per report, so at one
// report a second a window buffers 760 * 7200 samples, 66-130 MB per node, and time-ordered input
// keeps two windows. The series' names and labels are kept once, for all windows.
struct OpenMetricsWriter::Window {
  struct Series {
    uint32_t id;                      // index into series_
    std::vector<uint32_t> offset_ms;  // from the window's start
    std::vector<double> values;
    bool ordered = true;  // offsets never decreased (the usual case: no sort when writing)
  };
  std::vector<Series> series;                   // in the order first seen
  std::unordered_map<uint32_t, uint32_t> slot;  // series id -> index into `series`
  uint64_t last_used = 0;                       // adds_ when it last received a report
  uint64_t samples = 0;
};

OpenMetricsWriter::OpenMetricsWriter(std::string out_dir, Options options)
    : out_dir_(std::move(out_dir)), options_(options) {
  std::error_code ec;
  std::filesystem::create_directories(out_dir_, ec);
  if (ec) throw std::runtime_error("cannot create directory " + out_dir_ + ": " + ec.message());
}

OpenMetricsWriter::~OpenMetricsWriter() = default;

std::string OpenMetricsWriter::FileName(int64_t window_start_ms, int part) {
  // Ten digits (zero-padded) hold every start until the year 2286, so names sort by time.
  std::string seconds = std::to_string(FloorDiv(window_start_ms, 1000));
  if (seconds.size() < 10 && seconds[0] != '-') seconds.insert(0, 10 - seconds.size(), '0');
  std::string name = "accelmon-" + seconds;
  if (part > 0) {
    std::string n = std::to_string(part);
    if (n.size() < 3) n.insert(0, 3 - n.size(), '0');
    name += "_" + n;
  }
  return name + ".om";
}

std::string OpenMetricsWriter::FormatTimestamp(int64_t ms) {
  // promtool computes int64(seconds * 1000), truncating. Three decimals come back exact for
  // every timestamp of this century; where a double's rounding would land just below (far
  // future), a trailing half millisecond keeps the truncation on the right side.
  const uint64_t abs_ms = ms < 0 ? static_cast<uint64_t>(-(ms + 1)) + 1 : static_cast<uint64_t>(ms);
  std::string fraction = std::to_string(abs_ms % 1000);
  fraction.insert(0, 3 - fraction.size(), '0');
  std::string text = (ms < 0 ? "-" : "") + std::to_string(abs_ms / 1000) + "." + fraction;
  double parsed = 0;
  std::from_chars(text.data(), text.data() + text.size(), parsed);
  if (static_cast<int64_t>(parsed * 1000) != ms) text += "5";
  return text;
}

uint32_t OpenMetricsWriter::FamilyIndex(const std::string& name, const std::string& help,
                                        MetricType type) {
  const auto [it, inserted] =
      family_index_.try_emplace(name, static_cast<uint32_t>(families_.size()));
  if (!inserted) return it->second;
  Family f{name, name, help, "unknown", {}};
  switch (type) {
    case MetricType::Counter:
      // OpenMetrics names a counter's family without the "_total" its samples carry. A counter
      // without the suffix would need a renamed sample, so it stays "unknown" under its name.
      if (name.ends_with("_total")) {
        f.name.resize(name.size() - 6);
        f.type = "counter";
      }
      break;
    case MetricType::Gauge:
      f.type = "gauge";
      break;
    case MetricType::Untyped:
      break;
    default:
      throw std::logic_error("OpenMetricsWriter: unsupported type of family " + name);
  }
  f.unit = UnitOf(f.name);
  families_.push_back(std::move(f));
  return it->second;
}

OpenMetricsWriter::Window& OpenMetricsWriter::OpenWindow(int64_t window) {
  if (const auto it = open_.find(window); it != open_.end()) return *it->second;
  // Time-ordered input: once reports reach a new window, those two back are complete.
  if (!newest_window_ || window > *newest_window_) {
    newest_window_ = window;
    while (!open_.empty() && open_.begin()->first < window - 1) {
      WriteWindow(open_.begin()->first, *open_.begin()->second);
      open_.erase(open_.begin());
    }
  }
  // Anything else (late reports, skewed clocks): the window that got a report least recently.
  if (open_.size() >= std::max<size_t>(options_.max_open_windows, 1)) {
    auto lru = open_.begin();
    for (auto it = open_.begin(); it != open_.end(); ++it) {
      if (it->second->last_used < lru->second->last_used) lru = it;
    }
    WriteWindow(lru->first, *lru->second);
    open_.erase(lru);
  }
  return *open_.emplace(window, std::make_unique<Window>()).first->second;
}

void OpenMetricsWriter::Add(const v1::NodeReport& report) {
  if (!report.has_timestamp()) {
    ++summary_.reports_without_timestamp;
    return;
  }
  const int64_t ts_ms = ToMillis(report.timestamp());
  const int64_t window = FloorDiv(ts_ms, kWindowMs);
  const auto offset = static_cast<uint32_t>(ts_ms - window * kWindowMs);
  Window& w = OpenWindow(window);
  w.last_used = ++adds_;

  // Rendered as the exporter would right after receiving it: accelmon_node_up is 1.
  const Clock::time_point at{std::chrono::duration_cast<Clock::duration>(
      std::chrono::nanoseconds(ToNanos(report.timestamp())))};
  // A non-owning pointer: the report outlives the call.
  const std::shared_ptr<const v1::NodeReport> unowned(std::shared_ptr<const v1::NodeReport>(),
                                                      &report);
  const std::vector<prometheus::MetricFamily> families = RenderNodes({NodeEntry{unowned, at}}, at);

  uint64_t samples = 0;
  for (const prometheus::MetricFamily& family : families) {
    const uint32_t f = FamilyIndex(family.name, family.help, family.type);
    for (const prometheus::ClientMetric& metric : family.metric) {
      key_.assign(reinterpret_cast<const char*>(&f), sizeof(f));
      AppendLabels(metric.label, &key_);
      const auto [it, inserted] =
          series_index_.try_emplace(key_, static_cast<uint32_t>(series_.size()));
      if (inserted) series_.push_back(&it->first);
      const uint32_t id = it->second;

      const auto [slot, new_slot] = w.slot.try_emplace(id, static_cast<uint32_t>(w.series.size()));
      if (new_slot) w.series.push_back(Window::Series{id, {}, {}, true});
      Window::Series& s = w.series[slot->second];
      if (!s.offset_ms.empty() && offset < s.offset_ms.back()) s.ordered = false;
      s.offset_ms.push_back(offset);
      switch (family.type) {
        case MetricType::Counter:
          s.values.push_back(metric.counter.value);
          break;
        case MetricType::Gauge:
          s.values.push_back(metric.gauge.value);
          break;
        default:
          s.values.push_back(metric.untyped.value);
      }
      ++samples;
    }
  }
  w.samples += samples;
  buffered_samples_ += samples;
  ++summary_.reports;
  if (samples > 0) {
    summary_.samples += samples;
    if (!summary_.first_timestamp_ms || ts_ms < *summary_.first_timestamp_ms) {
      summary_.first_timestamp_ms = ts_ms;
    }
    if (!summary_.last_timestamp_ms || ts_ms > *summary_.last_timestamp_ms) {
      summary_.last_timestamp_ms = ts_ms;
    }
  }
}

void OpenMetricsWriter::WriteWindow(int64_t window, Window& w) {
  const int part = parts_written_[window]++;
  const int64_t start_ms = window * kWindowMs;
  const std::string path = out_dir_ + "/" + FileName(start_ms, part);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error("cannot create " + path + ": " + ErrnoText());
  try {
    // The window's series by family, each family in the order first seen.
    std::vector<std::vector<uint32_t>> by_family(families_.size());
    for (uint32_t i = 0; i < w.series.size(); ++i) {
      const std::string& key = *series_[w.series[i].id];
      uint32_t f = 0;
      std::memcpy(&f, key.data(), sizeof(f));
      by_family[f].push_back(i);
    }

    // Each sample's timestamp is formatted once per report time, not once per sample.
    std::unordered_map<uint32_t, std::string> timestamps;
    auto timestamp = [&](uint32_t offset) -> const std::string& {
      auto [it, inserted] = timestamps.try_emplace(offset);
      if (inserted) it->second = FormatTimestamp(start_ms + offset);
      return it->second;
    };

    std::string out;
    out.reserve(kFlushBytes + 4096);
    for (size_t f = 0; f < families_.size(); ++f) {
      if (by_family[f].empty()) continue;
      const Family& family = families_[f];
      out.append("# HELP ").append(family.name).push_back(' ');
      AppendEscaped(family.help, &out);
      out.append("\n# TYPE ").append(family.name).append(" ").append(family.type).push_back('\n');
      if (!family.unit.empty()) {
        out.append("# UNIT ").append(family.name).append(" ").append(family.unit).push_back('\n');
      }
      for (const uint32_t slot : by_family[f]) {
        Window::Series& s = w.series[slot];
        std::vector<uint32_t> order(s.offset_ms.size());
        std::iota(order.begin(), order.end(), 0);
        if (!s.ordered) {
          std::stable_sort(order.begin(), order.end(),
                           [&](uint32_t a, uint32_t b) { return s.offset_ms[a] < s.offset_ms[b]; });
        }
        const std::string_view labels = std::string_view(*series_[s.id]).substr(sizeof(uint32_t));
        for (const uint32_t i : order) {
          out.append(family.sample_name).append(labels).push_back(' ');
          AppendValue(s.values[i], &out);
          out.push_back(' ');
          out.append(timestamp(s.offset_ms[i])).push_back('\n');
        }
        if (out.size() >= kFlushBytes) {
          WriteAll(fd, out, path);
          out.clear();
        }
        // Free the window's memory as it is written.
        std::vector<uint32_t>().swap(s.offset_ms);
        std::vector<double>().swap(s.values);
      }
    }
    out.append("# EOF\n");
    WriteAll(fd, out, path);
  } catch (...) {
    ::close(fd);
    throw;
  }
  if (::close(fd) != 0) throw std::runtime_error("cannot write " + path + ": " + ErrnoText());
  buffered_samples_ -= w.samples;
  summary_.files.push_back(path);
}

OpenMetricsWriter::Summary OpenMetricsWriter::Finish() {
  for (auto& [window, w] : open_) WriteWindow(window, *w);
  open_.clear();
  summary_.series = series_.size();
  return summary_;
}

}  // namespace accelmon
