#include "collectors/cdi_specs.h"

#include <spdlog/spdlog.h>
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
  if (!kind || !kind.IsScalar() || kind.Scalar().find('/') == std::string::npos) {
    throw std::runtime_error("not a CDI spec: no \"kind\" of the form vendor/class");
  }
  std::vector<CdiDevice> devices;
  const YAML::Node list = root["devices"];
  if (!list) return devices;
  if (!list.IsSequence()) throw std::runtime_error("\"devices\" is not a list");
  for (const YAML::Node& d : list) {
    const YAML::Node name = d["name"];
    if (!name || !name.IsScalar() || name.Scalar().empty()) continue;
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

void CdiSpecs::Refresh() {
  std::map<fs::path, File> next;
  for (size_t rank = 0; rank < dirs_.size(); ++rank) {
    std::error_code ec;
    fs::directory_iterator it(dirs_[rank], ec), end;
    for (; !ec && it != end; it.increment(ec)) {
      const fs::path& path = it->path();
      const std::string ext = path.extension().string();
      if (ext != ".json" && ext != ".yaml" && ext != ".yml") continue;
      std::error_code stat_ec;
      const auto mtime = fs::last_write_time(path, stat_ec);
      const uintmax_t size = stat_ec ? 0 : fs::file_size(path, stat_ec);
      if (stat_ec) continue;  // removed between listing and stat
      if (auto old = files_.find(path);
          old != files_.end() && old->second.mtime == mtime && old->second.size == size) {
        next.emplace(path, std::move(old->second));
        continue;
      }
      File file;
      file.mtime = mtime;
      file.size = size;
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
  files_ = std::move(next);
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
}

const CdiDevice* CdiSpecs::Find(std::string_view qualified_name) const {
  const auto it = by_name_.find(qualified_name);
  return it == by_name_.end() ? nullptr : it->second;
}

}  // namespace accelmon::collectors
