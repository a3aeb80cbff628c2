#include "daemon/standalone/standalone_command.h"

#include <cstdio>
#include <memory>
#include <stdexcept>

#include "daemon/agent/agent_command.h"
#include "daemon/common/exit_codes.h"
#include "daemon/common/flags.h"
#include "daemon/common/reload.h"
#include "daemon/common/shutdown_signals.h"
#include "daemon/exporter/config_reload.h"
#include "daemon/exporter/exporter_flags.h"

namespace accelmon {
namespace {

struct StandaloneCommand {
  CollectorFlags collectors;
  ExporterFlags exporter;
};

int RunStandalone(StandaloneCommand& c, const StandaloneCommand& defaults) {
  auto options = LoadExporterOptions(c.exporter);
  if (!options) return kExitUsage;
  std::shared_ptr<const collectors::Scenario> scenario;
  if (!LoadSimScenario(c.collectors, scenario)) return kExitUsage;
  const bool https = options->web_config.tls;
  const sigset_t signals = BlockShutdownSignals();
  Push push;  // outlives the agent and its collectors
  if (!StartPush(c.collectors, push)) return kExitUsage;
  Exporter exporter(std::move(*options));
  if (!exporter.StartOrLog()) return kExitFailure;
  Uplink uplink(
      UplinkOptions{.exporter_address = "127.0.0.1:" + std::to_string(exporter.grpc_port())});
  Agent agent(ToAgentOptions(c.collectors),
              MakeCollectors(c.collectors, push.store.get(), std::move(scenario)), uplink);
  uplink.Start();
  agent.Start();

  // The port actually bound, so that ":0" prints something usable.
  auto web = *ParseHostPort(c.exporter.web_listen, nullptr);
  if (web.host.empty() || web.host == "0.0.0.0") web.host = "localhost";
  web.port = static_cast<uint16_t>(exporter.web_port());
  const char* scheme = https ? "https" : "http";
  std::printf(
      "accelmon standalone: metrics at %s://%s/metrics, status page at %s://%s/ (Ctrl-C "
      "to stop)\n",
      scheme, web.ToString().c_str(), scheme, web.ToString().c_str());
  auto query = *ParseHostPort(c.exporter.grpc_listen, nullptr);
  if (query.host.empty() || query.host == "0.0.0.0") query.host = "127.0.0.1";
  query.port = static_cast<uint16_t>(exporter.grpc_port());
  std::printf("accelmon standalone: in a terminal: accelmon top --exporter.address %s\n",
              query.ToString().c_str());
  std::fflush(stdout);
  // SIGHUP (and POST /-/reload with --web.enable-lifecycle): the exporter's live settings; a
  // collector flag that changed is refused, as any other that needs a restart.
  std::unique_ptr<ExporterReloader> reloader;
  if (const CommandLine* command_line = GetCommandLine()) {
    reloader = StartReloads(
        std::make_unique<TypedFlagsReparse<StandaloneCommand>>(*command_line, c, defaults),
        c.exporter, exporter);
  }
  WaitForShutdownSignal(signals, [&] {
    if (reloader) reloader->Reload("SIGHUP");
  });
  if (reloader) reloader->Close();
  StopAgent(agent, uplink);
  exporter.Stop();
  return kExitOk;
}

}  // namespace

SubcommandRunner RegisterStandaloneCommand(CLI::App& app) {
  auto c = std::make_shared<StandaloneCommand>();
  c->collectors.node_name = HostName();
  // In one process the ingest port only needs to be reachable from this host.
  c->exporter.grpc_listen = "127.0.0.1:0";
  CLI::App* cmd = app.add_subcommand(
      "standalone", "Agent and exporter in one process on this host: the first thing to run");
  AddCollectorFlags(*cmd, c->collectors);
  AddExporterFlags(*cmd, c->exporter);
  AddRecordFlags(*cmd, c->exporter);
  auto defaults = std::make_shared<const StandaloneCommand>(*c);  // what a reload resets to
  return [c, defaults, cmd]() -> std::optional<int> {
    if (!cmd->parsed()) return std::nullopt;
    NotePushSocketSet(*cmd, c->collectors);
    return RunStandalone(*c, *defaults);
  };
}

}  // namespace accelmon
