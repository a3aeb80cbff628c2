// The exporter's flight recorder with real gRPC over loopback: every applied report is recorded
// exactly once, byte for byte, before it is acknowledged, also across an exporter restart on the
// same directory.
#include "recording/recorder.h"

#include <google/protobuf/io/coded_stream.h>
#include <grpcpp/create_channel.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "accelmon/v1/ingest.grpc.pb.h"
#include "collectors/sim.h"
#include "daemon/agent/agent.h"
#include "daemon/exporter/exporter.h"
#include "recording/log_reader.h"
#include "support/http_get.h"
#include "support/loopback_exporter.h"
#include "support/prom_text.h"
#include "support/temp_dir.h"
#include "support/wait.h"

namespace accelmon {
namespace recorder_test {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using testing::FindValue;
using testing::HttpGet;
using testing::LoopbackExporter;
using testing::ParseExposition;
using testing::ReservedPort;
using testing::WaitFor;

// Every report in a recording directory, as the wire bytes recorded, in order.
std::vector<std::string> RecordedReports(const std::string& dir) {
  std::vector<std::string> segments;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() == ".seg") segments.push_back(e.path().string());
  }
  std::sort(segments.begin(), segments.end());
  std::vector<std::string> out;
  for (const auto& path : segments) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream buf;
    buf << in.rdbuf();
    const std::string data = std::move(buf).str();
    recording::LogReader reader(data, recording::ReadMode::kPointInTime);
    std::string_view record;
    std::string scratch, storage, error;
    recording::SegmentDecoder decoder;  // with the header's dictionary
    while (reader.ReadRecord(&record, &scratch)) {
      recording::DecodedRecord decoded;
      EXPECT_TRUE(decoder.Decode(record, &storage, &decoded, &error)) << error;
      if (decoded.kind != recording::RecordKind::kReportBatch) continue;
      google::protobuf::io::CodedInputStream batch(
          reinterpret_cast<const uint8_t*>(decoded.body.data()),
          static_cast<int>(decoded.body.size()));
      while (batch.ReadTag() == 10) {  // field 1: one report
        uint32_t length = 0;
        std::string report;
        EXPECT_TRUE(batch.ReadVarint32(&length) &&
                    batch.ReadString(&report, static_cast<int>(length)));
        out.push_back(std::move(report));
      }
    }
    EXPECT_TRUE(reader.damage().empty()) << path;
  }
  return out;
}

// (node, instance, sequence) of every recorded report; fails on one recorded twice.
std::set<std::tuple<std::string, std::string, uint64_t>> RecordedKeys(const std::string& dir) {
  std::set<std::tuple<std::string, std::string, uint64_t>> keys;
  for (const auto& wire : RecordedReports(dir)) {
    v1::NodeReport r;
    EXPECT_TRUE(r.ParseFromString(wire));
    EXPECT_TRUE(keys.emplace(r.node(), r.agent_instance_id(), r.sequence()).second)
        << "recorded twice: " << r.node() << " " << r.agent_instance_id() << " " << r.sequence();
  }
  return keys;
}

v1::NodeReport Report(const std::string& node, uint64_t sequence) {
  v1::NodeReport r;
  r.set_node(node);
  r.set_agent_instance_id("raw-instance");
  r.set_sequence(sequence);
  r.mutable_timestamp()->set_seconds(static_cast<int64_t>(1'700'000'000 + sequence));
  r.mutable_interval()->set_seconds(1);
  auto* device = r.add_devices();
  device->mutable_identity()->set_index(0);
  device->mutable_identity()->set_uuid("GPU-" + std::to_string(sequence));
  device->mutable_memory()->set_used_bytes(sequence * 1000);
  return r;
}

class RecorderIntegrationTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = ::accelmon::testing::MakeTempDir("accelmon-recorder-it"); }
  void TearDown() override { fs::remove_all(dir_); }

  ExporterOptions Options() const {
    ExporterOptions o;
    recording::RecorderOptions r;
    r.recording.dir = dir_;
    r.sync_interval = 20ms;
    o.recording = r;
    return o;
  }

  std::string dir_;
};

