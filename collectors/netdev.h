// Network interfaces from /proc/net/dev and /sys/class/net/<if>/.
#pragma once

#include <cstddef>
#include <string_view>

#include "collectors/collector.h"
#include "collectors/malformed_input_log.h"
#include "collectors/open_file_cache.h"
#include "collectors/path_resolver.h"

namespace accelmon::collectors {

// Parses /proc/net/dev text, appending one Link per interface to `links` with its name and the
// byte, packet and error counters. "lo" is skipped. The two header lines are recognised by their
// '|' and ignored; other lines that are not "name: 16 counters" are skipped. Returns the number
// of skipped lines.
size_t ParseNetDev(std::string_view text, google::protobuf::RepeatedPtrField<v1::Link>& links);

// Adds a Link per interface of /proc/net/dev to report.host().links(), with link state, speed,
// MTU and kind from /sys/class/net/<if>/{operstate,speed,mtu,type} where those are readable.
class NetdevCollector final : public Collector {
 public:
  explicit NetdevCollector(PathResolver paths) : paths_(std::move(paths)) {}

  std::string_view name() const override { return "netdev"; }
  void Collect(v1::NodeReport& report) override;

 private:
  PathResolver paths_;
  OpenFileCache files_;
  MalformedInputLog malformed_log_{"netdev"};
};

}  // namespace accelmon::collectors
