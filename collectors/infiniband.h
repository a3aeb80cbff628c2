// InfiniBand and RoCE ports from /sys/class/infiniband/<dev>/ports/<n>/.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "collectors/collector.h"
#include "collectors/malformed_input_log.h"
#include "collectors/open_file_cache.h"
#include "collectors/path_resolver.h"

namespace accelmon::collectors {

// "4: ACTIVE" -> 4 (the IB port state id). nullopt when malformed.
std::optional<uint32_t> ParseInfinibandState(std::string_view text);

// "100 Gb/sec (4X EDR)" -> 12.5e9 bytes per second. nullopt when malformed.
std::optional<double> ParseInfinibandRate(std::string_view text);

// The trimmed text of one attribute of a port, by path relative to the port directory ("state",
// "counters/port_xmit_data"); nullopt when it is missing or unreadable.
using PortAttributeReader = std::function<std::optional<std::string>(std::string_view relative)>;

// Fills `link` from one port's attributes: up (state), max bandwidth (rate), kind (link_layer),
// byte and packet counters and the error counters that exist. The name and index are the
// caller's. Reads through `read`, so it runs without files. Returns the number of attributes
// that were present but not understood.
size_t ParseInfinibandPort(const PortAttributeReader& read, v1::Link& link);

// Adds one Link per port, named "<dev>/<port>", to report.host().links(). A node without
// /sys/class/infiniband has no data (CollectorError).
class InfinibandCollector final : public Collector {
 public:
  explicit InfinibandCollector(PathResolver paths) : paths_(std::move(paths)) {}

  std::string_view name() const override { return "infiniband"; }
  void Collect(v1::NodeReport& report) override;

 private:
  PathResolver paths_;
  OpenFileCache files_;
  MalformedInputLog malformed_log_{"infiniband"};
};

}  // namespace accelmon::collectors
