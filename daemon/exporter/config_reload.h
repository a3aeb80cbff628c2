// Reloading a running exporter's configuration (SIGHUP; POST /-/reload with
// --web.enable-lifecycle): the command line is parsed again, so the config file and the files it
// names (diagnostics thresholds, web config) are read again. What may change live changes; a
// change to anything else, or a file with an error, is refused and the old configuration stays
// whole. accelmon_config_last_reload_successful and _success_timestamp_seconds say how the last
// one went (docs/deployment.md "Reload").
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>

#include "daemon/common/reload.h"
#include "daemon/exporter/exporter.h"
#include "daemon/exporter/exporter_flags.h"

namespace accelmon {

// The flags a reload changes live; every other flag needs a restart.
extern const std::set<std::string, std::less<>> kLiveExporterFlags;

class ExporterReloader {
 public:
  // `reparse` parses the command line again into the variables behind `flags` (the exporter's
  // part of them), `given` what the running configuration was parsed from (GivenFlags).
  ExporterReloader(std::unique_ptr<FlagsReparse> reparse, const ExporterFlags& flags,
                   std::map<std::string, std::string> given, Exporter& exporter,
                   ExporterStats& stats);

  // Re-reads and applies, or refuses; logs which and why. Returns why it was refused, empty when
  // applied. `trigger` says what asked ("SIGHUP"). One at a time; after Close, refused.
  std::string Reload(std::string_view trigger);

  // Waits for a reload in progress; later ones are refused (the exporter is stopping).
  void Close();

 private:
  std::string Refuse(std::string_view trigger, std::string reason);

  std::mutex mu_;
  std::unique_ptr<FlagsReparse> reparse_;
  const ExporterFlags& flags_;
  std::map<std::string, std::string> given_;
  Exporter& exporter_;
  ExporterStats& stats_;
  bool closed_ = false;
};

// The reloader of a started exporter whose flags `reparse` parses again: SIGHUP calls its
// Reload("SIGHUP") (from WaitForShutdownSignal), and with --web.enable-lifecycle so does
// POST /-/reload. Null when main() set no command line. Close it before stopping the exporter.
std::unique_ptr<ExporterReloader> StartReloads(std::unique_ptr<FlagsReparse> reparse,
                                               const ExporterFlags& flags, Exporter& exporter);

}  // namespace accelmon
