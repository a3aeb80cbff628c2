// Kubernetes pod uids from node-local facts: the kubelet keeps each pod's container logs under
// <pod logs dir>/<namespace>_<pod name>_<pod uid>/ (pkg/kubelet/kuberuntime: the pod logs
// directory, `podLogsDirectory` in the kubelet's configuration, /var/log/pods by default).
// Namespaces and pod names are DNS labels and subdomains, which hold no '_', so the name splits
// unambiguously. The pod-resources API itself names pods but not their uids.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <utility>

namespace accelmon::collectors {

inline constexpr const char* kDefaultPodLogsDir = "/var/log/pods";

// (namespace, pod name) -> uid
using PodUids = std::map<std::pair<std::string, std::string>, std::string>;

// The uids of the pods under `dir`; empty when it does not exist. A pod name that appears with
// two uids (a StatefulSet pod recreated while the old one's logs are still there) takes the uid of
// the newer directory.
PodUids ReadPodUids(const std::filesystem::path& dir);

// ReadPodUids once per change of the directory: a pod that comes or goes adds or removes an entry,
// which changes the directory's mtime, so a tick with no change costs one stat.
class PodLogDirectory {
 public:
  explicit PodLogDirectory(std::filesystem::path dir) : dir_(std::move(dir)) {}
  // The uids as of now; `exists` says whether the directory is there.
  const PodUids& Refresh(bool& exists);

 private:
  std::filesystem::path dir_;
  std::optional<std::filesystem::file_time_type> read_at_;  // the mtime the uids are of
  PodUids uids_;
};

}  // namespace accelmon::collectors
