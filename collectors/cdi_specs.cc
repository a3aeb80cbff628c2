#include "collectors/cdi_specs.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <yaml-cpp/yaml.h>

#include <cstring>
#include <stdexcept>
#include <system_error>

#include "collectors/file_reader.h"

namespace accelmon::collectors {
namespace fs = std::filesystem;

std::optional<std::pair<std::string_view, std::string_view>> SplitCdiName(std::string_view name) {
  const size_t eq = name.find('=');
  if (eq == std::string_view::npos || eq == 0 || eq + 1 == name.size()) return std::nullopt;
  const std::string_view kind = name.substr(0, eq);
  if (kind.find('/') == std::string_view::npos) return std::nullopt;
  return std::pair{kind, name.substr(eq + 1)};
}

namespace {

bool IsAsciiLetter(char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'); }
bool IsAsciiAlnum(char c) { return IsAsciiLetter(c) || (c >= '0' && c <= '9'); }

// The CDI library's rule for a vendor or class (a kind's two halves) and for a device name: a
// letter (vendor, class) or letter/digit (name) first, a letter or digit last, and in between
// letters, digits and `extra`. A runtime refuses a spec that breaks it, and it keeps '/' and '='
// out, so "kind=name" always splits back at the first '='. Empty when valid, else the reason.
std::string CheckCdiPart(std::string_view what, std::string_view part, bool letter_first,
                         std::string_view extra) {
  const std::string quoted = "\"" + std::string(part) + "\"";
  if (part.empty()) return "empty " + std::string(what);
  if (letter_first ? !IsAsciiLetter(part.front()) : !IsAsciiAlnum(part.front())) {
    return std::string(what) + " " + quoted + " should start with a letter" +
           (letter_first ? "" : " or digit");
  }
  if (!IsAsciiAlnum(part.back())) {
    return std::string(what) + " " + quoted + " should end with a letter or digit";
  }
  for (const char c : part) {
    if (!IsAsciiAlnum(c) && extra.find(c) == std::string_view::npos) {
      return std::string(what) + " " + quoted + " holds a character outside [A-Za-z0-9" +
             std::string(extra) + "]";
    }
  }
  return {};
}

// The reason a spec's "kind" is not "vendor/class", or empty.
std::string CheckCdiKind(std::string_view kind) {
  const size_t slash = kind.find('/');
  if (slash == std::string_view::npos) return "no \"kind\" of the form vendor/class";
  if (std::string r = CheckCdiPart("vendor", kind.substr(0, slash), true, "_-."); !r.empty()) {
    return "kind: " + r;
  }
  if (std::string r = CheckCdiPart("class", kind.substr(slash + 1), true, "_-."); !r.empty()) {
    return "kind: " + r;
  }
  return {};
}

// The values of a device's containerEdits.env ("KEY=VALUE": the value) and of its annotations.
void CollectValues(const YAML::Node& device, const YAML::Node& edits, CdiDevice& out) {
  if (const YAML::Node env = edits["env"]; env && env.IsSequence()) {
    for (const YAML::Node& e : env) {
      if (!e.IsScalar()) continue;
      const std::string& s = e.Scalar();
      const size_t eq = s.find('=');
      out.values.push_back(eq == std::string::npos ? s : s.substr(eq + 1));
    }
  }
  if (const YAML::Node annotations = device["annotations"]; annotations && annotations.IsMap()) {
    for (const auto& kv : annotations) {
      if (kv.second.IsScalar()) out.values.push_back(kv.second.Scalar());
    }
  }
}

}  // namespace

std::vector<CdiDevice> ParseCdiSpec(std::string_view text, const fs::path& path) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    throw std::runtime_error("not YAML or JSON: " + std::string(e.what()));
  }
  if (!root.IsMap()) throw std::runtime_error("not a CDI spec: the top level is not a map");
  const YAML::Node kind = root["kind"];
  if (!kind || !kind.IsScalar()) {
    throw std::runtime_error("not a CDI spec: no \"kind\" of the form vendor/class");
  }
  if (const std::string reason = CheckCdiKind(kind.Scalar()); !reason.empty()) {
    throw std::runtime_error("not a CDI spec: " + reason);
  }
  std::vector<CdiDevice> devices;
  const YAML::Node list = root["devices"];
  if (!list) return devices;
  if (!list.IsSequence()) throw std::runtime_error("\"devices\" is not a list");
  for (const YAML::Node& d : list) {
    const YAML::Node name = d["name"];
    if (!name || !name.IsScalar() || name.Scalar().empty()) continue;
    // As the CDI cache does, one malformed name refuses the whole spec: no runtime injects it.
    if (const std::string reason = CheckCdiPart("device name", name.Scalar(), false, "_-.:");
        !reason.empty()) {
      throw std::runtime_error("not a valid CDI spec: " + reason);
    }
    CdiDevice device;
    device.qualified_name = kind.Scalar() + "=" + name.Scalar();
    device.spec = path;
    const YAML::Node edits = d["containerEdits"];
    if (edits && edits.IsMap()) {
      if (const YAML::Node nodes = edits["deviceNodes"]; nodes && nodes.IsSequence()) {
        for (const YAML::Node& n : nodes) {
          if (!n.IsMap()) continue;
          const YAML::Node host = n["hostPath"];
          const YAML::Node p = host && host.IsScalar() ? host : n["path"];
          if (p && p.IsScalar()) device.device_nodes.push_back(p.Scalar());
        }
      }
      CollectValues(d, edits, device);
    } else {
      CollectValues(d, YAML::Node(), device);
    }
    devices.push_back(std::move(device));
  }
  return devices;
}

