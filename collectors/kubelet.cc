#include "collectors/kubelet.h"

#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/support/channel_arguments.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <system_error>
#include <tuple>
#include <vector>

#include "collectors/text_parsing.h"
#include "k8s/podresources/v1/api.grpc.pb.h"

namespace accelmon::collectors {
namespace podresources = ::v1;

namespace {

std::optional<uint32_t> ParseIndex(std::string_view s) {
  uint32_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

int FindBy(const v1::NodeReport& report, auto&& match) {
  for (int i = 0; i < report.devices_size(); ++i) {
    if (match(report.devices(i).identity())) return i;
  }
  return -1;
}

int FindIndex(const v1::NodeReport& report, std::string_view vendor, uint32_t index) {
  return FindBy(report, [&](const v1::DeviceIdentity& d) {
    return d.vendor() == vendor && d.index() == index;
  });
}

uint32_t LowestPid(const v1::DeviceHolder& h) {
  return h.pids().empty() ? UINT32_MAX : *std::min_element(h.pids().begin(), h.pids().end());
}

// Folds the PROCESS holders of `device` into the POD holder at `pod_position` (its only one): their
// pids, memory, and the pushed job, rank and world size; the user and command of the process with
// the lowest pid.
void FoldProcessHolders(v1::DeviceTelemetry& device, int pod_position) {
  auto& holders = *device.mutable_holders();
  std::vector<const v1::DeviceHolder*> processes;
  for (const v1::DeviceHolder& h : holders) {
    if (h.kind() == v1::HOLDER_KIND_PROCESS) processes.push_back(&h);
  }
  if (processes.empty()) return;
  std::stable_sort(processes.begin(), processes.end(),
                   [](const auto* a, const auto* b) { return LowestPid(*a) < LowestPid(*b); });
  v1::DeviceHolder pod = holders[pod_position];
  std::set<uint32_t> pids(pod.pids().begin(), pod.pids().end());
  for (const v1::DeviceHolder* h : processes) {
    pids.insert(h->pids().begin(), h->pids().end());
    if (pod.user().empty()) pod.set_user(h->user());
    if (pod.command().empty()) pod.set_command(h->command());
    if (pod.job().empty()) pod.set_job(h->job());
    if (pod.rank().empty()) pod.set_rank(h->rank());
    if (!pod.has_world_size() && h->has_world_size()) pod.set_world_size(h->world_size());
    if (h->has_memory_used_bytes()) {
      pod.set_memory_used_bytes(pod.memory_used_bytes() + h->memory_used_bytes());
    }
  }
  pod.clear_pids();
  for (const uint32_t pid : pids) {
    if (static_cast<size_t>(pod.pids_size()) == kMaxPodHolderPids) break;
    pod.add_pids(pid);
  }
  google::protobuf::RepeatedPtrField<v1::DeviceHolder> kept;
  for (int i = 0; i < holders.size(); ++i) {
    if (i == pod_position) {
      *kept.Add() = std::move(pod);
    } else if (holders[i].kind() != v1::HOLDER_KIND_PROCESS) {
      *kept.Add() = std::move(holders[i]);
    }
  }
  holders.Swap(&kept);
}

}  // namespace

int FindAssignedDevice(const v1::NodeReport& report, std::string_view resource,
                       std::string_view id) {
  if (id.empty()) return -1;
  // Time-sliced (shared) NVIDIA GPUs are advertised as replicas "GPU-<uuid>::N".
  if (const size_t replica = id.find("::"); replica != std::string_view::npos) {
    id = id.substr(0, replica);
  }
  // Any plugin that names devices by the uuid we report (NVIDIA's default, simulated devices).
  const int by_uuid = FindBy(report, [&](const v1::DeviceIdentity& d) {
    return !d.uuid().empty() && EqualsIgnoreCase(d.uuid(), id);
  });
  if (by_uuid >= 0) return by_uuid;
  const size_t slash = resource.find('/');
  const std::string_view domain = resource.substr(0, slash);
  if (domain == "nvidia.com") {
    if (const auto index = ParseIndex(id)) return FindIndex(report, "nvidia", *index);
    // The plugin's index strategy names a MIG device "GPU:SLOT": the MIG device index is
    // 100 x (GPU + 1) + SLOT (collectors/nvml.cc).
    if (const size_t colon = id.find(':'); colon != std::string_view::npos) {
      const auto gpu = ParseIndex(id.substr(0, colon));
      const auto slot = ParseIndex(id.substr(colon + 1));
      if (gpu && slot && *slot < 100 && *gpu < 40'000'000) {
        return FindIndex(report, "nvidia", 100 * (*gpu + 1) + *slot);
      }
    }
    return -1;
  }
  if (domain == "amd.com") {
    if (const auto index = ParseIndex(id)) return FindIndex(report, "amd", *index);
    return FindBy(report, [&](const v1::DeviceIdentity& d) {
      return d.vendor() == "amd" && SamePciAddress(d.pci_bus_id(), id);
    });
  }
  if (domain == "huawei.com") {
    // "Ascend910-3": the physical NPU 3. Virtual NPUs ("Ascend910-2c-100-3") are not ours to map.
    if (!id.starts_with("Ascend")) return -1;
    const size_t dash = id.find('-');
    if (dash == std::string_view::npos || id.find('-', dash + 1) != std::string_view::npos) {
      return -1;
    }
    if (const auto index = ParseIndex(id.substr(dash + 1))) {
      return FindIndex(report, "huawei", *index);
    }
  }
  return -1;
}

size_t AttributePods(const podresources::ListPodResourcesResponse& pods, v1::NodeReport& report,
                     const PodAttribution& how) {
  size_t added = 0;
  std::set<std::tuple<int, std::string, std::string, std::string>> seen;
  std::vector<int> touched;
  std::map<int, size_t> pods_on;  // device -> POD holders added
  for (const podresources::PodResources& pod : pods.pod_resources()) {
    std::string uid;
    if (how.uids != nullptr) {
      if (auto it = how.uids->find({pod.namespace_(), pod.name()}); it != how.uids->end()) {
        uid = it->second;
      }
    }
    for (const podresources::ContainerResources& container : pod.containers()) {
      // One POD holder per (device, container), whichever way the device came.
      auto add = [&](int d) -> v1::DeviceHolder* {
        // Two replicas of one shared GPU (or two resources of one device) are one holder.
        if (!seen.emplace(d, pod.namespace_(), pod.name(), container.name()).second) return nullptr;
        if (++pods_on[d] > kMaxPodHoldersPerDevice) return nullptr;
        v1::DeviceHolder& h = *report.mutable_devices(d)->add_holders();
        h.set_kind(v1::HOLDER_KIND_POD);
        h.set_pod(pod.name());
        h.set_namespace_(pod.namespace_());
        h.set_container(container.name());
        h.set_pod_uid(uid);
        touched.push_back(d);
        ++added;
        return &h;
      };
      for (const podresources::ContainerDevices& devices : container.devices()) {
        for (const std::string& id : devices.device_ids()) {
          const int d = FindAssignedDevice(report, devices.resource_name(), id);
          if (d >= 0) add(d);
        }
      }
      if (how.dra == nullptr) continue;
      for (const podresources::DynamicResource& claim : container.dynamic_resources()) {
        for (const podresources::ClaimResource& resource : claim.claim_resources()) {
          std::string why_not;
          const int d = how.dra->Resolve(report, resource, why_not);
          if (d < 0) {
            if (how.unresolved != nullptr) {
              // The ResourceSlice's name for it where the kubelet gives one (1.32+), else its
              // CDI devices.
              std::string device = resource.driver_name() + "/" + resource.pool_name() + "/" +
                                   resource.device_name();
              if (resource.driver_name().empty()) {
                device.clear();
                for (const auto& cdi : resource.cdi_devices()) {
                  device += (device.empty() ? "" : ",") + cdi.name();
                }
              }
              const std::string claim_name = claim.claim_namespace() + "/" + claim.claim_name();
              (*how.unresolved)[claim_name + " " + device] =
                  "DRA device " + device + " (claim " + claim_name + ", pod " + pod.namespace_() +
                  "/" + pod.name() + ") is none of this node's devices: " + why_not;
            }
            continue;
          }
          if (v1::DeviceHolder* h = add(d)) {
            h->set_claim(claim.claim_name());
            h->set_claim_namespace(claim.claim_namespace());
          }
        }
      }
    }
  }
  std::sort(touched.begin(), touched.end());
  touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
  for (const int d : touched) {
    v1::DeviceTelemetry& device = *report.mutable_devices(d);
    int pod_position = -1;
    int pod_holders = 0;
    for (int i = 0; i < device.holders_size(); ++i) {
      if (device.holders(i).kind() == v1::HOLDER_KIND_POD) {
        ++pod_holders;
        pod_position = i;
      }
    }
    if (pod_holders == 1) FoldProcessHolders(device, pod_position);
  }
  return added;
}

struct KubeletCollector::Client {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<podresources::PodResourcesLister::Stub> stub;
};

// One List call, answered on a gRPC thread; shared with that thread's callback.
struct KubeletCollector::Call {
  grpc::ClientContext context;
  podresources::ListPodResourcesRequest request;
  podresources::ListPodResourcesResponse response;
  std::shared_ptr<grpc::Channel> channel;  // kept while the call runs
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  grpc::Status status;
  std::chrono::steady_clock::duration took{};

