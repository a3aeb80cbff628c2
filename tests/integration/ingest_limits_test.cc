// The exporter against bad and greedy clients, over real gRPC on loopback: malformed reports are
// refused with a reason on a stream that goes on, an oversized report ends only its own stream,
// and a flooding stream is slowed without starving a polite one.
#include <grpcpp/create_channel.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <thread>

#include "daemon/agent/uplink.h"
#include "daemon/exporter/exporter.h"
#include "support/http_get.h"
#include "support/loopback_exporter.h"
#include "support/prom_text.h"
#include "support/wait.h"

namespace accelmon {
namespace ingest_limits_test {
namespace {

using namespace std::chrono_literals;
using testing::FindValue;
using testing::HttpGet;
using testing::LoopbackExporter;
using testing::ParseExposition;
using testing::Scrape;

std::unique_ptr<v1::Ingest::Stub> Connect(const Exporter& exporter) {
  // A channel of its own: each client gets its own connection, as separate agents would.
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return v1::Ingest::NewStub(grpc::CreateCustomChannel(
      testing::LoopbackAddress(exporter.grpc_port()), grpc::InsecureChannelCredentials(), args));
}

v1::NodeReport Report(const std::string& node, uint64_t sequence) {
  v1::NodeReport r;
  r.set_node(node);
  r.set_agent_instance_id("test-instance");
  r.set_sequence(sequence);
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  r.mutable_timestamp()->set_seconds(std::chrono::duration_cast<std::chrono::seconds>(now).count());
  r.mutable_interval()->set_seconds(1);
  return r;
}

using testing::WaitFor;

TEST(IngestLimits, EveryKindOfMalformedReportIsRejectedAndTheStreamGoesOn) {
  LoopbackExporter exporter;
  auto stub = Connect(exporter);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + 30s);
  auto stream = stub->Stream(&context);

  // Each breaks exactly one rule; the sequence numbers go on so none is a duplicate.
  std::vector<std::pair<std::string, v1::NodeReport>> bad;
  uint64_t seq = 0;
  auto add = [&](std::string reason, const std::function<void(v1::NodeReport&)>& change) {
    v1::NodeReport r = Report("bad-node", ++seq);
    change(r);
    bad.emplace_back(std::move(reason), std::move(r));
  };
  add("missing_node", [](auto& r) { r.clear_node(); });
  add("missing_instance", [](auto& r) { r.clear_agent_instance_id(); });
  add("missing_timestamp", [](auto& r) { r.clear_timestamp(); });
  add("timestamp_in_future",
      [](auto& r) { r.mutable_timestamp()->set_seconds(r.timestamp().seconds() + 3600); });
  add("label_too_long",
      [](auto& r) { r.add_devices()->mutable_identity()->set_uuid(std::string(200, 'u')); });
  add("too_many_devices", [](auto& r) {
    for (int i = 0; i < 65; ++i) r.add_devices()->mutable_identity()->set_index(i);
  });
  add("too_many_links", [](auto& r) {
    for (int i = 0; i < 300; ++i)
      r.mutable_host()->add_links()->set_name("eth" + std::to_string(i));
    auto* d = r.add_devices();
    for (int i = 0; i < 213; ++i) d->add_links()->set_name("nvlink" + std::to_string(i));
  });
  add("too_many_holders", [](auto& r) {
    auto* d = r.add_devices();
    for (int i = 0; i < 65; ++i) d->add_holders()->set_user("user" + std::to_string(i));
  });
  add("too_many_compute_dies", [](auto& r) {
    auto* a = r.add_devices()->mutable_activity();
    for (int i = 0; i < 65; ++i) a->add_compute_die_ratios(0.5);
  });
  add("invalid_memory_location", [](auto& r) {
    auto* e = r.add_devices()->mutable_errors();
    for (int i = 0; i < 2; ++i) e->add_ecc_by_location()->set_location(v1::MEMORY_LOCATION_DRAM);
  });
  add("too_many_holder_pids", [](auto& r) {
    auto* h = r.add_devices()->add_holders();
    for (uint32_t pid = 1; pid <= 257; ++pid) h->add_pids(pid);
  });
  add("too_many_communicators", [](auto& r) {
    for (int i = 0; i < 65; ++i) r.add_communicators()->set_hash("0x" + std::to_string(i));
  });
  add("too_many_ranks", [](auto& r) {
    auto* c = r.add_communicators();
    for (uint32_t rank = 0; rank < 129; ++rank) c->add_ranks()->set_rank(rank);
  });
  add("label_too_long",
      [](auto& r) { r.add_devices()->add_holders()->set_pod(std::string(254, 'p')); });
  add("label_too_long", [](auto& r) { r.add_communicators()->set_hash(std::string(129, 'f')); });
  add("too_many_events", [](auto& r) {
    for (int i = 0; i < 1025; ++i) r.add_events()->set_kind(v1::EVENT_KIND_XID);
  });
  add("non_finite_value",
      [](auto& r) { r.add_devices()->mutable_power()->set_usage_watts(std::nan("")); });
  add("value_out_of_range",
      [](auto& r) { r.add_devices()->mutable_utilization()->set_compute_ratio(1.5); });
  add("value_out_of_range",
      [](auto& r) { r.mutable_host()->add_temperatures()->set_celsius(-300); });
  // protobuf refuses these while parsing (serializing them only logs): the exporter parses
  // reports itself so that it can still answer, and the stream goes on.
  add("invalid_utf8", [](auto& r) { r.set_node("bad-node\xff"); });
  add("invalid_utf8", [](auto& r) { r.add_devices()->mutable_identity()->set_model("\xc0\xaf"); });
  add("invalid_utf8", [](auto& r) {
    (*r.add_devices()->mutable_thermal()->mutable_throttle_reasons())["\xfe"] = true;
  });
  // Sequence 0 last: it would otherwise break the numbering above.
  bad.emplace_back("missing_sequence", Report("bad-node", 0));

