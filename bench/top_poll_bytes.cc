// What one `accelmon top` poll costs against an exporter: the bytes of the answers and the time
// of the calls, for the whole reports (GetNodes + GetFindings, what top asked before GetSummary)
// and for GetSummary. bench/top_poll.sh fills an exporter with `accelmon loadgen` and runs this.
//
//   top_poll_bytes --exporter.address 127.0.0.1:9478 [--polls 20]
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "accelmon/v1/diagnostics.grpc.pb.h"

namespace {

using Clock = std::chrono::steady_clock;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::string address = "127.0.0.1:9478";
  int polls = 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--exporter.address") == 0) address = argv[i + 1];
    if (std::strcmp(argv[i], "--polls") == 0) polls = std::atoi(argv[i + 1]);
  }
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(512 * 1024 * 1024);
  auto stub = accelmon::v1::Query::NewStub(
      grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args));

  size_t nodes = 0;
  size_t full_bytes = 0;
  size_t summary_bytes = 0;
  std::vector<double> full_ms;
  std::vector<double> summary_ms;
  for (int i = 0; i < polls; ++i) {
    {
      const auto start = Clock::now();
      grpc::ClientContext c1;
      accelmon::v1::GetNodesResponse n;
      grpc::Status s = stub->GetNodes(&c1, accelmon::v1::GetNodesRequest(), &n);
      grpc::ClientContext c2;
      accelmon::v1::GetFindingsResponse f;
      if (s.ok()) s = stub->GetFindings(&c2, accelmon::v1::GetFindingsRequest(), &f);
      if (!s.ok()) {
        std::fprintf(stderr, "top_poll_bytes: %s: %s\n", address.c_str(),
                     s.error_message().c_str());
        return 1;
      }
      full_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
      full_bytes = n.ByteSizeLong() + f.ByteSizeLong();
      nodes = static_cast<size_t>(n.reports_size());
    }
    {
      const auto start = Clock::now();
      grpc::ClientContext c;
      accelmon::v1::GetSummaryResponse r;
      const grpc::Status s = stub->GetSummary(&c, accelmon::v1::GetSummaryRequest(), &r);
      if (!s.ok()) {
        std::fprintf(stderr, "top_poll_bytes: %s: %s\n", address.c_str(),
                     s.error_message().c_str());
        return 1;
      }
      summary_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
      summary_bytes = r.ByteSizeLong();
    }
  }
  std::printf("nodes %zu\n", nodes);
  std::printf("GetNodes+GetFindings bytes %zu ms %.2f\n", full_bytes, Median(full_ms));
  std::printf("GetSummary bytes %zu ms %.2f\n", summary_bytes, Median(summary_ms));
  std::printf(
      "ratio bytes %.1fx time %.1fx\n",
      static_cast<double>(full_bytes) / static_cast<double>(std::max<size_t>(1, summary_bytes)),
      Median(full_ms) / std::max(1e-9, Median(summary_ms)));
  return 0;
}
