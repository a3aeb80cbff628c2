// Reloading a running process's configuration (SIGHUP; on the exporter also POST /-/reload):
// the command line it started with is parsed again by the same CLI, so the --config.file is
// read again and flags given on the command line still win over it. What changed is compared
// flag by flag, by the names the file uses (docs/deployment.md "Reload").
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace accelmon {

// The parsed command line, as main() hands it to the roles that reload.
struct CommandLine {
  CLI::App* app = nullptr;  // the root, parsed once
  // Parses the process's arguments again: every bound flag variable that is given (on the
  // command line or in the file) is written again, the global --log.level reset first; the
  // caller resets its subcommand's own (FlagsReparse). Throws CLI::ParseError.
  std::function<void()> parse_again;
  std::string* log_level = nullptr;  // the global --log.level, as parsed
};

// Set by main() once the command line is parsed; null before (and in tests that build none).
void SetCommandLine(CommandLine command_line);
const CommandLine* GetCommandLine();

// Every flag given to `app` and its chosen subcommand, by the name without "--" ("log.level",
// "web.listen-address"), with its values as given ("a,b" for several).
std::map<std::string, std::string> GivenFlags(const CLI::App& app);

// The names whose values differ (given in one, not the other, or given other values).
std::vector<std::string> ChangedFlags(const std::map<std::string, std::string>& before,
                                      const std::map<std::string, std::string>& after);

// One reload's parse of the command line into a subcommand's flag variables, which can be
// undone: a reload that is refused keeps the configuration it had, whole.
class FlagsReparse {
 public:
  virtual ~FlagsReparse() = default;
  // Parses again into the variables, reset to their values before the first parse (so a key
  // removed from the file returns to its default). On a parse error they stay as they were and
  // the error ("FILE:LINE: what is wrong", a line each) is returned.
  virtual std::optional<std::string> Parse() = 0;
  // Back to the values before Parse (and the log level with them).
  virtual void Undo() = 0;
};

template <typename Flags>
class TypedFlagsReparse final : public FlagsReparse {
 public:
  // `defaults`: the variables as the subcommand's registration set them, before parsing.
  TypedFlagsReparse(const CommandLine& command_line, Flags& flags, Flags defaults)
      : command_line_(command_line), flags_(flags), defaults_(std::move(defaults)) {}

  std::optional<std::string> Parse() override {
    before_ = flags_;
    level_before_ = *command_line_.log_level;
    flags_ = defaults_;
    try {
      command_line_.parse_again();
    } catch (const CLI::ParseError& e) {
      Undo();
      return std::string(e.what());
    }
    return std::nullopt;
  }
  void Undo() override {
    flags_ = before_;
    *command_line_.log_level = level_before_;
  }

 private:
  const CommandLine command_line_;
  Flags& flags_;
  const Flags defaults_;
  Flags before_{};
  std::string level_before_;
};

// The reload of a role that changes only its log level live (the agent, whose collectors and
// streams are set up once): parses again and applies --log.level; when any other flag changed,
// refuses whole and logs which. `given`: the flags the running configuration was parsed from,
// updated when applied. Returns why it was refused, empty when applied.
std::string ReloadLogLevelOnly(FlagsReparse& reparse, std::map<std::string, std::string>& given,
                               std::string_view trigger);

}  // namespace accelmon
