// Which of the node's devices a device allocated through Kubernetes Dynamic Resource Allocation
// is, from node-local facts only (no API server): the CDI devices the kubelet reports for it, as
// their spec files define them (collectors/cdi_specs.h), and what the kernel says about the
// device nodes those inject (docs/jobs.md "Dynamic Resource Allocation"):
//
//   a variable or annotation holding a device's uuid    that device (GPU-…, MIG-…, any vendor)
//   … holding a PCI address                             the device at that address (not a MIG one)
//   /dev/nvidia-caps/nvidia-capN (MIG access)           the MIG instance: GPU minor, GI and CI
//                                                       from <proc>/driver/nvidia-caps/mig-minors
//   /dev/nvidiaN                                        the GPU of minor N: its PCI address from
//                                                       <proc>/driver/nvidia/gpus/*/information
//   /dev/dri/renderDN, /dev/dri/cardN                   the GPU <sys>/class/drm/<node>/device is
//   /dev/davinciN                                       Ascend NPU N
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "accelmon/v1/telemetry.pb.h"
#include "collectors/cdi_specs.h"
#include "collectors/path_resolver.h"

namespace v1 {  // the kubelet's package (proto/k8s/podresources/v1/api.proto)
class ClaimResource;
}

namespace accelmon::collectors {

// NVIDIA's device node facts: a GPU's minor number to its PCI address, and a MIG capability
// device's minor to the (GPU minor, GPU instance, compute instance) it grants access to.
struct NvidiaMinors {
  std::map<uint32_t, std::string> gpu_pci;  // minor -> "0000:c1:00.0"
  struct Cap {
    uint32_t gpu_minor = 0;
    uint32_t gi = 0;
    std::optional<uint32_t> ci;  // absent: the GPU instance's own access capability
  };
  std::map<uint32_t, Cap> caps;
};

// Reads <proc>/driver/nvidia/gpus/*/information ("Device Minor:", "Bus Location:") and
// <proc>/driver/nvidia-caps/mig-minors ("gpu0/gi1/ci0/access 22"); empty where they are absent.
NvidiaMinors ReadNvidiaMinors(const PathResolver& paths);

class DraDeviceResolver {
 public:
  DraDeviceResolver(std::vector<std::filesystem::path> cdi_dirs, PathResolver paths);

  // Re-reads what changed of the CDI specs, and the NVIDIA minors when a spec did (once per
  // tick, before Resolve).
  void Refresh();
  // The index among `report`'s devices that `resource` is, or -1 with `why_not` saying what was
  // looked at.
  int Resolve(const v1::NodeReport& report, const ::v1::ClaimResource& resource,
              std::string& why_not) const;

 private:
  int ResolveCdi(const v1::NodeReport& report, const CdiDevice& device) const;
  int ResolveDeviceNodes(const v1::NodeReport& report, const CdiDevice& device) const;

  CdiSpecs specs_;
  PathResolver paths_;
  NvidiaMinors nvidia_;
  bool read_minors_ = false;
};

}  // namespace accelmon::collectors
