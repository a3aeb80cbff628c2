// IngestStream (daemon/agent/ingest_stream.h) against a real exporter over loopback: reports
// written in order, acks matched to them and counted, the window, numbered reports made as they
// are written, and the ways a stream ends.
#include "daemon/agent/ingest_stream.h"

#include <grpcpp/create_channel.h>
#include <gtest/gtest.h>

#include <memory>
#include <mutex>
#include <vector>

#include "accelmon/v1/ingest.grpc.pb.h"
#include "daemon/exporter/exporter.h"

namespace accelmon {
namespace ingest_stream_test {
namespace {

v1::NodeReport Report(const std::string& node, uint64_t sequence, int64_t unix_seconds) {
  v1::NodeReport r;
  r.set_node(node);
  r.set_agent_instance_id("instance-" + node);
  r.set_sequence(sequence);
  r.mutable_timestamp()->set_seconds(unix_seconds);
  r.add_devices()->mutable_memory()->set_used_bytes(sequence);
  return r;
}

int64_t NowSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Remembers what the stream told it.
class Recorder final : public IngestStreamObserver {
 public:
  void OnAck(const v1::Ack& ack, const IngestSent& report) override {
    std::lock_guard lock(mu_);
    acked.emplace_back(ack.sequence(), report.sequence);
  }
  void OnDone(const grpc::Status& status) override {
    std::lock_guard lock(mu_);
    ++done;
    code = status.error_code();
  }
  grpc::ByteBuffer EncodeAtWrite(uint64_t sequence) override {
    grpc::ByteBuffer bytes;
    bool own = false;
    const v1::NodeReport report = Report("numbered", sequence, NowSeconds());
    EXPECT_TRUE(grpc::SerializationTraits<v1::NodeReport>::Serialize(report, &bytes, &own).ok());
    return bytes;
  }

  std::mutex mu_;
  std::vector<std::pair<uint64_t, uint64_t>> acked;  // the ack's sequence, the report's
  int done = 0;
  grpc::StatusCode code = grpc::StatusCode::UNKNOWN;
};

class IngestStreamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    exporter_ = std::make_unique<Exporter>(
        ExporterOptions{.web_listen_address = "127.0.0.1:0", .grpc_listen_address = "127.0.0.1:0"});
    exporter_->Start();
    stub_ = std::make_unique<grpc::GenericStub>(grpc::CreateChannel(
        "127.0.0.1:" + std::to_string(exporter_->grpc_port()), grpc::InsecureChannelCredentials()));
  }
  void TearDown() override { exporter_->Stop(); }

  std::unique_ptr<Exporter> exporter_;
  std::unique_ptr<grpc::GenericStub> stub_;
};

TEST_F(IngestStreamTest, AcksAreMatchedInOrderAndCountedByVerdict) {
  Recorder recorder;
  IngestStream stream(*stub_, &recorder, IngestStream::Options{.max_unacknowledged = 4});
  const int64_t now = NowSeconds();
  for (uint64_t seq = 1; seq <= 20; ++seq) ASSERT_TRUE(stream.Send(Report("a", seq, now)));
  ASSERT_TRUE(stream.Send(Report("a", 20, now)));         // again: a duplicate
  ASSERT_TRUE(stream.Send(Report("a", 21, now + 3600)));  // an hour ahead: refused
  stream.Close();
  EXPECT_EQ(stream.TrySend(Report("a", 22, now)), IngestStream::SendResult::kOver);
  EXPECT_TRUE(stream.Wait().ok());

  const IngestAckCounts c = stream.counts();
  EXPECT_EQ(c.sent, 22u);
  EXPECT_EQ(c.applied, 20u);
  EXPECT_EQ(c.duplicate, 1u);
  EXPECT_EQ(c.rejected, 1u);
  EXPECT_EQ(c.rejected_reasons.size(), 1u);
  EXPECT_EQ(stream.unacknowledged(), 0u);
  EXPECT_EQ(stream.unwritten(), 0u);
  std::lock_guard lock(recorder.mu_);
  ASSERT_EQ(recorder.acked.size(), 22u);
  for (const auto& [ack, report] : recorder.acked) EXPECT_EQ(ack, report);
  EXPECT_EQ(recorder.done, 1);
  EXPECT_EQ(exporter_->stats().reports_applied.load(), 20u);
}

TEST_F(IngestStreamTest, NumberedReportsAreMadeAsTheyAreWritten) {
  Recorder recorder;
  IngestStream stream(*stub_, &recorder);
  for (int i = 0; i < 10; ++i) {
    ASSERT_EQ(stream.TrySendNumbered(), IngestStream::SendResult::kQueued);
  }
  stream.Close();
  EXPECT_TRUE(stream.Wait().ok());
  EXPECT_EQ(stream.counts().applied, 10u);
  std::lock_guard lock(recorder.mu_);
  ASSERT_EQ(recorder.acked.size(), 10u);
  for (size_t i = 0; i < 10; ++i) EXPECT_EQ(recorder.acked[i].second, i + 1);
}

TEST_F(IngestStreamTest, AFullWindowRefusesWithoutWaiting) {
  IngestStream stream(*stub_, nullptr, IngestStream::Options{.max_unacknowledged = 0});
  EXPECT_EQ(stream.TrySend(Report("a", 1, NowSeconds())), IngestStream::SendResult::kFull);
  EXPECT_EQ(stream.counts().sent, 0u);
  stream.Close();
  EXPECT_TRUE(stream.Wait().ok());
}

TEST_F(IngestStreamTest, CancelEndsTheCallAndLeavesTheRestUnacknowledged) {
  Recorder recorder;
  auto stream = std::make_unique<IngestStream>(*stub_, &recorder);
  stream->Cancel();
  EXPECT_TRUE(stream->over());
  EXPECT_EQ(stream->TrySend(Report("a", 1, NowSeconds())), IngestStream::SendResult::kOver);
  EXPECT_EQ(stream->Wait().error_code(), grpc::StatusCode::CANCELLED);
  stream.reset();
  std::lock_guard lock(recorder.mu_);
  EXPECT_EQ(recorder.done, 1);
  EXPECT_EQ(recorder.code, grpc::StatusCode::CANCELLED);
}

TEST_F(IngestStreamTest, NobodyListeningEndsTheStreamWithItsStatus) {
  const int port = exporter_->grpc_port();
  exporter_->Stop();
  grpc::GenericStub stub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
  IngestStream stream(stub, nullptr);
  stream.TrySend(Report("a", 1, NowSeconds()));  // taken or not: it is never acknowledged
  EXPECT_EQ(stream.Wait().error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_TRUE(stream.over());
  EXPECT_EQ(stream.counts().acknowledged(), 0u);
  EXPECT_EQ(stream.TrySend(Report("a", 2, NowSeconds())), IngestStream::SendResult::kOver);
}

// A stream destroyed without Close() or Cancel() (an owner leaving on an exception) is cancelled,
// not waited on.
TEST_F(IngestStreamTest, DestroyedOpenItIsCancelled) {
  Recorder recorder;
  {
    IngestStream stream(*stub_, &recorder);
    ASSERT_EQ(stream.TrySend(Report("a", 1, NowSeconds())), IngestStream::SendResult::kQueued);
  }
  std::lock_guard lock(recorder.mu_);
  EXPECT_EQ(recorder.done, 1);
}

}  // namespace
}  // namespace ingest_stream_test
}  // namespace accelmon
