// The host collectors against a real peer: Debian's node_exporter reads the same fixture root,
// and every quantity both expose must agree after unit conversion. Every node_exporter sample of
// a compared family must find its accelmon counterpart, so a collector cannot silently skip one.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <prometheus/text_serializer.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>

#include "collectors/registry.h"
#include "daemon/exporter/metrics_renderer.h"
#include "support/http_get.h"
#include "support/prom_text.h"
#include "support/temp_dir.h"
#include "support/wait.h"

extern char** environ;

namespace accelmon {
namespace {

using testing::FindValue;
using testing::HttpGet;
using testing::ParseExposition;
using testing::Sample;
using Labels = std::map<std::string, std::string>;

const std::string kRoot = std::string(ACCELMON_FIXTURES_DIR) + "/host";

// node_exporter's collectors for ours (collectors::HostCollectors()): the same names, plus
// netclass, which node_exporter splits off netdev (the /sys/class/net half of our netdev).
std::vector<std::string> PeerCollectors() {
  std::vector<std::string> names;
  for (const auto& info : collectors::HostCollectors()) names.emplace_back(info.name);
  names.emplace_back("netclass");
  return names;
}

// node_exporter as a child process over the fixture root, with only the compared collectors, on
// a port the kernel chooses: it logs `msg="Listening on" address=127.0.0.1:PORT`.
class NodeExporter {
 public:
  NodeExporter() : log_(testing::MakeTempDir("accelmon-parity") + "/node_exporter.log") {
    std::vector<std::string> args = {"prometheus-node-exporter", "--path.procfs=" + kRoot + "/proc",
                                     "--path.sysfs=" + kRoot + "/sys",
                                     "--web.listen-address=127.0.0.1:0",
                                     "--collector.disable-defaults"};
    for (const std::string& c : PeerCollectors()) {
      args.push_back("--collector." + c);
    }
    // netlink would read this machine's kernel, not the fixture root; -1 speeds stay unreported.
    args.push_back("--no-collector.netdev.netlink");
    args.push_back("--no-collector.netclass.netlink");
    args.push_back("--collector.netclass.ignore-invalid-speed");
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 2, log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int rc = posix_spawnp(&pid_, argv[0], &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) throw std::runtime_error("cannot start prometheus-node-exporter");
    // Listening once it says so: no connection attempts before.
    if (!testing::WaitFor([&] { return (port_ = LoggedPort()) > 0; }, std::chrono::seconds(20))) {
      throw std::runtime_error("prometheus-node-exporter logged no listening address in " + log_);
    }
  }
  ~NodeExporter() {
    ::kill(pid_, SIGTERM);
    ::waitpid(pid_, nullptr, 0);
    std::filesystem::remove_all(std::filesystem::path(log_).parent_path());
  }

  std::string Scrape() {
    auto r = HttpGet("127.0.0.1", port_, "/metrics");
    if (r.status != 200)
      throw std::runtime_error("node_exporter answered " + std::to_string(r.status));
    return r.body;
  }

 private:
  int LoggedPort() const {
    std::ifstream in(log_);
    const std::string needle = "msg=\"Listening on\" address=127.0.0.1:";
    for (std::string line; std::getline(in, line);) {
      const size_t at = line.find(needle);
      if (at != std::string::npos) return std::atoi(line.c_str() + at + needle.size());
    }
    return 0;
  }

