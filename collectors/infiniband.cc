#include "collectors/infiniband.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <system_error>
#include <utility>
#include <vector>

#include "collectors/text_parsing.h"

namespace accelmon::collectors {
namespace {

// IB_PORT_ACTIVE in the kernel's enum ib_port_state.
constexpr uint32_t kPortActive = 4;

// The rate file is in Gb/s; the proto wants bytes per second.
constexpr double kBytesPerGigabit = 1e9 / 8;

// port_xmit_data and port_rcv_data count 4-byte words (PortXmitData in the IB spec).
constexpr uint64_t kBytesPerDataWord = 4;

// A plain function pointer: GCC 12's UBSan miscompiles calls through member pointers.
using LinkCounterSetter = void (*)(v1::Link&, uint64_t);

struct Counter {
  std::string_view file;
  LinkCounterSetter set;
};

// The unsigned product wraps after 2^64 bytes (2^62 words) like any hardware counter would; a
// rate() sees one counter reset. node_exporter does the same.
constexpr Counter kTrafficCounters[] = {
    {"port_xmit_data",
     [](v1::Link& l, uint64_t v) { l.set_transmit_bytes_total(v * kBytesPerDataWord); }},
    {"port_rcv_data",
     [](v1::Link& l, uint64_t v) { l.set_receive_bytes_total(v * kBytesPerDataWord); }},
    {"port_xmit_packets", [](v1::Link& l, uint64_t v) { l.set_transmit_packets_total(v); }},
    {"port_rcv_packets", [](v1::Link& l, uint64_t v) { l.set_receive_packets_total(v); }},
};

// Error counters reported under their sysfs names. Widths vary (symbol_error is 16 bits,
// port_xmit_wait 32) and saturate instead of wrapping; they are passed on as read.
constexpr std::string_view kErrorCounters[] = {
    "symbol_error",
    "port_rcv_errors",
    "link_downed",
    "link_error_recovery",
    "port_xmit_discards",
    "local_link_integrity_errors",
    "excessive_buffer_overrun_errors",
    "port_rcv_remote_physical_errors",
    "port_rcv_switch_relay_errors",
    "port_xmit_constraint_errors",
    "port_rcv_constraint_errors",
    "VL15_dropped",
    "port_xmit_wait",
};

// Reads counters/<name>. Kernels without a PMA answer "N/A (no PMA)": absent, not malformed.
std::optional<uint64_t> ReadCounter(const PortAttributeReader& read, std::string_view name,
                                    size_t& malformed) {
  const auto text = read("counters/" + std::string(name));
  if (!text) return std::nullopt;
  const auto value = ParseUint64(*text);
  if (!value && !text->starts_with("N/A")) ++malformed;
  return value;
}

}  // namespace

std::optional<uint32_t> ParseInfinibandState(std::string_view text) {
  const size_t colon = text.find(':');
  if (colon == std::string_view::npos) return std::nullopt;
  const auto id = ParseUint64(text.substr(0, colon));
  if (!id || *id > std::numeric_limits<uint32_t>::max()) return std::nullopt;
  return static_cast<uint32_t>(*id);
}

std::optional<double> ParseInfinibandRate(std::string_view text) {
  const std::vector<std::string_view> fields = SplitFields(text);
  if (fields.size() < 2 || fields[1] != "Gb/sec") return std::nullopt;
  const auto gbps = ParseDouble(fields[0]);
  if (!gbps || !std::isfinite(*gbps) || *gbps < 0) return std::nullopt;
  return *gbps * kBytesPerGigabit;
}

size_t ParseInfinibandPort(const PortAttributeReader& read, v1::Link& link) {
  size_t malformed = 0;
  if (const auto text = read("state")) {
    if (const auto state = ParseInfinibandState(*text)) {
      link.set_up(*state == kPortActive);
    } else {
      ++malformed;
    }
  }
  if (const auto text = read("rate")) {
    if (const auto rate = ParseInfinibandRate(*text)) {
      link.set_max_bandwidth_bytes_per_second(*rate);
    } else {
      ++malformed;
    }
  }
  // The kernel writes "InfiniBand", "Ethernet" (RoCE) or "Unknown".
  if (const auto layer = read("link_layer")) {
    link.set_kind(*layer == "InfiniBand" ? v1::LINK_KIND_INFINIBAND
                  : *layer == "Ethernet" ? v1::LINK_KIND_ROCE
                                         : v1::LINK_KIND_UNSPECIFIED);
  }
  for (const Counter& counter : kTrafficCounters) {
    if (const auto value = ReadCounter(read, counter.file, malformed)) counter.set(link, *value);
  }
  for (const std::string_view name : kErrorCounters) {
    if (const auto value = ReadCounter(read, name, malformed)) {
      (*link.mutable_errors_total())[std::string(name)] = *value;
    }
  }
  return malformed;
}

void InfinibandCollector::Collect(v1::NodeReport& report) {
  const OpenFileCache::SweepAtExit sweep(files_);
  const std::filesystem::path root = paths_.Sys("class/infiniband");
  std::vector<std::string> devices;
  if (const int error = files_.ListDirectory(root, devices); error != 0) {
    ThrowSourceError(root.string(), std::error_code(error, std::generic_category()));
  }
  std::sort(devices.begin(), devices.end());

  size_t malformed = 0;
  auto& links = *report.mutable_host()->mutable_links();
  std::vector<std::string> names;
  std::string file;  // one port attribute's path, its buffer reused
  for (const std::string& device : devices) {
    const std::filesystem::path ports_dir = root / device / "ports";
    std::vector<std::pair<uint32_t, std::string>> ports;
    if (files_.ListDirectory(ports_dir, names) != 0) {
      ++malformed;  // a device without a readable ports/ directory
      continue;
    }
    for (std::string& port : names) {
      const auto number = ParseUint64(port);
      if (!number || *number > std::numeric_limits<uint32_t>::max()) {
        ++malformed;
        continue;
      }
      ports.emplace_back(static_cast<uint32_t>(*number), std::move(port));
    }
    std::sort(ports.begin(), ports.end());

    for (const auto& [number, port] : ports) {
      const std::string dir = (ports_dir / port).native();
      v1::Link& link = *links.Add();
      link.set_name(device + "/" + port);
      link.set_index(number);
      malformed += ParseInfinibandPort(
          [this, &dir, &file](std::string_view relative) {
            file.assign(dir).append(1, '/').append(relative);
            return files_.Attribute(file);
          },
          link);
    }
  }
  malformed_log_.Skipped(malformed, "malformed attribute(s) under", root);
}

}  // namespace accelmon::collectors
