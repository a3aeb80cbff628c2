// The kubelet's end of the pod-resources API (v1.PodResourcesLister/List) on a Unix socket, for
// the kubelet collector's tests and the fake-kubelet tool (docs/jobs.md): it answers List with
// the pods the test set, or with the pods of a JSON file (a ListPodResourcesResponse in
// protobuf's JSON mapping) read afresh on every call. Each call notes which generation of the
// pods it served and how many reports the agent had handed on by then (the report it contributes
// to is the next one).
#pragma once

#include <grpcpp/server.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "k8s/podresources/v1/api.grpc.pb.h"
#include "support/report_tap.h"

namespace accelmon::testing {

class FakeKubelet final : public ::v1::PodResourcesLister::Service {
 public:
  struct Served {
    int generation;
    size_t reports_before;
  };
  // How the kubelet speaks.
  enum class Version {
    kCurrent,  // as set
    // A kubelet before 1.32: claim resources without driver, pool and device names.
    kWithoutDraDeviceNames,
    // A newer kubelet: fields this build does not know (unknown fields on the wire).
    kWithUnknownFields,
  };

  explicit FakeKubelet(std::function<size_t()> reports_so_far = [] { return size_t{0}; });
  ~FakeKubelet() override;

  // Serves `socket`; false (with the reason in `why`) when it cannot.
  bool Serve(const std::string& socket, std::string* why = nullptr);
  void Shutdown();

  void Set(::v1::ListPodResourcesResponse pods);
  // Every List reads this file instead (protobuf JSON); a file that does not parse fails the call.
  void ServeFile(std::filesystem::path file);
  void SetVersion(Version version);
  int generation();
  // From now on List answers only when released (or after 10 s): a kubelet that hangs.
  void Hang();
  void Release();
  std::vector<Served> served();

  grpc::Status List(grpc::ServerContext* context, const ::v1::ListPodResourcesRequest* request,
                    ::v1::ListPodResourcesResponse* response) override;

 private:
  const std::function<size_t()> reports_so_far_;
  std::unique_ptr<grpc::Server> server_;
  std::mutex mu_;
  std::condition_variable cv_;
  ::v1::ListPodResourcesResponse pods_;
  std::filesystem::path file_;
  Version version_ = Version::kCurrent;
  int generation_ = 0;
  bool hanging_ = false;
  std::vector<Served> served_;
};

// The report the first List call serving `generation` contributed to (the one the agent handed
// on after it), once `tap` has it; nothing when no call served it within `timeout`.
std::optional<v1::NodeReport> FirstReportServing(FakeKubelet& kubelet, ReportTap& tap,
                                                 int generation, std::chrono::milliseconds timeout);

}  // namespace accelmon::testing