  // Waits at most `wait` for the answer; true when it came.
  bool Wait(std::chrono::milliseconds wait) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, wait, [&] { return done; });
  }
};

KubeletCollector::KubeletCollector(KubeletOptions options)
    : options_(std::move(options)),
      dra_(options_.cdi_spec_dirs.empty()
               ? nullptr
               : std::make_unique<DraDeviceResolver>(options_.cdi_spec_dirs, options_.paths)),
      pod_logs_(options_.pod_logs_dir) {}

KubeletCollector::~KubeletCollector() {
  if (call_) {
    call_->context.TryCancel();
    call_->Wait(std::chrono::seconds(5));
  }
}

void KubeletCollector::Collect(v1::NodeReport& report) {
  std::error_code ec;
  const bool exists = std::filesystem::exists(options_.socket, ec);
  if (!exists) {
    client_.reset();
    const std::string why =
        "no kubelet pod-resources socket at " + options_.socket + (ec ? ": " + ec.message() : "");
    if (!said_absent_)
      spdlog::info("kubelet: {}; Kubernetes attribution off until it appears", why);
    said_absent_ = true;
    throw SourceAbsent(why);
  }
  if (said_absent_) spdlog::info("kubelet: pod-resources socket {} found", options_.socket);
  said_absent_ = false;
  if (!client_) {
    grpc::ChannelArguments args;
    // A kubelet that restarts is back within a tick or two, not after gRPC's default backoff.
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
    // The kubelet's own limit for this API (a node with many pods).
    args.SetMaxReceiveMessageSize(16 << 20);
    auto channel = grpc::CreateCustomChannel("unix:" + options_.socket,
                                             grpc::InsecureChannelCredentials(), args);
    client_ = std::make_unique<Client>(
        Client{channel, podresources::PodResourcesLister::NewStub(channel)});
  }
  const std::string no_answer = "kubelet List on " + options_.socket + ": no answer within " +
                                std::to_string(options_.timeout.count()) + " ms";
  // The tick waits for the kubelet only while it answers in time, as the device collectors do
  // (deadline_collector.h): a slow kubelet costs one tick its deadline, then later ticks use the
  // answer of a call that is still running when it comes and never wait for it.
  if (!call_) {
    call_ = std::make_shared<Call>();
    call_->channel = client_->channel;
    // The call itself may run longer than a tick waits, so that a slow kubelet's answer is used.
    call_->context.set_deadline(std::chrono::system_clock::now() +
                                std::max(10 * options_.timeout, std::chrono::milliseconds(5000)));
    std::shared_ptr<Call> call = call_;
    client_->stub->async()->List(&call->context, &call->request, &call->response,
                                 [call](grpc::Status status) {
                                   std::lock_guard lock(call->mu);
                                   call->status = std::move(status);
                                   call->took = std::chrono::steady_clock::now() - call->started;
                                   call->done = true;
                                   call->cv.notify_all();
                                 });
  }
  if (!call_->Wait(kubelet_slow_ ? std::chrono::milliseconds(0) : options_.timeout)) {
    kubelet_slow_ = true;
    throw CollectorError(no_answer + " (the call goes on; this tick has no pods)");
  }
  const std::shared_ptr<Call> call = std::move(call_);
  kubelet_slow_ = call->took > options_.timeout;
  if (!call->status.ok()) {
    client_.reset();  // a fresh channel next tick: the kubelet may have been replaced
    throw CollectorError(call->status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED
                             ? no_answer
                             : "kubelet List on " + options_.socket + ": " +
                                   call->status.error_message());
  }
  const PodUids* uids = nullptr;
  if (!options_.pod_logs_dir.empty()) {
    bool has_logs = false;
    uids = &pod_logs_.Refresh(has_logs);
    if (!has_logs && !said_no_pod_logs_) {
      spdlog::info("kubelet: no pod log directory at {}: pod uids absent until it appears",
                   options_.pod_logs_dir.string());
    }
    said_no_pod_logs_ = !has_logs;
  }
  std::map<std::string, std::string> unresolved;
  if (dra_) dra_->Refresh();
  AttributePods(call->response, report,
                {.dra = dra_.get(), .uids = uids, .unresolved = &unresolved});
  // Each device that cannot be told is said once while it stays so; attributions it would give
  // are absent (an API-server lookup of the ResourceSlice could name it: docs/jobs.md).
  std::set<std::string> still;
  for (const auto& [key, message] : unresolved) {
    if (!said_unresolved_.contains(key)) {
      spdlog::info("kubelet: {}; no holder for it", message);
    }
    still.insert(key);
  }
  said_unresolved_ = std::move(still);
}

}  // namespace accelmon::collectors
