// The peer of the ingest benchmark (bench/ingest_vs_echo.sh): a bare gRPC server of the same
// Ingest.Stream the exporter serves, answering every report with an APPLIED ack for its sequence
// and doing nothing else: the sequence is the only field it reads, nothing is validated, applied
// or kept. Its rate is what gRPC and protobuf framing alone allow on this machine; the exporter's
// rate against it is what parsing, validating, applying and recording cost.
//
//   grpc_echo_server [LISTEN_ADDRESS]   (default 127.0.0.1:0)
// Prints "echo: listening on port N" and serves until SIGINT or SIGTERM.
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server.h>
#include <grpcpp/server_builder.h>
#include <pthread.h>

#include <csignal>
#include <cstdio>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

#include "accelmon/v1/ingest.grpc.pb.h"

namespace {

using accelmon::v1::Ack;
using google::protobuf::internal::WireFormatLite;

// The exporter stops reading a stream with this many acks unsent; so does the echo.
constexpr size_t kMaxQueuedAcks = 64;

// The report's sequence, found by skipping every other top-level field; 0 when malformed.
uint64_t SequenceOf(const std::string& wire) {
  google::protobuf::io::CodedInputStream input(reinterpret_cast<const uint8_t*>(wire.data()),
                                               static_cast<int>(wire.size()));
  uint64_t sequence = 0;
  while (const uint32_t tag = input.ReadTag()) {
    if (WireFormatLite::GetTagFieldNumber(tag) == accelmon::v1::NodeReport::kSequenceFieldNumber &&
        WireFormatLite::GetTagWireType(tag) == WireFormatLite::WIRETYPE_VARINT) {
      if (!input.ReadVarint64(&sequence)) return 0;
    } else if (!WireFormatLite::SkipField(&input, tag)) {
      return 0;
    }
  }
  return sequence;
}

// One stream, with the exporter's flow: read a report, queue its ack, write acks one at a time
// in order, read the next while fewer than kMaxQueuedAcks wait.
class EchoReactor final : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  EchoReactor() {
    reading_ = true;
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    std::lock_guard lock(mu_);
    reading_ = false;
    if (!ok) {
      reads_done_ = true;
      MaybeFinishLocked();
      return;
    }
    // The same copy out of gRPC's slices the exporter makes before parsing.
    std::vector<grpc::Slice> slices;
    wire_.clear();
    if (request_.Dump(&slices).ok()) {
      for (const grpc::Slice& s : slices) {
        wire_.append(reinterpret_cast<const char*>(s.begin()), s.size());
      }
    }
    request_.Clear();
    Ack ack;
    ack.set_sequence(SequenceOf(wire_));
    ack.set_status(Ack::STATUS_APPLIED);
    bool own = false;
    grpc::SerializationTraits<Ack>::Serialize(ack, &acks_.emplace_back(), &own);
    MaybeWriteLocked();
    MaybeReadLocked();
  }

  void OnWriteDone(bool ok) override {
    std::lock_guard lock(mu_);
    writing_ = false;
    acks_.pop_front();
    if (!ok) {
      failed_ = true;
      acks_.clear();
      MaybeFinishLocked();
      return;
    }
    MaybeWriteLocked();
    MaybeReadLocked();
    MaybeFinishLocked();
  }

  void OnDone() override { delete this; }

 private:
  void MaybeReadLocked() {
    if (reading_ || reads_done_ || failed_ || acks_.size() >= kMaxQueuedAcks) return;
    reading_ = true;
    StartRead(&request_);
  }

  void MaybeWriteLocked() {
    if (writing_ || failed_ || acks_.empty()) return;
    writing_ = true;
    StartWrite(&acks_.front());
  }

  void MaybeFinishLocked() {
    if (finished_ || writing_ || reading_) return;
    if (failed_ || (reads_done_ && acks_.empty())) {
      finished_ = true;
      Finish(grpc::Status::OK);
    }
  }

  // Recursive: a Start* call may run the next reaction before it returns.
  std::recursive_mutex mu_;
  grpc::ByteBuffer request_;
  std::string wire_;
  std::deque<grpc::ByteBuffer> acks_;  // front is being written
  bool reading_ = false;
  bool writing_ = false;
  bool reads_done_ = false;
  bool failed_ = false;
  bool finished_ = false;
};

class EchoService final
    : public accelmon::v1::Ingest::WithRawCallbackMethod_Stream<accelmon::v1::Ingest::Service> {
 public:
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* Stream(
      grpc::CallbackServerContext* /*context*/) override {
    return new EchoReactor();
  }
};

}  // namespace

int main(int argc, char** argv) {
  const std::string listen = argc > 1 ? argv[1] : "127.0.0.1:0";
  // Only sigwait() below sees SIGINT/SIGTERM, not gRPC's threads.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  EchoService service;
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort(listen, grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  builder.SetMaxReceiveMessageSize(1 << 20);  // the exporter's default
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || port == 0) {
    std::fprintf(stderr, "grpc_echo_server: cannot listen on %s\n", listen.c_str());
    return 1;
  }
  std::printf("echo: listening on port %d\n", port);
  std::fflush(stdout);
  int sig = 0;
  sigwait(&signals, &sig);
  server->Shutdown();
  return 0;
}
