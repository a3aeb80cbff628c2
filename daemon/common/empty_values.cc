#include "daemon/common/empty_values.h"

namespace accelmon {
namespace {

// The option `--name` of `app` or any of its subcommands (options of the same name agree on
// whether they take a value).
const CLI::Option* FindOption(const CLI::App& app, const std::string& name) {
  if (const CLI::Option* op = app.get_option_no_throw(name)) return op;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    if (const CLI::Option* op = FindOption(*sub, name)) return op;
  }
  return nullptr;
}

}  // namespace

const CLI::Validator kNotEmpty(
    [](std::string& value) { return value.empty() ? std::string("needs a value") : std::string(); },
    "NOT EMPTY");

std::optional<std::vector<std::string>> ExplicitEmptyValues(const CLI::App& app, int argc,
                                                            const char* const* argv,
                                                            std::string* error) {
  std::vector<std::string> out;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") {  // the rest are values
      for (; i < argc; ++i) out.emplace_back(argv[i]);
      break;
    }
    if (arg.size() < 4 || !arg.starts_with("--") || arg.back() != '=' ||
        arg.find('=') != arg.size() - 1) {
      out.push_back(arg);
      continue;
    }
    const std::string name = arg.substr(0, arg.size() - 1);
    const CLI::Option* op = FindOption(app, name);
    if (op == nullptr) {
      out.push_back(arg);  // CLI11 names it as unknown
      continue;
    }
    if (op->get_expected_min() == 0) {
      *error = name + " takes no value (write " + name + " alone)";
      return std::nullopt;
    }
    out.push_back(name);
    out.emplace_back();
  }
  return out;
}

}  // namespace accelmon
