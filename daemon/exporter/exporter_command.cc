#include "daemon/exporter/exporter_command.h"

#include <memory>

#include "daemon/common/exit_codes.h"
#include "daemon/common/sd_notify.h"
#include "daemon/common/shutdown_signals.h"
#include "daemon/common/tls_flags.h"
#include "daemon/exporter/config_reload.h"

namespace accelmon {

namespace {

int RunExporter(ExporterFlags& flags, const ExporterFlags& defaults) {
  auto options = LoadExporterOptions(flags);
  if (!options) return kExitUsage;
  const sigset_t signals = BlockShutdownSignals();
  Exporter exporter(std::move(*options));
  if (!exporter.StartOrLog()) return kExitFailure;
  // Both ports listen (and the recording is open): systemd may start what depends on us.
  SdNotify("READY=1\nSTATUS=serving /metrics and agent streams");
  std::unique_ptr<ExporterReloader> reloader;
  if (const CommandLine* command_line = GetCommandLine()) {
    reloader = StartReloads(
        std::make_unique<TypedFlagsReparse<ExporterFlags>>(*command_line, flags, defaults), flags,
        exporter);
  }
  WaitForShutdownSignal(signals, [&] {
    if (!reloader) return;
    SdNotify("RELOADING=1");
    reloader->Reload("SIGHUP");
    SdNotify("READY=1");
  });
  SdNotify("STOPPING=1");
  if (reloader) reloader->Close();
  exporter.Stop();
  return kExitOk;
}

}  // namespace

SubcommandRunner RegisterExporterCommand(CLI::App& app) {
  auto flags = std::make_shared<ExporterFlags>();
  CLI::App* cmd =
      app.add_subcommand("exporter", "Receive agents' streams and serve Prometheus /metrics");
  AddExporterFlags(*cmd, *flags);
  AddRecordFlags(*cmd, *flags);
  AddGrpcServerTlsFlags(*cmd, flags->grpc_tls);
  auto defaults = std::make_shared<const ExporterFlags>(*flags);  // what a reload resets to
  return [flags, defaults, cmd]() -> std::optional<int> {
    if (!cmd->parsed()) return std::nullopt;
    return RunExporter(*flags, *defaults);
  };
}

}  // namespace accelmon
