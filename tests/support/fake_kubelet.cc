#include "support/fake_kubelet.h"

#include <google/protobuf/util/json_util.h>
#include <grpcpp/server_builder.h>

#include <chrono>
#include <cstring>

#include "collectors/file_reader.h"
#include "support/wait.h"

namespace accelmon::testing {

using namespace std::chrono_literals;

FakeKubelet::FakeKubelet(std::function<size_t()> reports_so_far)
    : reports_so_far_(std::move(reports_so_far)) {}

FakeKubelet::~FakeKubelet() { Shutdown(); }

bool FakeKubelet::Serve(const std::string& socket, std::string* why) {
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix:" + socket, grpc::InsecureServerCredentials());
  builder.RegisterService(this);
  server_ = builder.BuildAndStart();
  if (server_ == nullptr && why != nullptr) *why = "cannot serve " + socket;
  return server_ != nullptr;
}

void FakeKubelet::Shutdown() {
  Release();
  if (server_) server_->Shutdown(std::chrono::system_clock::now() + 5s);
  server_.reset();
}

void FakeKubelet::Set(::v1::ListPodResourcesResponse pods) {
  std::lock_guard lock(mu_);
  pods_ = std::move(pods);
  ++generation_;
}

void FakeKubelet::ServeFile(std::filesystem::path file) {
  std::lock_guard lock(mu_);
  file_ = std::move(file);
  ++generation_;
}

void FakeKubelet::SetVersion(Version version) {
  std::lock_guard lock(mu_);
  version_ = version;
  ++generation_;
}

int FakeKubelet::generation() {
  std::lock_guard lock(mu_);
  return generation_;
}

void FakeKubelet::Hang() {
  std::lock_guard lock(mu_);
  hanging_ = true;
}

void FakeKubelet::Release() {
  std::lock_guard lock(mu_);
  hanging_ = false;
  cv_.notify_all();
}

std::vector<FakeKubelet::Served> FakeKubelet::served() {
  std::lock_guard lock(mu_);
  return served_;
}

grpc::Status FakeKubelet::List(grpc::ServerContext* /*context*/,
                               const ::v1::ListPodResourcesRequest* /*request*/,
                               ::v1::ListPodResourcesResponse* response) {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, 10s, [&] { return !hanging_; });
  if (!file_.empty()) {
    std::string text;
    if (const int error = collectors::TryReadTextFile(file_, text); error != 0) {
      return {grpc::StatusCode::UNAVAILABLE,
              "cannot read " + file_.string() + ": " + std::strerror(error)};
    }
    const auto status = google::protobuf::util::JsonStringToMessage(text, response);
    if (!status.ok()) {
      return {grpc::StatusCode::INTERNAL, file_.string() + ": " + status.ToString()};
    }
  } else {
    *response = pods_;
  }
  for (auto& pod : *response->mutable_pod_resources()) {
    for (auto& container : *pod.mutable_containers()) {
      for (auto& claim : *container.mutable_dynamic_resources()) {
        for (auto& resource : *claim.mutable_claim_resources()) {
          if (version_ == Version::kWithoutDraDeviceNames) {
            resource.clear_driver_name();
            resource.clear_pool_name();
            resource.clear_device_name();
          } else if (version_ == Version::kWithUnknownFields) {
            resource.GetReflection()->MutableUnknownFields(&resource)->AddVarint(99, 7);
          }
        }
      }
      if (version_ == Version::kWithUnknownFields) {
        container.GetReflection()
            ->MutableUnknownFields(&container)
            ->AddLengthDelimited(42, "a field of a newer kubelet");
      }
    }
    if (version_ == Version::kWithUnknownFields) {
      pod.GetReflection()->MutableUnknownFields(&pod)->AddVarint(77, 1);
    }
  }
  served_.push_back({generation_, reports_so_far_()});
  return grpc::Status::OK;
}

std::optional<v1::NodeReport> FirstReportServing(FakeKubelet& kubelet, ReportTap& tap,
                                                 int generation,
                                                 std::chrono::milliseconds timeout) {
  std::optional<size_t> index;
  WaitFor(
      [&] {
        for (const auto& s : kubelet.served()) {
          if (s.generation == generation) {
            index = s.reports_before;
            return tap.size() > s.reports_before;
          }
        }
        return false;
      },
      timeout);
  return index ? tap.At(*index) : std::nullopt;
}

}  // namespace accelmon::testing