CdiSpecs::CdiSpecs(std::vector<fs::path> dirs) : dirs_(std::move(dirs)) {}

namespace {

// A path's mtime (ns) and size with one stat(2); nullopt when it is not there.
std::optional<std::pair<int64_t, int64_t>> Stat(const fs::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  return std::pair{static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec,
                   static_cast<int64_t>(st.st_size)};
}

bool IsSpecFile(const fs::path& path) {
  const std::string ext = path.extension().string();
  return ext == ".json" || ext == ".yaml" || ext == ".yml";
}

}  // namespace

bool CdiSpecs::Refresh() {
  dir_mtimes_.resize(dirs_.size());
  bool changed = false;
  std::map<fs::path, File> next;
  for (size_t rank = 0; rank < dirs_.size(); ++rank) {
    const auto dir = Stat(dirs_[rank]);
    const std::optional<int64_t> dir_mtime =
        dir ? std::optional<int64_t>(dir->first) : std::nullopt;
    std::vector<fs::path> paths;
    if (dir_mtime == dir_mtimes_[rank]) {
      for (const auto& [path, file] : files_) {
        if (file.dir_rank == rank) paths.push_back(path);
      }
    } else {
      changed = true;
      std::error_code ec;
      fs::directory_iterator it(dirs_[rank], ec), end;
      for (; !ec && it != end; it.increment(ec)) {
        if (IsSpecFile(it->path())) paths.push_back(it->path());
      }
      dir_mtimes_[rank] = dir_mtime;
    }
    for (const fs::path& path : paths) {
      const auto st = Stat(path);
      if (!st) {  // removed since it was listed
        changed = true;
        continue;
      }
      if (auto old = files_.find(path); old != files_.end() && old->second.mtime_ns == st->first &&
                                        old->second.size == st->second) {
        next.emplace(path, std::move(old->second));
        continue;
      }
      changed = true;
      File file;
      file.mtime_ns = st->first;
      file.size = st->second;
      file.dir_rank = rank;
      std::string text;
      try {
        if (const int error = TryReadTextFile(path, text); error != 0) {
          throw std::runtime_error(std::string("cannot read it: ") + std::strerror(error));
        }
        file.devices = ParseCdiSpec(text, path);
      } catch (const std::exception& e) {
        // Said once per version of the file: the entry is kept (empty) until it changes.
        spdlog::warn("kubelet: CDI spec {} skipped: {}", path.string(), e.what());
      }
      next.emplace(path, std::move(file));
    }
  }
  if (next.size() != files_.size()) changed = true;
  files_ = std::move(next);
  if (!changed) return false;
  by_name_.clear();
  std::map<std::string_view, size_t> rank_of;
  for (const auto& [path, file] : files_) {
    for (const CdiDevice& d : file.devices) {
      auto [it, inserted] = rank_of.emplace(d.qualified_name, file.dir_rank);
      if (!inserted && it->second > file.dir_rank) continue;
      it->second = file.dir_rank;
      by_name_[d.qualified_name] = &d;
    }
  }
  return true;
}

const CdiDevice* CdiSpecs::Find(std::string_view qualified_name) const {
  const auto it = by_name_.find(qualified_name);
  return it == by_name_.end() ? nullptr : it->second;
}

}  // namespace accelmon::collectors
