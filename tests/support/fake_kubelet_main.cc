// fake-kubelet: the tests' kubelet pod-resources server as a command, so that docs/jobs.md can
// show Kubernetes and DRA attribution on a simulated node without a cluster.
//   fake-kubelet --socket PATH --pods FILE.json
// serves v1.PodResourcesLister/List on the Unix socket PATH with the pods of FILE (a
// ListPodResourcesResponse in protobuf's JSON mapping), read afresh on every call, until SIGINT
// or SIGTERM.
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>

#include "support/fake_kubelet.h"

int main(int argc, char** argv) {
  std::string socket, pods;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--socket") == 0) socket = argv[i + 1];
    if (std::strcmp(argv[i], "--pods") == 0) pods = argv[i + 1];
  }
  if (socket.empty() || pods.empty()) {
    std::fprintf(stderr, "usage: %s --socket PATH --pods FILE.json\n", argv[0]);
    return 2;
  }
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);  // before gRPC starts its threads
  accelmon::testing::FakeKubelet kubelet;
  kubelet.ServeFile(pods);
  std::filesystem::remove(socket);
  std::string why;
  if (!kubelet.Serve(socket, &why)) {
    std::fprintf(stderr, "fake-kubelet: %s\n", why.c_str());
    return 1;
  }
  std::printf("fake-kubelet: serving %s from %s\n", socket.c_str(), pods.c_str());
  std::fflush(stdout);
  int signal = 0;
  sigwait(&signals, &signal);
  kubelet.Shutdown();
  return 0;
}
