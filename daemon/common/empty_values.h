// `--name=` with nothing after the `=`. CLI11 takes the next argument as the value then
// (`--push.socket= --bogus-flag` made a socket named "--bogus-flag"), so main() rewrites it to an
// explicit empty value first: each option accepts it where empty means off (a socket, a
// directory, a file that is optional) and refuses it, naming itself, everywhere else (exit 2).
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>
#include <vector>

namespace accelmon {

// The arguments after argv[0] with every `--name=` of an option that takes a value split into
// "--name" and "". A flag written `--name=` is an error, returned in `error` (nothing returned).
std::optional<std::vector<std::string>> ExplicitEmptyValues(const CLI::App& app, int argc,
                                                            const char* const* argv,
                                                            std::string* error);

// The check for options whose empty value would mean nothing (a node name, a library path):
// "needs a value".
extern const CLI::Validator kNotEmpty;

}  // namespace accelmon
