#include "daemon/common/config_file.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <istream>
#include <sstream>

#include "daemon/common/config_path.h"

namespace accelmon {

namespace {

// Flags whose file value would not mean what their default means: the node name defaults to the
// host's name (the file would pin one host's name), and a --push.socket that is set, from the
// command line or the file, stops the agent when it cannot be served.
constexpr const char* kNotInDefaults[] = {"node.name", "push.socket"};

// Flags naming files read at start-up that `check config` reads too.
constexpr const char* kReferencedFiles[] = {"diagnostics.config", "web.config.file"};

size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// " (did you mean NAME?)" for the closest of `names` when it is close enough.
std::string Suggest(const std::string& key, const std::vector<std::string>& names) {
  std::string best;
  size_t best_distance = std::max<size_t>(3, key.size() / 4) + 1;
  for (const auto& name : names) {
    const size_t d = EditDistance(key, name);
    if (d < best_distance) {
      best = name;
      best_distance = d;
    }
  }
  return best.empty() ? "" : " (did you mean " + best + "?)";
}

bool IsHelpOrConfig(const CLI::Option* op) {
  const auto& names = op->get_lnames();
  return names.empty() || names.front() == "help" || names.front() == "help-all" ||
         names.front() == "config.file" || names.front() == "version";
}

// The configurable flags of `app`, by name without "--".
std::vector<std::string> FlagNames(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::Option* op : app.get_options()) {
    if (!IsHelpOrConfig(op)) names.push_back(op->get_lnames().front());
  }
  return names;
}

CLI::App* FindSubcommand(CLI::App& root, const std::string& name) {
  for (CLI::App* sub : root.get_subcommands([](CLI::App*) { return true; })) {
    if (sub->get_name() == name) return sub;
  }
  return nullptr;
}

std::string TypeOf(const CLI::Option& op) {
  const std::string full = op.get_type_name();
  return full.substr(0, full.find(':'));
}

bool IsNumber(const std::string& type, const std::string& text) {
  if (text.empty()) return false;
  char* end = nullptr;
  errno = 0;
  if (type == "INT") {
    (void)std::strtoll(text.c_str(), &end, 10);
  } else if (type == "UINT") {
    if (text.front() == '-') return false;
    (void)std::strtoull(text.c_str(), &end, 10);
  } else {
    (void)std::strtod(text.c_str(), &end);
  }
  return errno == 0 && end != nullptr && *end == '\0';
}

// Runs the flag's own checks (CLI11 validators) on one value; empty when it passes.
std::string Validate(CLI::Option& op, std::string value) {
  for (int i = 0;; ++i) {
    CLI::Validator* v = nullptr;
    try {
      v = op.get_validator(i);
    } catch (const CLI::OptionNotFound&) {
      return {};
    }
    if (!v->get_active()) continue;
    std::string error;
    try {
      error = (*v)(value);
    } catch (const CLI::ValidationError& e) {
      error = e.what();
    }
    if (!error.empty()) return error;
  }
}

class Reader {
 public:
  Reader(const std::string& file, ConfigFileContents& out) : file_(file), out_(out) {}

  void Error(const YAML::Node& at, const std::string& what) {
    out_.errors.push_back(fmt::format("{}:{}: {}", file_, at.Mark().line + 1, what));
  }

  // One value of flag `op` (key `name` of section `section`) into `inputs`; false after an error.
  bool Value(const YAML::Node& key, const YAML::Node& value, CLI::Option& op,
             const std::string& where, std::vector<std::string>& inputs) {
    if (!value.IsDefined() || value.IsNull()) {
      Error(key, where + ": no value (write \"\" for an empty string)");
      return false;
    }
    if (value.IsMap()) {
      Error(value, where + ": wants " + (op.get_expected_min() == 0 ? "true or false" : "a value") +
                       ", not a map");
      return false;
    }
    const bool many = op.get_expected_max() > 1 || op.get_items_expected_max() > 1;
    if (value.IsSequence()) {
      if (!many) {
        Error(value, where + ": wants one value, not a list");
        return false;
      }
      bool ok = true;
      for (const auto& item : value) ok = Scalar(item, op, where, inputs) && ok;
      return ok;
    }
    return Scalar(value, op, where, inputs);
  }