  std::string log_;
  int port_ = 0;
  pid_t pid_ = -1;
};

// What accelmon reports over the same root, rendered exactly as /metrics renders it.
std::vector<Sample> AccelmonHostMetrics() {
  collectors::CollectorSet set(collectors::CreateCollectors(collectors::CollectorConfig{
      .paths = collectors::PathResolver(kRoot + "/proc", kRoot + "/sys"), .sim_devices = 0}));
  auto report = std::make_shared<v1::NodeReport>();
  report->set_node("parity");
  report->mutable_timestamp()->set_seconds(1'700'000'000);
  set.CollectAll(*report);
  for (const auto& c : report->collectors()) {
    EXPECT_TRUE(c.success()) << c.name() << ": " << c.error();
  }
  const auto now = Clock::now();
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, RenderNodes({{report, now}}, now));
  return ParseExposition(out.str());
}

struct Expected {
  std::string name;
  Labels labels;
  double factor = 1;  // ours = theirs * factor
};

// A node_exporter family and how each of its samples maps onto ours (nullopt: not compared).
struct Rule {
  std::string theirs;
  std::function<std::optional<Expected>(const Labels&)> map;
};

Rule Same(std::string theirs, std::string ours, std::function<Labels(const Labels&)> labels,
          double factor = 1) {
  return Rule{theirs, [=](const Labels& l) -> std::optional<Expected> {
                return Expected{ours, labels(l), factor};
              }};
}

Labels NoLabels(const Labels&) { return {}; }

// A network device's labels; node_exporter reports lo, accelmon leaves it out on purpose.
std::function<std::optional<Expected>(const Labels&)> NetDevice(std::string ours,
                                                                std::string error_type = "") {
  return [=](const Labels& l) -> std::optional<Expected> {
    if (l.at("device") == "lo") return std::nullopt;
    Labels m{{"link", l.at("device")}};
    if (!error_type.empty()) m["type"] = error_type;
    return Expected{ours, m};
  };
}

std::vector<Rule> Rules(const std::vector<Sample>& peer) {
  std::vector<Rule> rules;
  // meminfo
  for (const auto& [key, ours] : std::vector<std::pair<std::string, std::string>>{
           {"MemTotal_bytes", "total_bytes"},
           {"MemFree_bytes", "free_bytes"},
           {"MemAvailable_bytes", "available_bytes"},
           {"Buffers_bytes", "buffers_bytes"},
           {"Cached_bytes", "cached_bytes"},
           {"SwapTotal_bytes", "swap_total_bytes"},
           {"SwapFree_bytes", "swap_free_bytes"},
           {"Shmem_bytes", "shmem_bytes"},
           {"SReclaimable_bytes", "slab_reclaimable_bytes"},
           {"SUnreclaim_bytes", "slab_unreclaimable_bytes"},
           {"Dirty_bytes", "dirty_bytes"},
           {"Writeback_bytes", "writeback_bytes"},
           {"HugePages_Total", "hugepages"},
           {"HugePages_Free", "hugepages_free"},
           {"Hugepagesize_bytes", "hugepage_size_bytes"}}) {
    rules.push_back(Same("node_memory_" + key, "accelmon_host_memory_" + ours, NoLabels));
  }
  // vmstat, pressure (node_exporter in seconds, the kernel in microseconds)
  rules.push_back(Same("node_vmstat_oom_kill", "accelmon_host_oom_kills_total", NoLabels));
  rules.push_back(Same("node_pressure_memory_waiting_seconds_total",
                       "accelmon_host_memory_pressure_seconds_total", [](const Labels&) {
                         return Labels{{"kind", "some"}};
                       }));
  rules.push_back(Same("node_pressure_memory_stalled_seconds_total",
                       "accelmon_host_memory_pressure_seconds_total", [](const Labels&) {
                         return Labels{{"kind", "full"}};
                       }));
  // buddyinfo
  rules.push_back(
      Same("node_buddyinfo_blocks", "accelmon_host_memory_free_blocks", [](const Labels& l) {
        return Labels{{"numa_node", l.at("node")}, {"zone", l.at("zone")}, {"order", l.at("size")}};
      }));
  // netdev
  rules.push_back(
      {"node_network_receive_bytes_total", NetDevice("accelmon_host_link_receive_bytes_total")});
  rules.push_back(
      {"node_network_transmit_bytes_total", NetDevice("accelmon_host_link_transmit_bytes_total")});
  rules.push_back({"node_network_receive_packets_total",
                   NetDevice("accelmon_host_link_receive_packets_total")});
  rules.push_back({"node_network_transmit_packets_total",
                   NetDevice("accelmon_host_link_transmit_packets_total")});
  for (const auto& [theirs, type] :
       std::vector<std::pair<std::string, std::string>>{{"receive_errs", "rx_errors"},
                                                        {"transmit_errs", "tx_errors"},
                                                        {"receive_drop", "rx_dropped"},
                                                        {"transmit_drop", "tx_dropped"},
                                                        {"receive_fifo", "rx_fifo"},
                                                        {"transmit_fifo", "tx_fifo"},
                                                        {"receive_frame", "rx_frame"},
                                                        {"transmit_colls", "tx_collisions"},
                                                        {"transmit_carrier", "tx_carrier"}}) {
    rules.push_back(
        {"node_network_" + theirs + "_total", NetDevice("accelmon_host_link_errors_total", type)});
  }
  // netclass
  rules.push_back({"node_network_up", NetDevice("accelmon_host_link_up")});
  rules.push_back({"node_network_mtu_bytes", NetDevice("accelmon_host_link_mtu_bytes")});
  rules.push_back(
      {"node_network_speed_bytes", NetDevice("accelmon_host_link_max_bandwidth_bytes_per_second")});
  // infiniband: {device, port} -> link "device/port"; data counters already in bytes on both sides
  auto ib = [](std::string ours, std::string error_type = "") {
    return [=](const Labels& l) -> std::optional<Expected> {
      Labels m{{"link", l.at("device") + "/" + l.at("port")}};
      if (!error_type.empty()) m["type"] = error_type;
      return Expected{ours, m};
    };
  };
  rules.push_back({"node_infiniband_port_data_received_bytes_total",
                   ib("accelmon_host_link_receive_bytes_total")});
  rules.push_back({"node_infiniband_port_data_transmitted_bytes_total",
                   ib("accelmon_host_link_transmit_bytes_total")});
  rules.push_back({"node_infiniband_port_packets_received_total",
                   ib("accelmon_host_link_receive_packets_total")});
  rules.push_back({"node_infiniband_port_packets_transmitted_total",
                   ib("accelmon_host_link_transmit_packets_total")});
  rules.push_back({"node_infiniband_rate_bytes_per_second",
                   ib("accelmon_host_link_max_bandwidth_bytes_per_second")});
  for (const auto& [theirs, type] : std::vector<std::pair<std::string, std::string>>{
           {"symbol_error_total", "symbol_error"},
           {"port_errors_received_total", "port_rcv_errors"},
           {"link_downed_total", "link_downed"},
           {"link_error_recovery_total", "link_error_recovery"},
           {"port_discards_transmitted_total", "port_xmit_discards"},
           {"local_link_integrity_errors_total", "local_link_integrity_errors"},
           {"excessive_buffer_overrun_errors_total", "excessive_buffer_overrun_errors"},
           {"port_receive_remote_physical_errors_total", "port_rcv_remote_physical_errors"},
           {"port_receive_switch_relay_errors_total", "port_rcv_switch_relay_errors"},
           {"port_constraint_errors_transmitted_total", "port_xmit_constraint_errors"},
           {"port_constraint_errors_received_total", "port_rcv_constraint_errors"},
           {"vl15_dropped_total", "VL15_dropped"},
           {"port_transmit_wait_total", "port_xmit_wait"}}) {
    rules.push_back({"node_infiniband_" + theirs, ib("accelmon_host_link_errors_total", type)});
  }
  // state_id 4 is ACTIVE: accelmon's link_up is 1 exactly then.
  rules.push_back({"node_infiniband_state_id", [](const Labels& l) -> std::optional<Expected> {
                     return Expected{"accelmon_host_link_up",
                                     {{"link", l.at("device") + "/" + l.at("port")}},
                                     std::nan("state")};
                   }});
  // thermal_zone
  rules.push_back(
      Same("node_thermal_zone_temp", "accelmon_host_temperature_celsius", [](const Labels& l) {
        return Labels{{"chip", "thermal_zone" + l.at("zone")}, {"sensor", l.at("type")}};
      }));
  // hwmon: node_exporter names a sensor by chip and "temp1"; accelmon by the chip's name and the
  // sensor's label, as `sensors` does. Both come from node_exporter's own info series.
  std::map<std::string, std::string> chip_names;
  std::map<std::pair<std::string, std::string>, std::string> sensor_labels;
  for (const Sample& t : peer) {
    if (t.name == "node_hwmon_chip_names")
      chip_names[t.labels.at("chip")] = t.labels.at("chip_name");
    if (t.name == "node_hwmon_sensor_label") {
      sensor_labels[{t.labels.at("chip"), t.labels.at("sensor")}] = t.labels.at("label");
    }
  }
  // node_exporter 1.5 reads a chip's name only from hwmonN/name; old drivers keep it in
  // hwmonN/device/name, which accelmon reads (the fixture's acpi power meter is such a chip).
  chip_names.emplace("hwmon3_device", "power_meter");
  auto hwmon = [=](std::string ours) {
    return [=](const Labels& l) -> std::optional<Expected> {
      const std::string& chip = l.at("chip");
      const std::string& sensor = l.at("sensor");
      const auto label = sensor_labels.find({chip, sensor});
      const std::string name = chip_names.count(chip) ? chip_names.at(chip) : chip;
      return Expected{
          ours, {{"sensor", name + " " + (label != sensor_labels.end() ? label->second : sensor)}}};
    };
  };
  rules.push_back({"node_hwmon_temp_celsius", hwmon("accelmon_host_temperature_celsius")});
  rules.push_back({"node_hwmon_power_watt", hwmon("accelmon_host_power_watts")});
  rules.push_back({"node_hwmon_power_average_watt", hwmon("accelmon_host_power_watts")});
  return rules;
}

TEST(NodeExporterParity, HostCollectorsAgreeWithNodeExporterOverTheSameRoot) {
  NodeExporter peer;
  const auto theirs = ParseExposition(peer.Scrape());
  const auto ours = AccelmonHostMetrics();

  // Both sides must have read every source; a peer that failed would compare nothing.
  for (const std::string& c : PeerCollectors()) {
    EXPECT_EQ(FindValue(theirs, "node_scrape_collector_success", {{"collector", c}}), 1.0) << c;
  }

  size_t compared = 0;
  for (const Rule& rule : Rules(theirs)) {
    size_t seen = 0;
    for (const Sample& s : theirs) {
      if (s.name != rule.theirs) continue;
      ++seen;
      const auto expected = rule.map(s.labels);
      if (!expected) continue;
      std::ostringstream where;
      where << rule.theirs << "{";
      for (const auto& [k, v] : s.labels) where << k << "=\"" << v << "\",";
      where << "} -> " << expected->name;
      const auto value = FindValue(ours, expected->name, expected->labels);
      ASSERT_TRUE(value.has_value()) << "accelmon lacks " << where.str();
      const double want =
          std::isnan(expected->factor) ? (s.value == 4 ? 1 : 0) : s.value * expected->factor;
      EXPECT_NEAR(*value, want, std::max(1e-9, std::abs(want) * 1e-12)) << where.str();
      ++compared;
    }
    EXPECT_GT(seen, 0u) << "node_exporter reported no " << rule.theirs
                        << " over the fixture root: the fixture misses that case";
  }
  std::cout << "compared " << compared << " samples with node_exporter\n";
  EXPECT_GT(compared, 50u);
}

}  // namespace
}  // namespace accelmon
