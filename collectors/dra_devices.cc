#include "collectors/dra_devices.h"

#include <system_error>

#include "collectors/file_reader.h"
#include "collectors/text_parsing.h"
#include "k8s/podresources/v1/api.pb.h"

namespace accelmon::collectors {
namespace fs = std::filesystem;

namespace {

// A proc file's text; empty when it is absent (no NVIDIA driver, no MIG).
std::string ReadIfThere(const fs::path& path) {
  std::string text;
  if (TryReadTextFile(path, text) != 0) text.clear();
  return text;
}

// The number a device node's name ends with after `prefix` ("/dev/nvidia" + "3"), or nullopt.
std::optional<uint32_t> NodeNumber(std::string_view path, std::string_view prefix) {
  if (!path.starts_with(prefix)) return std::nullopt;
  const std::string_view rest = path.substr(prefix.size());
  if (!AllDigits(rest)) return std::nullopt;
  const auto n = ParseUint64(rest);
  if (!n || *n > UINT32_MAX) return std::nullopt;
  return static_cast<uint32_t>(*n);
}

// "gpu0/gi1/ci0/access" -> (0, 1, 0); "gpu0/gi1/access" -> (0, 1, absent).
std::optional<NvidiaMinors::Cap> ParseCapPath(std::string_view path) {
  NvidiaMinors::Cap cap;
  std::vector<std::string_view> parts;
  while (!path.empty()) {
    const size_t slash = path.find('/');
    parts.push_back(path.substr(0, slash));
    if (slash == std::string_view::npos) break;
    path.remove_prefix(slash + 1);
  }
  auto number = [](std::string_view part, std::string_view prefix) -> std::optional<uint32_t> {
    if (!part.starts_with(prefix)) return std::nullopt;
    const auto n = ParseUint64(part.substr(prefix.size()));
    if (!n || *n > UINT32_MAX || !AllDigits(part.substr(prefix.size()))) return std::nullopt;
    return static_cast<uint32_t>(*n);
  };
  // mig-minors spells "gpu0/gi1/ci0/access"; the capability's proc path has a "mig" level too
  // ("gpu0/mig/gi1/ci0/access").
  if (parts.size() > 1 && parts[1] == "mig") parts.erase(parts.begin() + 1);
  if ((parts.size() != 3 && parts.size() != 4) || parts.back() != "access") return std::nullopt;
  const auto gpu = number(parts[0], "gpu");
  const auto gi = number(parts[1], "gi");
  if (!gpu || !gi) return std::nullopt;
  cap.gpu_minor = *gpu;
  cap.gi = *gi;
  if (parts.size() == 4) {
    const auto ci = number(parts[2], "ci");
    if (!ci) return std::nullopt;
    cap.ci = *ci;
  }
  return cap;
}

}  // namespace

NvidiaMinors ReadNvidiaMinors(const PathResolver& paths) {
  NvidiaMinors out;
  std::error_code ec;
  fs::directory_iterator it(paths.Proc("driver/nvidia/gpus"), ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    std::optional<uint32_t> minor;
    std::string bus;
    ForEachLine(ReadIfThere(it->path() / "information"), [&](std::string_view line) {
      const size_t colon = line.find(':');
      if (colon == std::string_view::npos) return;
      const std::string_view key = Trim(line.substr(0, colon));
      const std::string_view value = Trim(line.substr(colon + 1));
      if (key == "Device Minor") {
        if (const auto n = ParseUint64(value); n && *n <= UINT32_MAX) {
          minor = static_cast<uint32_t>(*n);
        }
      } else if (key == "Bus Location") {
        bus = std::string(value);
      }
    });
    // The directory's own name is the PCI address too, where the file lacks it.
    if (bus.empty()) bus = it->path().filename().string();
    if (minor) out.gpu_pci[*minor] = bus;
  }
  ForEachLine(ReadIfThere(paths.Proc("driver/nvidia-caps/mig-minors")), [&](std::string_view line) {
    const auto fields = SplitFields(line);
    if (fields.size() != 2) return;
    const auto minor = ParseUint64(fields[1]);
    const auto cap = ParseCapPath(fields[0]);
    if (minor && *minor <= UINT32_MAX && cap) out.caps[static_cast<uint32_t>(*minor)] = *cap;
  });
  return out;
}

DraDeviceResolver::DraDeviceResolver(std::vector<fs::path> cdi_dirs, PathResolver paths)
    : specs_(std::move(cdi_dirs)), paths_(std::move(paths)) {}

void DraDeviceResolver::Refresh() {
  // The minors change only with the driver (reloaded, or MIG reconfigured, before which a claim's
  // spec is written anew): read again when a spec changed, not every tick.
  if (specs_.Refresh() || !read_minors_) {
    nvidia_ = ReadNvidiaMinors(paths_);
    read_minors_ = true;
  }
}

int DraDeviceResolver::ResolveDeviceNodes(const v1::NodeReport& report,
                                          const CdiDevice& device) const {
  auto find = [&](auto&& match) {
    for (int i = 0; i < report.devices_size(); ++i) {
      if (match(report.devices(i).identity())) return i;
    }
    return -1;
  };
  std::optional<uint32_t> gpu_minor;
  std::optional<NvidiaMinors::Cap> gi_cap, ci_cap;
  for (const std::string& node : device.device_nodes) {
    if (const auto cap_minor = NodeNumber(node, "/dev/nvidia-caps/nvidia-cap")) {
      if (const auto cap = nvidia_.caps.find(*cap_minor); cap != nvidia_.caps.end()) {
        (cap->second.ci ? ci_cap : gi_cap) = cap->second;
      }
    } else if (const auto minor = NodeNumber(node, "/dev/nvidia")) {
      gpu_minor = *minor;
    } else if (const auto npu = NodeNumber(node, "/dev/davinci")) {
      const int d = find([&](const v1::DeviceIdentity& id) {
        return id.vendor() == "huawei" && id.index() == *npu;
      });
      if (d >= 0) return d;
    } else if (node.starts_with("/dev/dri/renderD") || node.starts_with("/dev/dri/card")) {
      // The DRM node's PCI device: <sys>/class/drm/renderD128/device -> ../../../0000:c1:00.0
      std::error_code ec;
      const fs::path name = fs::path(node).filename();
      const fs::path target = fs::read_symlink(paths_.Sys("class/drm") / name / "device", ec);
      if (ec) continue;
      const std::string pci = target.filename().string();
      const int d = find([&](const v1::DeviceIdentity& id) {
        return !id.has_mig() && SamePciAddress(id.pci_bus_id(), pci);
      });
      if (d >= 0) return d;
    }
  }
  // A MIG instance: its compute instance's capability names GPU, GI and CI (the GI's own
  // capability alone, GPU and GI). Its parent GPU's node (/dev/nvidiaN) comes along, so the MIG
  // capabilities are looked at first.
  const std::optional<NvidiaMinors::Cap> mig = ci_cap ? ci_cap : gi_cap;
  if (mig) gpu_minor = mig->gpu_minor;
  if (!gpu_minor) return -1;
  const auto pci = nvidia_.gpu_pci.find(*gpu_minor);
  if (pci == nvidia_.gpu_pci.end()) return -1;
  const int gpu = find([&](const v1::DeviceIdentity& id) {
    return id.vendor() == "nvidia" && !id.has_mig() && SamePciAddress(id.pci_bus_id(), pci->second);
  });
  if (gpu < 0 || !mig) return gpu;
  const std::string& parent_uuid = report.devices(gpu).identity().uuid();
  return find([&](const v1::DeviceIdentity& id) {
    if (!id.has_mig() || id.mig().parent_uuid() != parent_uuid) return false;
    if (!id.mig().has_gpu_instance_id() || id.mig().gpu_instance_id() != mig->gi) return false;
    return !mig->ci ||
           (id.mig().has_compute_instance_id() && id.mig().compute_instance_id() == *mig->ci);
  });
}

int DraDeviceResolver::ResolveCdi(const v1::NodeReport& report, const CdiDevice& device) const {
  // A uuid or PCI address named by the device's own variables or annotations, as a whole value or
  // one item of a comma- or space-separated list (NVIDIA_VISIBLE_DEVICES=GPU-…,GPU-…).
  for (const std::string& value : device.values) {
    std::string_view rest = value;
    while (!rest.empty()) {
      const size_t sep = rest.find_first_of(", ");
      const std::string_view item = rest.substr(0, sep);
      rest = sep == std::string_view::npos ? std::string_view() : rest.substr(sep + 1);
      if (item.empty()) continue;
      for (int i = 0; i < report.devices_size(); ++i) {
        const v1::DeviceIdentity& id = report.devices(i).identity();
        if (!id.uuid().empty() && EqualsIgnoreCase(id.uuid(), item)) return i;
      }
      for (int i = 0; i < report.devices_size(); ++i) {
        const v1::DeviceIdentity& id = report.devices(i).identity();
        if (!id.has_mig() && SamePciAddress(id.pci_bus_id(), item)) return i;
      }
    }
  }
  return ResolveDeviceNodes(report, device);
}

int DraDeviceResolver::Resolve(const v1::NodeReport& report, const ::v1::ClaimResource& resource,
                               std::string& why_not) const {
  std::vector<std::string> reasons;
  for (const ::v1::CDIDevice& cdi : resource.cdi_devices()) {
    const CdiDevice* device = specs_.Find(cdi.name());
    if (device == nullptr) {
      reasons.push_back(cdi.name() + ": no CDI spec defines it");
      continue;
    }
    const int d = ResolveCdi(report, *device);
    if (d >= 0) return d;
    reasons.push_back(cdi.name() + " (" + device->spec.string() + "): names no uuid, PCI address" +
                      " or device node of this node's devices");
  }
  if (resource.cdi_devices().empty()) reasons.push_back("the kubelet gave no CDI device");
  why_not.clear();
  for (const std::string& r : reasons) why_not += (why_not.empty() ? "" : "; ") + r;
  return -1;
}

}  // namespace accelmon::collectors