  bool Scalar(const YAML::Node& value, CLI::Option& op, const std::string& where,
              std::vector<std::string>& inputs) {
    if (!value.IsScalar()) {
      Error(value, where + ": wants a plain value");
      return false;
    }
    const std::string text = value.Scalar();
    const bool quoted = value.Tag() == "!";
    if (op.get_expected_min() == 0) {  // a flag: true or false
      bool b = false;
      if (quoted || !YAML::convert<bool>::decode(value, b)) {
        Error(value, fmt::format("{}: wants true or false, not \"{}\"", where, text));
        return false;
      }
      inputs.push_back(b ? "true" : "false");
      return true;
    }
    const std::string type = TypeOf(op);
    if (type == "INT" || type == "UINT" || type == "FLOAT") {
      if (quoted) {
        Error(value, fmt::format("{}: wants a number, not the string \"{}\"", where, text));
        return false;
      }
      if (!IsNumber(type, text)) {
        Error(value, fmt::format("{}: \"{}\" is not {}", where, text,
                                 type == "FLOAT" ? "a number" : "a whole number"));
        return false;
      }
    }
    if (auto error = Validate(op, text); !error.empty()) {
      Error(value, where + ": " + error);
      return false;
    }
    inputs.push_back(text);
    return true;
  }

 private:
  const std::string& file_;
  ConfigFileContents& out_;
};

}  // namespace

ConfigFileContents ReadConfigFile(CLI::App& root, const std::string& file, std::istream& in,
                                  const std::string& target) {
  ConfigFileContents out;
  Reader reader(file, out);
  YAML::Node doc;
  try {
    doc = YAML::Load(in);
  } catch (const YAML::Exception& e) {
    out.errors.push_back(fmt::format("{}:{}: {}", file, e.mark.line + 1, e.msg));
    return out;
  }
  if (!doc.IsDefined() || doc.IsNull()) return out;  // an empty file sets nothing
  if (!doc.IsMap()) {
    reader.Error(doc, "wants a map of sections (agent:, exporter:) and global flags");
    return out;
  }
  std::vector<std::string> top_names = FlagNames(root);
  for (const char* s : kConfigSections) top_names.push_back(s);

  for (const auto& entry : doc) {
    const YAML::Node& key = entry.first;
    const std::string name = key.IsScalar() ? key.Scalar() : "";
    const bool is_section = std::find(std::begin(kConfigSections), std::end(kConfigSections),
                                      name) != std::end(kConfigSections);
    if (!is_section) {
      CLI::Option* op = name.empty() ? nullptr : root.get_option_no_throw("--" + name);
      if (op == nullptr || IsHelpOrConfig(op)) {
        reader.Error(key, fmt::format("unknown key \"{}\": the top level has the sections agent "
                                      "and exporter and the global flags{}",
                                      name, Suggest(name, top_names)));
        continue;
      }
      std::vector<std::string> inputs;
      if (reader.Value(key, entry.second, *op, name, inputs) && !target.empty()) {
        out.items.push_back(CLI::ConfigItem{{}, name, inputs});
      }
      continue;
    }
    CLI::App* sub = FindSubcommand(root, name);
    if (sub == nullptr) continue;  // not built into this binary
    const YAML::Node& section = entry.second;
    if (section.IsNull()) continue;
    if (!section.IsMap()) {
      reader.Error(section, name + ": wants a map of flag names to values");
      continue;
    }
    // Where this section's values go: its own subcommand, or standalone's flags of that name.
    CLI::App* apply_to = nullptr;
    if (target == name) {
      apply_to = sub;
    } else if (target == "standalone") {
      apply_to = FindSubcommand(root, "standalone");
    }
    const std::vector<std::string> names = FlagNames(*sub);
    for (const auto& flag : section) {
      const YAML::Node& fkey = flag.first;
      const std::string fname = fkey.IsScalar() ? fkey.Scalar() : "";
      const std::string where = name + "." + fname;
      CLI::Option* op = fname.empty() ? nullptr : sub->get_option_no_throw("--" + fname);
      if (op == nullptr || IsHelpOrConfig(op)) {
        std::string hint = Suggest(fname, names);
        if (hint.empty() && flag.second.IsMap()) {
          hint = " (keys are flag names with their dots, e.g. web.listen-address, not nested)";
        }
        reader.Error(fkey, fmt::format("unknown key \"{}\" in section {}{}", fname, name, hint));
        continue;
      }
      std::vector<std::string> inputs;
      if (!reader.Value(fkey, flag.second, *op, where, inputs)) continue;
      for (const char* r : kReferencedFiles) {
        if (fname == r && !inputs.empty() && !inputs.front().empty()) {
          out.referenced.emplace_back(where, inputs.front());
        }
      }
      if (apply_to != nullptr) {
        CLI::Option* target_op = apply_to->get_option_no_throw("--" + fname);
        if (target_op != nullptr) {
          out.items.push_back(CLI::ConfigItem{{apply_to->get_name()}, fname, inputs});
        }
      }
    }
  }
  return out;
}

namespace {

class YamlConfig : public CLI::Config {
 public:
  explicit YamlConfig(CLI::App* root) : root_(root) {}

