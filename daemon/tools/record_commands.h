// The offline tools over recordings, on the command line: `accelmon record inspect|verify|
// export|import` and `accelmon replay`. main() adds them and runs the one that was parsed.
//
// Exit codes, as the Prometheus tools have them: 0 all well; 1 something could not be read,
// written or delivered (everything else was, and stderr says what); 2 usage errors and inputs
// that are not recordings.
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>
#include <vector>

#include "daemon/common/subcommand.h"
#include "daemon/common/tls.h"

namespace accelmon {

// Adds it to `app` (main.cc's table of subcommands).
SubcommandRunner RegisterRecordingCommands(CLI::App& app);

// What the command line said; filled in by CLI11 while parsing.
struct RecordingCommands {
  CLI::App* inspect = nullptr;
  CLI::App* verify = nullptr;
  CLI::App* export_jsonl = nullptr;
  CLI::App* import_jsonl = nullptr;
  CLI::App* replay = nullptr;

  std::vector<std::string> inputs;  // recording directories, .seg or JSON Lines files
  bool jsonl = false;               // export --jsonl
  std::string output = "-";         // export -o
  std::string import_from;          // import --jsonl FILE|-
  std::string import_dir;
  std::string segment_size = "64MiB";
  std::string compression = "zstd";

  std::string exporter_address;
  std::string speed = "1";
  bool shift_to_now = false;
  GrpcClientTls tls{};
  std::string openmetrics_dir;
};

// Adds `record` (with inspect, verify, export, import) and `replay` to `app`. `commands` must
// outlive parsing and the run.
void AddRecordingCommands(CLI::App& app, RecordingCommands& commands);

// Runs the recording command that was parsed and returns its exit code; nothing when the command
// line named another subcommand.
std::optional<int> RunRecordingCommand(RecordingCommands& commands);

// The commands themselves, for tests and for main.
int RecordInspect(const std::string& input);
int RecordVerify(const std::string& input);
int RecordExportJsonl(const std::string& input, const std::string& output);
int RecordImportJsonl(const std::string& jsonl, const std::string& dir, uint64_t segment_bytes,
                      bool zstd);

}  // namespace accelmon
