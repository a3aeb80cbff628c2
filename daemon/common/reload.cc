#include "daemon/common/reload.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <set>

namespace accelmon {
namespace {

CommandLine g_command_line;
bool g_command_line_set = false;

void AddGiven(const CLI::App& app, std::map<std::string, std::string>& out) {
  for (const CLI::Option* op : app.get_options()) {
    if (op->count() == 0 || op->get_lnames().empty()) continue;
    std::string joined;
    for (const std::string& value : op->results()) joined += (joined.empty() ? "" : ",") + value;
    out[op->get_lnames().front()] = joined;
  }
}

}  // namespace

void SetCommandLine(CommandLine command_line) {
  g_command_line = std::move(command_line);
  g_command_line_set = true;
}

const CommandLine* GetCommandLine() { return g_command_line_set ? &g_command_line : nullptr; }

std::map<std::string, std::string> GivenFlags(const CLI::App& app) {
  std::map<std::string, std::string> out;
  AddGiven(app, out);
  for (const CLI::App* sub : app.get_subcommands()) AddGiven(*sub, out);
  out.erase("config.file");  // from the command line: the same file every time
  return out;
}

std::vector<std::string> ChangedFlags(const std::map<std::string, std::string>& before,
                                      const std::map<std::string, std::string>& after) {
  std::set<std::string> names;
  for (const auto& [name, value] : before) names.insert(name);
  for (const auto& [name, value] : after) names.insert(name);
  std::vector<std::string> changed;
  for (const std::string& name : names) {
    const auto a = before.find(name);
    const auto b = after.find(name);
    if (a == before.end() || b == after.end() || a->second != b->second) changed.push_back(name);
  }
  return changed;
}

std::string ReloadLogLevelOnly(FlagsReparse& reparse, std::map<std::string, std::string>& given,
                               std::string_view trigger) {
  const CommandLine* command_line = GetCommandLine();
  std::string error;
  if (command_line == nullptr) {
    error = "no command line to parse again";
  } else if (auto parse_error = reparse.Parse()) {
    error = *parse_error;
  }
  if (!error.empty()) {
    spdlog::error("reload ({}) failed, the configuration stays as it was: {}", trigger, error);
    return error;
  }
  std::map<std::string, std::string> now = GivenFlags(*command_line->app);
  std::vector<std::string> others = ChangedFlags(given, now);
  std::erase(others, "log.level");
  const std::string level = *command_line->log_level;
  // The role keeps running on what it started with: only the level is taken from this parse.
  reparse.Undo();
  if (!others.empty()) {
    error = fmt::format("{} changed, which needs a restart (only log.level changes live here)",
                        fmt::join(others, ", "));
    spdlog::error("reload ({}) failed, the configuration stays as it was: {}", trigger, error);
    return error;
  }
  *command_line->log_level = level;
  spdlog::set_level(spdlog::level::from_str(level));
  given = std::move(now);
  spdlog::info("reload ({}): log level {}", trigger, level);
  return {};
}

}  // namespace accelmon
