// Files and directories that flags name, checked before anything starts, so that a path that is
// not what the flag needs stops start-up with the flag, the path and the reason (exit 2; see
// docs/development.md "Errors and exit codes") instead of an abort or a silent default.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace accelmon {

// Why `path`, named by `flag` (may be empty), is not a configuration file to read: "FLAG PATH: is a
// directory, not a file", "… is empty", "… cannot be read: REASON", "… does not exist". nullopt
// when it is a file with something in it (a file of comments only is fine: it sets nothing on
// purpose), or a pipe or device, which only its parser reads.
std::optional<std::string> CheckConfigFilePath(std::string_view flag, const std::string& path);

// Creates `path` and its parents when missing. Why it cannot be a directory to write in: "FLAG
// PATH: cannot create it: REASON", "… is not a directory", "… cannot write in it: REASON";
// nullopt when it can.
std::optional<std::string> PrepareWritableDirectory(std::string_view flag, const std::string& path);

}  // namespace accelmon
