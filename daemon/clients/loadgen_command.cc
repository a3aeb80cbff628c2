#include "daemon/clients/loadgen_command.h"

#include <cstdio>
#include <memory>

#include "daemon/common/cli_validators.h"
#include "daemon/common/exit_codes.h"
#include "daemon/common/flags.h"

namespace accelmon {
namespace {

// "0" needs no unit.
std::chrono::milliseconds DurationOrZero(const std::string& text) {
  return text == "0" ? std::chrono::milliseconds(0) : ParseDuration(text).value();
}

}  // namespace

void AddLoadgenCommand(CLI::App& app, LoadgenCommand& c) {
  c.app = app.add_subcommand(
      "loadgen",
      "Simulate a fleet of agents from one process, each on its own stream, and measure the "
      "exporter's acknowledged rate and latency");
  c.app->add_option("--exporter.address", c.options.exporter_address, "Exporter to stream to")
      ->check(cli::kConnectAddress)
      ->required();
  c.app->add_option("--nodes", c.options.nodes, "Simulated nodes, one stream each")
      ->check(CLI::Range(1, 100'000))
      ->capture_default_str();
  c.app->add_option("--devices", c.options.devices, "Simulated devices per node")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  c.app
      ->add_option("--links-per-device", c.options.links_per_device,
                   "Links per device (0: the simulator's NVLink mesh plus PCIe)")
      ->check(CLI::Range(0, 512))
      ->capture_default_str();
  c.app
      ->add_option("--interval", c.interval,
                   "How often each node reports, spread evenly over the fleet (0: as fast as "
                   "acks allow)")
      ->check(cli::kDurationOrZero)
      ->capture_default_str();
  c.app->add_option("--duration", c.duration, "How long to send")
      ->check(cli::kDuration)
      ->capture_default_str();
  c.app
      ->add_option("--max-in-flight", c.options.max_in_flight,
                   "Unacknowledged reports per stream; at an interval, a report due beyond it "
                   "is skipped")
      ->check(CLI::Range(size_t{1}, size_t{4096}))
      ->capture_default_str();
  c.app
      ->add_option("--channels", c.options.channels,
                   "TCP connections the streams share, round robin")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  c.app->add_option("--node.prefix", c.options.node_prefix, "Simulated node names' prefix")
      ->capture_default_str();
}

std::optional<int> RunLoadgenCommand(LoadgenCommand& c) {
  if (c.app == nullptr || !c.app->parsed()) return std::nullopt;
  c.options.interval = DurationOrZero(c.interval);
  c.options.duration = *ParseDuration(c.duration);
  const LoadgenResult result = RunLoadgen(c.options);
  std::fputs(FormatLoadgenResult(c.options, result).c_str(), stdout);
  std::fflush(stdout);
  return result.errors.empty() ? kExitOk : kExitFailure;
}

SubcommandRunner RegisterLoadgenCommand(CLI::App& app) {
  auto command = std::make_shared<LoadgenCommand>();
  AddLoadgenCommand(app, *command);
  return [command] { return RunLoadgenCommand(*command); };
}

}  // namespace accelmon