  std::string to_config(const CLI::App*, bool, bool, std::string) const override {
    return DefaultConfigFile(*root_);
  }

  std::vector<CLI::ConfigItem> from_config(std::istream& in) const override {
    const auto files = root_->get_config_ptr()->as<std::vector<std::string>>();
    if (files.size() != 1) throw CLI::ConfigError("--config.file: give one file");
    if (auto bad = CheckConfigFilePath("--config.file", files.front())) {
      throw CLI::ConfigError(*bad);
    }
    std::string target;
    for (const CLI::App* sub : root_->get_subcommands()) target = sub->get_name();
    if (target != "agent" && target != "exporter" && target != "standalone") {
      throw CLI::ConfigError("--config.file is read by agent, exporter and standalone, not " +
                             (target.empty() ? std::string("here") : target));
    }
    ConfigFileContents contents = ReadConfigFile(*root_, files.front(), in, target);
    if (!contents.errors.empty()) {
      std::string message;
      for (const auto& e : contents.errors) message += (message.empty() ? "" : "\n") + e;
      throw CLI::ConfigError(message);
    }
    return contents.items;
  }

 private:
  CLI::App* root_;
};

std::string Quoted(const std::string& text) {
  YAML::Emitter e;
  e << YAML::DoubleQuoted << text;
  return e.c_str();
}

void WriteFlag(std::ostringstream& out, const CLI::Option& op, const std::string& indent) {
  const std::string name = op.get_lnames().front();
  std::istringstream help(op.get_description());
  for (std::string line; std::getline(help, line);) out << indent << "# " << line << "\n";
  const std::string type = TypeOf(op);
  std::string value = op.get_default_str();
  // CLI11 shows a list option's default in brackets, "[localhost:9478]".
  if (value.size() >= 2 && value.front() == '[' && value.back() == ']') {
    value = value.substr(1, value.size() - 2);
  }
  const bool flag = op.get_expected_min() == 0;
  bool commented = std::find(std::begin(kNotInDefaults), std::end(kNotInDefaults), name) !=
                   std::end(kNotInDefaults);
  if (flag) {
    // A flag written in the file counts as given (and --no-* flags exclude others): off here.
    value = value == "true" ? "true" : "false";
    commented = true;
  } else if (type == "INT" || type == "UINT" || type == "FLOAT") {
    if (value.empty()) {
      commented = true;
      out << indent << "# (default: none)\n";
    }
  } else if (commented && !value.empty()) {
    // Not the value itself where it is computed ("hostname: node-1"): the same file everywhere.
    out << indent
        << "# (default: " << (value.rfind("hostname:", 0) == 0 ? "this host's name" : value)
        << ")\n";
    value.clear();
  } else {
    value = Quoted(value);
  }
  out << indent << (commented ? "# " : "") << name << ":" << (value.empty() ? "" : " " + value)
      << "\n";
}

}  // namespace

void AddConfigFileFlag(CLI::App& root) {
  root.config_formatter(std::make_shared<YamlConfig>(&root));
  root.set_config("--config.file", "",
                  "YAML file setting the flags of agent, exporter and standalone; flags on the "
                  "command line win (docs/deployment.md; `accelmon config defaults` prints one)");
}

std::optional<std::string> WhyConfigFileUnreadable(CLI::App& root) {
  const CLI::Option* option = root.get_config_ptr();
  if (option == nullptr || option->count() == 0) return std::nullopt;
  for (const std::string& file : option->results()) {
    if (auto why = CheckConfigFilePath("--config.file", file)) return why;
  }
  return std::nullopt;
}

std::string DefaultConfigFile(CLI::App& root) {
  std::ostringstream out;
  out << "# accelmon's configuration file (--config.file): what `accelmon config defaults` "
         "prints,\n"
         "# every flag with its help and default. Keys are the flag names without \"--\", "
         "dots kept;\n"
         "# flags given on the command line win over this file. `standalone` reads both "
         "sections\n"
         "# (each key it has a flag for). Check a file with `accelmon check config FILE`.\n"
         "# Relative paths are relative to the working directory, as on the command line.\n";
  for (const CLI::Option* op : root.get_options()) {
    if (IsHelpOrConfig(op)) continue;
    out << "\n";
    WriteFlag(out, *op, "");
  }
  for (const char* section : kConfigSections) {
    CLI::App* sub = FindSubcommand(root, section);
    if (sub == nullptr) continue;
    out << "\n" << section << ":\n";
    bool first = true;
    for (const CLI::Option* op : sub->get_options()) {
      if (IsHelpOrConfig(op)) continue;
      if (!first) out << "\n";
      first = false;
      WriteFlag(out, *op, "  ");
    }
  }
  return out.str();
}

}  // namespace accelmon