  v1::Ack ack;
  for (const auto& [reason, report] : bad) {
    SCOPED_TRACE(reason);
    ASSERT_TRUE(stream->Write(report));
    ASSERT_TRUE(stream->Read(&ack)) << "the stream stays open";
    EXPECT_EQ(ack.sequence(), report.sequence());
    EXPECT_EQ(ack.status(), v1::Ack::STATUS_REJECTED);
    EXPECT_EQ(ack.reason(), reason);
  }
  ASSERT_TRUE(stream->Write(Report("good-node", 1)));
  ASSERT_TRUE(stream->Read(&ack));
  EXPECT_EQ(ack.status(), v1::Ack::STATUS_APPLIED);
  stream->WritesDone();
  EXPECT_FALSE(stream->Read(&ack));
  EXPECT_TRUE(stream->Finish().ok());

  const auto samples = Scrape(exporter);
  for (const auto& [reason, report] : bad) {
    EXPECT_EQ(FindValue(samples, "accelmon_exporter_reports_rejected_total", {{"reason", reason}}),
              reason == "value_out_of_range"                           ? 2.0
              : reason == "invalid_utf8" || reason == "label_too_long" ? 3.0
                                                                       : 1.0)
        << reason;
  }
  EXPECT_EQ(FindValue(samples, "accelmon_exporter_reports_ingested_total"), 1.0);
  EXPECT_EQ(FindValue(samples, "accelmon_node_up", {{"node", "good-node"}}), 1.0);
  EXPECT_EQ(exporter.store().size(), 1u);
  EXPECT_EQ(FindValue(samples, "accelmon_node_up", {{"node", "bad-node"}}), std::nullopt);
  exporter.Stop();
}

TEST(IngestLimits, AReportOverEveryListLimitIsTrimmedToTheNodeBudgetAndItsValidPartsApplied) {
  ExporterOptions options;
  options.limits.trim.series_per_node = 2000;
  LoopbackExporter exporter(options);
  // Under the 1 MiB message limit, yet without limits it would add some 100k series.
  v1::NodeReport r = Report("flood", 1);
  for (int i = 0; i < 20'000; ++i) r.add_collectors()->set_name("c" + std::to_string(i));
  for (int i = 0; i < 5'000; ++i) {
    (*r.mutable_agent()->mutable_push_rejected_total())["r" + std::to_string(i)] = 1;
  }
  auto* host = r.mutable_host();
  for (int i = 0; i < 2'000; ++i) {
    auto* t = host->add_temperatures();
    t->set_sensor("t" + std::to_string(i));
    t->set_celsius(30);
    auto* p = host->add_power_sensors();
    p->set_sensor("p" + std::to_string(i));
    p->set_watts(1);
  }
  for (int z = 0; z < 200; ++z) {
    auto* zone = host->add_buddyinfo();
    zone->set_numa_node(static_cast<uint32_t>(z));
    zone->set_zone("Normal");
    for (int o = 0; o < 200; ++o) zone->add_free_blocks(1);
  }
  auto* device = r.add_devices();
  device->mutable_identity()->set_uuid("GPU-flood");
  device->mutable_memory()->set_used_bytes(12345);
  for (int i = 0; i < 5'000; ++i) {
    (*device->mutable_thermal()->mutable_throttle_reasons())["t" + std::to_string(i)] = false;
  }
  auto* link = device->add_links();
  link->set_name("nvlink0");
  link->set_up(true);
  for (int i = 0; i < 5'000; ++i) (*link->mutable_errors_total())["e" + std::to_string(i)] = 1;
  ASSERT_LT(r.ByteSizeLong(), size_t{1} << 20);

  auto stub = Connect(exporter);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + 30s);
  auto stream = stub->Stream(&context);
  v1::Ack ack;
  ASSERT_TRUE(stream->Write(r));
  ASSERT_TRUE(stream->Read(&ack));
  EXPECT_EQ(ack.status(), v1::Ack::STATUS_APPLIED) << "trimmed, not refused";
  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());

  const auto samples = Scrape(exporter);
  size_t node_series = 0;
  for (const auto& s : samples) {
    const auto node = s.labels.find("node");
    if (node != s.labels.end() && node->second == "flood") ++node_series;
  }
  EXPECT_LE(node_series, 2000u);
  EXPECT_GT(node_series, 1000u) << "what fits is kept";
  // The valid parts are applied.
  EXPECT_EQ(FindValue(samples, "accelmon_node_up", {{"node", "flood"}}), 1.0);
  EXPECT_EQ(FindValue(samples, "accelmon_device_memory_used_bytes", {{"node", "flood"}}), 12345.0);
  EXPECT_EQ(FindValue(samples, "accelmon_device_link_up", {{"link", "nvlink0"}}), 1.0);
  // And what went is counted by why.
  for (const char* reason : {"too_many_collectors", "too_many_map_entries", "too_many_sensors",
                             "too_many_buddy_zones", "too_many_buddy_orders", "series_budget"}) {
    const auto dropped =
        FindValue(samples, "accelmon_exporter_ingest_dropped_total", {{"reason", reason}});
    ASSERT_TRUE(dropped.has_value()) << reason;
    EXPECT_GT(*dropped, 0) << reason;
  }
  EXPECT_EQ(FindValue(samples, "accelmon_exporter_ingest_dropped_total",
                      {{"reason", "too_many_collectors"}}),
            20'000.0 - 64);
  exporter.Stop();
}

TEST(IngestLimits, AnOversizedReportEndsOnlyItsStream) {
  LoopbackExporter exporter;  // the default limit: 1 MiB
  auto stub = Connect(exporter);

  grpc::ClientContext other_context;
  auto other = stub->Stream(&other_context);
  v1::Ack ack;
  ASSERT_TRUE(other->Write(Report("small-node", 1)));
  ASSERT_TRUE(other->Read(&ack));

  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + 30s);
  auto stream = stub->Stream(&context);
  ASSERT_TRUE(stream->Write(Report("big-node", 1)));
  ASSERT_TRUE(stream->Read(&ack));
  v1::NodeReport big = Report("big-node", 2);
  big.add_collectors()->set_error(std::string((1 << 20) + 100, 'x'));
  ASSERT_GT(big.ByteSizeLong(), 1u << 20);
  stream->Write(big);  // may fail or not: the exporter ends the stream on receipt
  EXPECT_FALSE(stream->Read(&ack));
  const grpc::Status status = stream->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
  EXPECT_EQ(ParseMessageSizeLimit(status.error_message()), size_t{1} << 20)
      << "the agent reads the limit out of this: " << status.error_message();

  // The other stream, and /metrics, carry on.
  ASSERT_TRUE(other->Write(Report("small-node", 2)));
  ASSERT_TRUE(other->Read(&ack));
  EXPECT_EQ(ack.status(), v1::Ack::STATUS_APPLIED);
  other->WritesDone();
  EXPECT_TRUE(other->Finish().ok());
  const auto samples = Scrape(exporter);
  EXPECT_EQ(FindValue(samples, "accelmon_exporter_reports_ingested_total"), 3.0);
  exporter.Stop();
}

// The agent's side: a report the exporter can never take is dropped and counted, not re-sent
// forever, and the reports after it get through.
TEST(IngestLimits, TheAgentDropsAReportTooLargeForTheExporter) {
  LoopbackExporter exporter({.max_recv_msg_size = 64 * 1024});
  Uplink uplink(UplinkOptions{
      .exporter_address = exporter.grpc_address(), .min_backoff = 20ms, .max_backoff = 100ms});
  uplink.Start();
  uplink.Submit(Report("agent-node", 1));
  v1::NodeReport big = Report("agent-node", 2);
  big.add_collectors()->set_error(std::string(100 * 1024, 'x'));
  uplink.Submit(big);
  uplink.Submit(Report("agent-node", 3));
  ASSERT_TRUE(uplink.WaitUntilDrained(20s)) << "pending: " << uplink.stats().pending;
  EXPECT_EQ(uplink.stats().dropped, 1u);

  uplink.Submit(Report("agent-node", 4));
  ASSERT_TRUE(uplink.WaitUntilDrained(20s));
  uplink.Stop();
  EXPECT_EQ(uplink.stats().dropped, 1u);
  EXPECT_EQ(exporter.stats().reports_applied.load(), 3u);
  ASSERT_EQ(exporter.store().size(), 1u);
  EXPECT_EQ(exporter.store().Snapshot(std::chrono::system_clock::now())[0].report->sequence(), 4u);
  exporter.Stop();
}

TEST(IngestLimits, AFloodingStreamIsSlowedAndAPoliteOneIsServed) {
  constexpr double kRate = 20;
  LoopbackExporter exporter({.max_reports_per_second = kRate});

  // The flooder writes as fast as gRPC lets it for 2 s, and reads its acks on another thread.
  auto flood_stub = Connect(exporter);
  grpc::ClientContext flood_context;
  auto flood = flood_stub->Stream(&flood_context);
  std::atomic<uint64_t> flood_applied{0};
  std::thread flood_reader([&] {
    v1::Ack ack;
    while (flood->Read(&ack)) {
      if (ack.status() == v1::Ack::STATUS_APPLIED) ++flood_applied;
    }
  });
  const auto start = std::chrono::steady_clock::now();
  std::atomic<bool> stop_flood{false};
  std::atomic<uint64_t> flood_written{0};
  std::thread flood_writer([&] {
    for (uint64_t seq = 1; !stop_flood; ++seq) {
      if (!flood->Write(Report("flood-node", seq))) break;
      ++flood_written;
    }
  });

  // Meanwhile a polite client sends 5 reports, one at a time, each within a bounded wait.
  ASSERT_TRUE(WaitFor([&] { return exporter.stats().reads_throttled.load() > 0; }, 10s));
  auto polite_stub = Connect(exporter);
  grpc::ClientContext polite_context;
  polite_context.set_deadline(std::chrono::system_clock::now() + 20s);
  auto polite = polite_stub->Stream(&polite_context);
  for (uint64_t seq = 1; seq <= 5; ++seq) {
    ASSERT_TRUE(polite->Write(Report("polite-node", seq)));
    v1::Ack ack;
    ASSERT_TRUE(polite->Read(&ack)) << "report " << seq << " answered within the deadline";
    EXPECT_EQ(ack.status(), v1::Ack::STATUS_APPLIED);
  }
  polite->WritesDone();
  EXPECT_TRUE(polite->Finish().ok());

  // The time the flooder runs is what the test measures (a rate limit is applied over time), not
  // a guess at how long something takes: it stays a fixed wait.
  std::this_thread::sleep_until(start + 2s);
  const uint64_t applied = flood_applied.load();
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  stop_flood = true;
  flood_context.TryCancel();
  flood_writer.join();
  flood_reader.join();
  flood->Finish();

  std::cerr << "flooder: " << applied << " applied of " << flood_written.load() << " written in "
            << elapsed << " s at a limit of " << kRate << "/s\n";
  // A burst of one second's worth, then kRate a second; the bound is generous (no timing on a
  // busy machine is exact) but far below what an unthrottled stream would get.
  EXPECT_GT(applied, 5u);
  EXPECT_LE(static_cast<double>(applied), 2 * (kRate * elapsed + kRate) + 10)
      << "written " << flood_written.load() << " in " << elapsed << "s";
  EXPECT_GT(flood_written.load(), applied) << "the flooder wrote more than was read";

  const auto samples = Scrape(exporter);
  EXPECT_GT(*FindValue(samples, "accelmon_exporter_reads_throttled_total"), 0.0);
  EXPECT_EQ(FindValue(samples, "accelmon_node_up", {{"node", "polite-node"}}), 1.0);
  exporter.Stop();
}

}  // namespace
}  // namespace ingest_limits_test
}  // namespace accelmon
