// Kubernetes attribution: the kubelet's pod-resources API (v1.PodResourcesLister/List on its Unix
// socket) says which container each device plugin assigned each device to; the "kubelet"
// collector adds one POD holder per (container, device) to the report. It runs last, after the
// device collectors, the push and the processes collectors, because it folds the device's
// PROCESS holders into the pod's: on Kubernetes the processes on a device are its pod's.
//
// Device ids by device plugin (docs/jobs.md "Kubernetes"):
//   any resource    an id equal to a device's uuid (GPU-…, MIG-…, SIM-…)
//   nvidia.com/*    "GPU-<uuid>" / "MIG-<uuid>" (uuid strategy), "0", "1" (index strategy);
//                   a time-sliced replica "GPU-<uuid>::2" is its GPU
//   amd.com/*       the PCI bus id, "0000:c1:00.0" (ROCm k8s-device-plugin), any case and
//                   domain width; a plain number is the index
//   huawei.com/*    "Ascend910-3", "Ascend310P-0": the number after the last '-' is the index
// Devices assigned through Dynamic Resource Allocation (a container's dynamic_resources) are
// resolved from their CDI devices (collectors/dra_devices.h) and carry their claim; every POD
// holder carries its pod's uid where the kubelet's pod log directory names it
// (collectors/pod_uids.h).
#pragma once

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "collectors/collector.h"
#include "collectors/dra_devices.h"
#include "collectors/path_resolver.h"
#include "collectors/pod_uids.h"

namespace v1 {  // the kubelet's package (proto/k8s/podresources/v1/api.proto)
class ListPodResourcesResponse;
}

namespace accelmon::collectors {

inline constexpr const char* kDefaultKubeletSocket = "/var/lib/kubelet/pod-resources/kubelet.sock";

// Pids kept per POD holder when PROCESS holders are folded into it (the lowest ones).
inline constexpr size_t kMaxPodHolderPids = 64;
// POD holders per device (time-slicing can share one GPU among many containers); the first ones
// in the kubelet's order are kept, so a report stays within the exporter's limits.
inline constexpr size_t kMaxPodHoldersPerDevice = 64;

// The index of `device` among `report`'s devices a device plugin id names, or -1. `resource` is
// the plugin's resource name ("nvidia.com/gpu"), `id` one of its device ids.
int FindAssignedDevice(const v1::NodeReport& report, std::string_view resource,
                       std::string_view id);

// What AttributePods uses beyond the kubelet's answer; each may be null.
struct PodAttribution {
  const DraDeviceResolver* dra = nullptr;  // null: DRA devices are left out
  const PodUids* uids = nullptr;           // null: no pod uids
  // Out: each DRA device that names none of the report's devices, keyed by claim and device,
  // with what was looked at.
  std::map<std::string, std::string>* unresolved = nullptr;
};

// Adds a POD holder per (container, device) of `pods` to the devices of `report` it names (by a
// device plugin's id, or through a DRA claim, which the holder then names), and folds each such
// device's PROCESS holders into its POD holder when the device has exactly one container (with
// several, which process is whose is not known: the PROCESS holders stay). Returns how many
// holders it added.
size_t AttributePods(const ::v1::ListPodResourcesResponse& pods, v1::NodeReport& report,
                     const PodAttribution& how = {});

struct KubeletOptions {
  std::string socket = kDefaultKubeletSocket;  // --kubelet.pod-resources-socket
  // The deadline of each List call, so a slow kubelet never holds up the report.
  std::chrono::milliseconds timeout{500};  // --kubelet.timeout
  // Where DRA drivers' CDI specs are (--kubelet.cdi-spec-dirs); empty: DRA devices not mapped.
  std::vector<std::filesystem::path> cdi_spec_dirs{"/etc/cdi", "/var/run/cdi"};
  // The kubelet's pod log directory, for pod uids (--kubelet.pod-logs-dir); empty: none.
  std::filesystem::path pod_logs_dir = kDefaultPodLogsDir;
  // procfs and sysfs, for the device nodes a CDI device injects (/proc/driver/nvidia,
  // /sys/class/drm).
  PathResolver paths{};
};

// Lists the kubelet's pods every tick. Absent (SourceAbsent, logged once at info) while the socket
// does not exist; a kubelet that refuses, fails or misses the deadline fails the tick
// (CollectorError): no POD holders that tick, the rest of the report as always. A tick waits for
// the kubelet's answer at most `timeout`, and not at all while the kubelet is slow (its last call
// took longer): then each tick takes the answer of the call still running if it has come, and
// fails at once otherwise, so a slow kubelet never holds up the report.
class KubeletCollector final : public Collector {
 public:
  explicit KubeletCollector(KubeletOptions options);
  ~KubeletCollector() override;

  std::string_view name() const override { return "kubelet"; }
  void Collect(v1::NodeReport& report) override;

 private:
  struct Client;
  struct Call;
  const KubeletOptions options_;
  std::unique_ptr<Client> client_;  // null until the socket exists, and after a failed call
  std::shared_ptr<Call> call_;      // the List call running, if any
  bool kubelet_slow_ = false;       // its last call took longer than the timeout
  bool said_absent_ = false;
  std::unique_ptr<DraDeviceResolver> dra_;  // null without CDI spec dirs
  PodLogDirectory pod_logs_;
  std::set<std::string> said_unresolved_;  // DRA devices logged as unresolved, until resolved
  bool said_no_pod_logs_ = false;
};

}  // namespace accelmon::collectors