// A raw client that sends everything before reading any ack: acks come back in order, the
// APPLIED ones only once their report is in the recording, and the others wait behind them.
TEST_F(RecorderIntegrationTest, AppliedReportsAreRecordedBeforeTheirAckAndAcksStayInOrder) {
  LoopbackExporter exporter(Options());
  auto stub = v1::Ingest::NewStub(
      grpc::CreateChannel(exporter.grpc_address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  auto stream = stub->Stream(&context);

  // seq 1..20, with a re-sent 3 after 5 and a nameless (rejected) report after 10.
  std::vector<v1::NodeReport> sent;
  std::vector<v1::Ack::Status> expected;
  for (uint64_t seq = 1; seq <= 20; ++seq) {
    sent.push_back(Report("raw-node", seq));
    expected.push_back(v1::Ack::STATUS_APPLIED);
    if (seq == 5) {
      sent.push_back(Report("raw-node", 3));
      expected.push_back(v1::Ack::STATUS_DUPLICATE);
    }
    if (seq == 10) {
      sent.push_back(Report("", 99));
      expected.push_back(v1::Ack::STATUS_REJECTED);
    }
  }
  for (const auto& r : sent) ASSERT_TRUE(stream->Write(r));
  for (size_t i = 0; i < sent.size(); ++i) {
    v1::Ack ack;
    ASSERT_TRUE(stream->Read(&ack)) << i;
    EXPECT_EQ(ack.sequence(), sent[i].sequence()) << "ack " << i << " out of order";
    EXPECT_EQ(ack.status(), expected[i]) << i;
    if (ack.status() == v1::Ack::STATUS_APPLIED) {
      const auto recorded = RecordedReports(dir_);
      EXPECT_NE(std::find(recorded.begin(), recorded.end(), sent[i].SerializeAsString()),
                recorded.end())
          << "report " << sent[i].sequence() << " acknowledged before it was recorded";
    }
  }
  stream->WritesDone();
  v1::Ack extra;
  EXPECT_FALSE(stream->Read(&extra));
  EXPECT_TRUE(stream->Finish().ok());

  // Each applied report once, in order, byte for byte as sent.
  std::vector<std::string> applied;
  for (uint64_t seq = 1; seq <= 20; ++seq)
    applied.push_back(Report("raw-node", seq).SerializeAsString());
  EXPECT_TRUE(RecordedReports(dir_) == applied);

  const auto samples = ParseExposition(HttpGet("127.0.0.1", exporter.web_port(), "/metrics").body);
  EXPECT_EQ(FindValue(samples, "accelmon_exporter_recorded_reports_total"), 20.0);
  EXPECT_EQ(FindValue(samples, "accelmon_exporter_record_errors_total"), 0.0);
  EXPECT_EQ(FindValue(samples, "accelmon_exporter_recording_segments"), 1.0);
  uint64_t bytes = 0;
  for (const auto& e : fs::directory_iterator(dir_)) {
    if (e.path().extension() == ".seg") bytes += e.file_size();
  }
  EXPECT_EQ(FindValue(samples, "accelmon_exporter_recording_bytes"), static_cast<double>(bytes));
  EXPECT_EQ(FindValue(samples, "accelmon_exporter_recorded_bytes_total"),
            static_cast<double>(bytes));
  exporter.Stop();
}

TEST_F(RecorderIntegrationTest, ReportsResentAfterARestartAreDuplicatesAndRecordedOnce) {
  const auto send = [](Exporter& exporter, uint64_t first, uint64_t last) {
    auto stub = v1::Ingest::NewStub(grpc::CreateChannel(
        testing::LoopbackAddress(exporter.grpc_port()), grpc::InsecureChannelCredentials()));
    grpc::ClientContext context;
    auto stream = stub->Stream(&context);
    std::vector<v1::Ack::Status> statuses;
    for (uint64_t seq = first; seq <= last; ++seq) {
      EXPECT_TRUE(stream->Write(Report("restart-node", seq)));
      v1::Ack ack;
      EXPECT_TRUE(stream->Read(&ack));
      statuses.push_back(ack.status());
    }
    stream->WritesDone();
    EXPECT_TRUE(stream->Finish().ok());
    return statuses;
  };
  {
    LoopbackExporter first(Options());
    EXPECT_EQ(send(first, 1, 10), std::vector(10, v1::Ack::STATUS_APPLIED));
  }
  LoopbackExporter second(Options());
  // The agent had no ack for 6..10 (say), and sends them again with the new ones.
  std::vector<v1::Ack::Status> expected(5, v1::Ack::STATUS_DUPLICATE);
  expected.resize(10, v1::Ack::STATUS_APPLIED);
  EXPECT_EQ(send(second, 6, 15), expected);
  EXPECT_EQ(second.stats().reports_duplicate.load(), 5u);
  // A node only seeded from the recording has no series until it reports.
  {
    const auto samples = ParseExposition(HttpGet("127.0.0.1", second.web_port(), "/metrics").body);
    EXPECT_EQ(FindValue(samples, "accelmon_exporter_nodes"), 1.0);
  }
  second.Stop();

  const auto keys = RecordedKeys(dir_);
  EXPECT_EQ(keys.size(), 15u);
  for (uint64_t seq = 1; seq <= 15; ++seq) {
    EXPECT_TRUE(keys.count({"restart-node", "raw-instance", seq})) << seq;
  }
}

TEST_F(RecorderIntegrationTest, AgentAcrossAnExporterRestartIsRecordedExactlyOnce) {
  const ReservedPort port;  // the second exporter listens where the first did
  auto first = std::make_unique<LoopbackExporter>(Options(), port.port());
  Uplink uplink(
      UplinkOptions{.exporter_address = port.address(), .min_backoff = 20ms, .max_backoff = 200ms});
  std::vector<std::unique_ptr<collectors::Collector>> list;
  list.push_back(
      std::make_unique<collectors::SimCollector>(collectors::SimOptions{.devices = 2, .seed = 3}));
  Agent agent(AgentOptions{.node = "agent-node", .interval = 10ms},
              collectors::CollectorSet(std::move(list)), uplink);
  std::mutex mu;
  std::map<uint64_t, std::string> sent;  // by sequence, as the agent sent them
  agent.set_report_observer([&](const v1::NodeReport& r) {
    std::lock_guard lock(mu);
    sent[r.sequence()] = r.SerializeAsString();
  });
  uplink.Start();
  agent.Start();
  ASSERT_TRUE(WaitFor([&] { return first->stats().recorder.reports.load() >= 20; }, 20s));
  first.reset();  // stops: streams cancelled with reports in flight
  ASSERT_TRUE(WaitFor([&] { return uplink.stats().pending >= 10; }, 20s));

  LoopbackExporter second(Options(), port.port());
  ASSERT_TRUE(WaitFor([&] { return second.stats().recorder.reports.load() >= 20; }, 20s));
  agent.Stop();
  ASSERT_TRUE(uplink.WaitUntilDrained(20s));
  uplink.Stop();
  second.Stop();

  // Every report the agent made is recorded once, byte for byte as it was sent.
  const auto recorded = RecordedReports(dir_);
  std::lock_guard lock(mu);
  ASSERT_EQ(uplink.stats().dropped, 0u);
  EXPECT_EQ(recorded.size(), sent.size());
  std::set<uint64_t> seen;
  for (const auto& wire : recorded) {
    v1::NodeReport r;
    ASSERT_TRUE(r.ParseFromString(wire));
    EXPECT_TRUE(seen.insert(r.sequence()).second) << "recorded twice: " << r.sequence();
    ASSERT_TRUE(sent.count(r.sequence())) << r.sequence();
    EXPECT_TRUE(sent[r.sequence()] == wire) << "report " << r.sequence() << " changed";
  }
  EXPECT_EQ(seen.size(), sent.size());
}

// Streams that go away while their reports wait for a (slow) group commit: the reactors outlive
// them until the recorder is done, every applied report is still recorded once, and the exporter
// serves the next client.
TEST_F(RecorderIntegrationTest, StreamsEndingWhileTheirReportsAreRecordedAreSafe) {
  ExporterOptions options = Options();
  options.recording->sync_interval = 300ms;
  LoopbackExporter exporter(options);
  auto channel = grpc::CreateChannel(exporter.grpc_address(), grpc::InsecureChannelCredentials());
  auto stub = v1::Ingest::NewStub(channel);
  for (int client = 0; client < 10; ++client) {
    grpc::ClientContext context;
    auto stream = stub->Stream(&context);
    for (uint64_t seq = 1; seq <= 5; ++seq) {
      EXPECT_TRUE(stream->Write(Report("gone-" + std::to_string(client), seq)));
    }
    if (client % 2 == 0) {
      context.TryCancel();  // gone at once
    } else {
      stream->WritesDone();  // half-closed: still gets its acks
      v1::Ack ack;
      int acks = 0;
      while (stream->Read(&ack)) ++acks;
      EXPECT_EQ(acks, 5);
    }
    stream->Finish();
  }
  ASSERT_TRUE(WaitFor(
      [&] {
        return exporter.stats().recorder.reports.load() == exporter.stats().reports_applied.load();
      },
      20s));
  EXPECT_TRUE(WaitFor([&] { return exporter.stats().streams_active.load() == 0; }, 20s));

  grpc::ClientContext context;
  auto stream = stub->Stream(&context);
  ASSERT_TRUE(stream->Write(Report("next", 1)));
  v1::Ack ack;
  ASSERT_TRUE(stream->Read(&ack));
  EXPECT_EQ(ack.status(), v1::Ack::STATUS_APPLIED);
  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());
  exporter.Stop();
  EXPECT_EQ(RecordedKeys(dir_).size(), exporter.stats().reports_applied.load());
}

TEST_F(RecorderIntegrationTest, TwoExportersCannotRecordIntoOneDirectory) {
  LoopbackExporter first(Options());
  Exporter second(testing::OnLoopback(Options()));
  try {
    second.Start();
    FAIL() << "expected a startup error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(dir_), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("in use"), std::string::npos) << e.what();
  }
}

TEST(RecorderOff, NoRecordingMetricsWithoutARecording) {
  LoopbackExporter exporter;
  const auto body = HttpGet("127.0.0.1", exporter.web_port(), "/metrics").body;
  EXPECT_EQ(body.find("accelmon_exporter_record"), std::string::npos);
  EXPECT_NE(body.find("accelmon_exporter_reports_ingested_total"), std::string::npos);
}

}  // namespace
}  // namespace recorder_test
}  // namespace accelmon
