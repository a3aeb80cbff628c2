#include "collectors/netdev.h"

#include <spdlog/spdlog.h>

#include <array>
#include <cctype>
#include <cstdint>
#include <limits>
#include <string>

#include "collectors/file_reader.h"
#include "collectors/text_parsing.h"

namespace accelmon::collectors {
namespace {

// The 16 counter columns of /proc/net/dev after "name:", in the kernel's order.
enum Column : size_t {
  kRxBytes,
  kRxPackets,
  kRxErrs,
  kRxDrop,
  kRxFifo,
  kRxFrame,
  kRxCompressed,
  kRxMulticast,
  kTxBytes,
  kTxPackets,
  kTxErrs,
  kTxDrop,
  kTxFifo,
  kTxColls,
  kTxCarrier,
  kTxCompressed,
  kColumns,
};

struct ErrorColumn {
  Column column;
  std::string_view key;
};

constexpr ErrorColumn kErrorColumns[] = {
    {kRxErrs, "rx_errors"},  {kTxErrs, "tx_errors"},      {kRxDrop, "rx_dropped"},
    {kTxDrop, "tx_dropped"}, {kRxFifo, "rx_fifo"},        {kTxFifo, "tx_fifo"},
    {kRxFrame, "rx_frame"},  {kTxColls, "tx_collisions"}, {kTxCarrier, "tx_carrier"},
};

// ARPHRD_* values from <linux/if_arp.h>, as /sys/class/net/<if>/type shows them.
constexpr uint64_t kArphrdEther = 1;
constexpr uint64_t kArphrdInfiniband = 32;

// ethtool's SPEED_UNKNOWN (-1); older kernels print it as an unsigned 32-bit number.
constexpr int64_t kSpeedUnknownUnsigned = std::numeric_limits<uint32_t>::max();

// 1 Mb/s in bytes per second.
constexpr double kBytesPerMegabit = 1e6 / 8;

// What the kernel accepts as an interface name (dev_valid_name). Checked because the name
// becomes a sysfs path component.
bool ValidInterfaceName(std::string_view name) {
  if (name.empty() || name.size() > 15 || name == "." || name == "..") return false;
  for (const char c : name) {
    if (c == '/' || c == ':' || c == '\0' || std::isspace(static_cast<unsigned char>(c))) {
      return false;
    }
  }
  return true;
}

// Parses "  eth0: 16 counters" into `link`; false (and `link` untouched) when malformed.
bool ParseLine(std::string_view line, size_t colon, v1::Link& link) {
  const std::string_view name = Trim(line.substr(0, colon));
  if (!ValidInterfaceName(name)) return false;
  // Wide counters leave no space after the colon ("ens1f0:18446744073709551000"); split anyway.
  const std::vector<std::string_view> fields = SplitFields(line.substr(colon + 1));
  if (fields.size() != kColumns) return false;
  std::array<uint64_t, kColumns> values{};
  for (size_t i = 0; i < kColumns; ++i) {
    const auto value = ParseUint64(fields[i]);
    if (!value) return false;
    values[i] = *value;
  }
  link.set_name(std::string(name));
  link.set_receive_bytes_total(values[kRxBytes]);
  link.set_receive_packets_total(values[kRxPackets]);
  link.set_transmit_bytes_total(values[kTxBytes]);
  link.set_transmit_packets_total(values[kTxPackets]);
  auto& errors = *link.mutable_errors_total();
  for (const ErrorColumn& e : kErrorColumns) errors[std::string(e.key)] = values[e.column];
  return true;
}

}  // namespace

size_t ParseNetDev(std::string_view text, google::protobuf::RepeatedPtrField<v1::Link>& links) {
  size_t malformed = 0;
  ForEachLine(text, [&](std::string_view line) {
    if (Trim(line).empty()) return;
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) {
      // The two header lines ("Inter-|   Receive ...", " face |bytes ...") have no colon.
      if (line.find('|') == std::string_view::npos) ++malformed;
      return;
    }
    v1::Link link;
    if (!ParseLine(line, colon, link)) {
      ++malformed;
      return;
    }
    if (link.name() == "lo") return;
    links.Add(std::move(link));
  });
  return malformed;
}

namespace {

// Fills what /sys/class/net/<if>/ knows about `link`. Missing or unreadable attributes (virtual
// devices answer EINVAL for speed) leave the field absent. Returns the number of attributes that
// were readable but not understood.
size_t ReadInterfaceAttributes(const PathResolver& paths, OpenFileCache& files, v1::Link& link) {
  size_t malformed = 0;
  const std::string dir = paths.Sys("class/net/" + link.name()).native() + "/";

  if (const auto text = files.Attribute(dir + "type")) {
    if (const auto type = ParseUint64(*text)) {
      link.set_kind(*type == kArphrdEther        ? v1::LINK_KIND_ETHERNET
                    : *type == kArphrdInfiniband ? v1::LINK_KIND_INFINIBAND
                                                 : v1::LINK_KIND_UNSPECIFIED);
    } else {
      ++malformed;
    }
  }

  if (const auto state = files.Attribute(dir + "operstate")) {
    link.set_up(*state == "up");
  }

  if (const auto text = files.Attribute(dir + "speed")) {
    if (const auto mbps = ParseInt64(*text)) {
      // -1 is "unknown" (no link, or a virtual device), not a speed.
      if (*mbps >= 0 && *mbps != kSpeedUnknownUnsigned) {
        link.set_max_bandwidth_bytes_per_second(static_cast<double>(*mbps) * kBytesPerMegabit);
      }
    } else {
      ++malformed;
    }
  }

  if (const auto text = files.Attribute(dir + "mtu")) {
    const auto mtu = ParseUint64(*text);
    if (mtu && *mtu <= std::numeric_limits<uint32_t>::max()) {
      link.set_mtu_bytes(static_cast<uint32_t>(*mtu));
    } else {
      ++malformed;
    }
  }
  return malformed;
}

}  // namespace

void NetdevCollector::Collect(v1::NodeReport& report) {
  const OpenFileCache::SweepAtExit sweep(files_);
  const std::filesystem::path path = paths_.Proc("net/dev");
  auto& links = *report.mutable_host()->mutable_links();
  const int first = links.size();
  // Straight from the cache's buffer, which the attribute reads below reuse.
  size_t malformed = ParseNetDev(files_.Text(path), links);
  for (int i = first; i < links.size(); ++i) {
    malformed += ReadInterfaceAttributes(paths_, files_, *links.Mutable(i));
  }
  malformed_log_.Skipped(malformed, "malformed line(s) or attribute(s) in /proc/net/dev or under",
                         paths_.Sys("class/net"));
}

}  // namespace accelmon::collectors
