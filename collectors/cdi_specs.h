// Container Device Interface (CDI) spec files: what the container runtime injects for a fully
// qualified CDI device name ("k8s.gpu.nvidia.com/claim=<claim uid>-gpu-0"). DRA drivers write
// one spec per prepared claim under /var/run/cdi (static specs live under /etc/cdi); the kubelet
// reports the CDI names of each claim's devices, and these files say which host device nodes and
// variables each name stands for (collectors/dra_devices.h turns that into one of our devices).
// Format: github.com/cncf-tags/container-device-interface SPEC.md, JSON or YAML.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace accelmon::collectors {

inline constexpr const char* kDefaultCdiSpecDirs = "/etc/cdi,/var/run/cdi";

// One device of a spec, with only its own edits (the spec-wide ones are common to every device
// of the spec: /dev/nvidiactl, driver libraries).
struct CdiDevice {
  std::string qualified_name;  // "vendor/class=name"
  std::filesystem::path spec;  // the file that defines it
  // The host paths of its device nodes (hostPath where the spec sets one, else path).
  std::vector<std::string> device_nodes;
  // Its environment variables' values and its annotations' values, which some drivers use to
  // name the device (a uuid, a PCI address).
  std::vector<std::string> values;
};

// "vendor/class=name" split at the '='; nullopt when the name is not fully qualified.
std::optional<std::pair<std::string_view, std::string_view>> SplitCdiName(std::string_view name);

// Parses one spec file's text; throws std::runtime_error with the reason when it is not a CDI
// spec (unparsable, no "kind", a kind that is not "vendor/class") or names a device in a way
// the CDI library refuses (letters, digits and "_-.:", a letter or digit at both ends).
std::vector<CdiDevice> ParseCdiSpec(std::string_view text, const std::filesystem::path& path);

// The specs of a set of directories, re-read when they change. Not thread-safe: the kubelet
// collector refreshes and reads it on its tick.
class CdiSpecs {
 public:
  explicit CdiSpecs(std::vector<std::filesystem::path> dirs);

  // Re-reads spec files (*.json, *.yaml, *.yml) that are new or whose size or mtime changed and
  // forgets removed ones; true when anything changed. A directory is listed again only when its
  // own mtime changed (a file added, removed or renamed into place, as the CDI library writes
  // them); otherwise its known files are stat'ed. An unreadable or malformed file is logged once
  // (until it changes) and skipped; a missing directory is simply empty.
  bool Refresh();
  // The device of that fully qualified name, or nullptr. When two files define it, the one in the
  // later directory wins, as the CDI cache gives /var/run/cdi priority over /etc/cdi.
  const CdiDevice* Find(std::string_view qualified_name) const;
  const std::vector<std::filesystem::path>& dirs() const { return dirs_; }

 private:
  struct File {
    int64_t mtime_ns = 0;
    int64_t size = 0;
    size_t dir_rank = 0;
    std::vector<CdiDevice> devices;
  };
  std::vector<std::filesystem::path> dirs_;
  std::map<std::filesystem::path, File> files_;
  std::vector<std::optional<int64_t>> dir_mtimes_;  // per directory, as last listed (absent: none)
  std::map<std::string, const CdiDevice*, std::less<>> by_name_;
};

}  // namespace accelmon::collectors
