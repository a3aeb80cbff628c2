#include "daemon/exporter/config_reload.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <chrono>

namespace accelmon {

const std::set<std::string, std::less<>> kLiveExporterFlags = {
    "log.level",
    "node.expire-after",
    "grpc.max-devices-per-node",
    "grpc.max-links-per-node",
    "grpc.max-clock-skew",
    "grpc.max-reports-per-second",
    "web.config.file",
    "diagnostics.config",
};

ExporterReloader::ExporterReloader(std::unique_ptr<FlagsReparse> reparse,
                                   const ExporterFlags& flags,
                                   std::map<std::string, std::string> given, Exporter& exporter,
                                   ExporterStats& stats)
    : reparse_(std::move(reparse)),
      flags_(flags),
      given_(std::move(given)),
      exporter_(exporter),
      stats_(stats) {}

std::string ExporterReloader::Refuse(std::string_view trigger, std::string reason) {
  stats_.config_reload_successful = false;
  spdlog::error("reload ({}) failed, the configuration stays as it was: {}", trigger, reason);
  return reason;
}

std::string ExporterReloader::Reload(std::string_view trigger) {
  std::lock_guard lock(mu_);
  if (closed_) return "the exporter is stopping";
  const CommandLine* command_line = GetCommandLine();
  if (command_line == nullptr) return Refuse(trigger, "no command line to parse again");

  if (auto error = reparse_->Parse()) return Refuse(trigger, *error);
  std::map<std::string, std::string> given = GivenFlags(*command_line->app);
  std::vector<std::string> changed = ChangedFlags(given_, given);
  std::vector<std::string> need_restart;
  for (const std::string& name : changed) {
    if (kLiveExporterFlags.count(name) == 0) need_restart.push_back(name);
  }
  if (!need_restart.empty()) {
    reparse_->Undo();
    return Refuse(trigger,
                  fmt::format("{} changed, which needs a restart (live: {})",
                              fmt::join(need_restart, ", "), fmt::join(kLiveExporterFlags, ", ")));
  }
  // The files it names are read again even when their names did not change.
  std::string error;
  std::optional<ExporterOptions> options = LoadExporterOptions(flags_, &error);
  if (!options) {
    reparse_->Undo();
    return Refuse(trigger, error);
  }
  if (auto refused = exporter_.Reconfigure(*options)) {
    reparse_->Undo();
    return Refuse(trigger, *refused);
  }
  spdlog::set_level(spdlog::level::from_str(*command_line->log_level));
  given_ = std::move(given);
  stats_.config_reload_successful = true;
  stats_.config_reload_success_seconds =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  spdlog::info("reload ({}): configuration applied ({}); diagnostics: {}", trigger,
               changed.empty() ? std::string("no flag changed, the files they name read again")
                               : fmt::format("changed: {}", fmt::join(changed, ", ")),
               exporter_.diagnostics() != nullptr ? exporter_.diagnostics()->Describe() : "off");
  return {};
}

void ExporterReloader::Close() {
  std::lock_guard lock(mu_);
  closed_ = true;
}

std::unique_ptr<ExporterReloader> StartReloads(std::unique_ptr<FlagsReparse> reparse,
                                               const ExporterFlags& flags, Exporter& exporter) {
  const CommandLine* command_line = GetCommandLine();
  if (command_line == nullptr) return nullptr;
  auto reloader = std::make_unique<ExporterReloader>(
      std::move(reparse), flags, GivenFlags(*command_line->app), exporter, exporter.stats());
  if (flags.web_enable_lifecycle) {
    exporter.set_reload([r = reloader.get()] { return r->Reload("POST /-/reload"); });
  }
  return reloader;
}

}  // namespace accelmon
