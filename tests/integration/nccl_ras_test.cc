// The nccl_ras collector against a fake NCCL RAS server (tests/support/fake_nccl_ras.h, written
// from NCCL's protocol): a healthy communicator, a rank that stops (job_stall names it through a
// real exporter), and the answers a collector must survive: none, garbage, a report cut off, an
// NCCL without JSON, nothing listening. The tick never waits for RAS.
#include "collectors/nccl_ras.h"

#include <grpcpp/create_channel.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "accelmon/v1/diagnostics.grpc.pb.h"
#include "collectors/sim.h"
#include "daemon/agent/agent.h"
#include "support/fake_nccl_ras.h"
#include "support/log_capture.h"
#include "support/loopback_exporter.h"
#include "support/wait.h"

namespace accelmon {
namespace nccl_ras_test {
namespace {

using namespace std::chrono_literals;
using collectors::NcclRasCollector;
using collectors::NcclRasOptions;
using testing::FakeNcclRas;
using testing::LogCapture;
using testing::WaitFor;

// Ranks 0..3 on this node (127.0.0.1, devices 0..3), 4..7 on another (10.0.0.2).
std::vector<FakeNcclRas::Rank> EightRanks() {
  std::vector<FakeNcclRas::Rank> ranks;
  for (int r = 0; r < 8; ++r) {
    ranks.push_back(FakeNcclRas::Rank{.rank = r,
                                      .host = r < 4 ? "127.0.0.1" : "10.0.0.2",
                                      .pid = 2000 + r,
                                      .nvml_dev = r % 4,
                                      .all_reduce = 4400});
  }
  return ranks;
}

NcclRasOptions Options(const std::string& address) {
  return NcclRasOptions{
      .addresses = {address}, .timeout = 500ms, .period = 1000ms, .local_hosts = {"127.0.0.1"}};
}

// Collect until `done(report, error)` holds (a fresh report each time), up to 20 s.
template <typename Done>
bool CollectUntil(NcclRasCollector& c, Done done) {
  return WaitFor(
      [&] {
        v1::NodeReport report;
        std::string error;
        try {
          c.Collect(report);
        } catch (const collectors::SourceAbsent&) {
          // not asked yet, or nothing listening
        } catch (const collectors::CollectorError& e) {
          error = e.what();
        }
        return done(report, error);
      },
      20s);
}

TEST(NcclRas, AHealthyCommunicatorIsReportedWithThisNodesRanksOnly) {
  FakeNcclRas ras;
  ras.SetRanks(EightRanks());
  NcclRasCollector c(Options(ras.address()));
  v1::NodeReport got;
  ASSERT_TRUE(CollectUntil(c, [&](const v1::NodeReport& r, const std::string&) {
    got = r;
    return r.communicators_size() == 1;
  }));
  const v1::Communicator& comm = got.communicators(0);
  EXPECT_EQ(comm.hash(), "0x9e17999afaa87dbb");
  EXPECT_EQ(comm.size(), 8u);
  EXPECT_EQ(comm.ranks_reporting(), 8u);
  EXPECT_EQ(comm.missing_ranks(), 0u);
  EXPECT_EQ(comm.nccl_version(), "2.29.2");
  EXPECT_EQ(comm.source(), ras.address());
  ASSERT_EQ(comm.ranks_size(), 4) << "the other node's healthy ranks are its own to report";
  for (int i = 0; i < 4; ++i) {
    const v1::CommunicatorRank& r = comm.ranks(i);
    EXPECT_EQ(r.rank(), static_cast<uint32_t>(i));
    EXPECT_TRUE(r.local());
    EXPECT_EQ(r.device(), static_cast<uint32_t>(i));
    EXPECT_EQ(r.pid(), static_cast<uint32_t>(2000 + i));
    EXPECT_EQ(r.state(), v1::RANK_STATE_OK);
    // Broadcast 1 + AllGather 12 + AllReduce: all kinds together.
    EXPECT_EQ(r.collectives(), r.collectives_by_kind().at("AllReduce") + 13);
  }
  EXPECT_EQ(comm.collectives_max(), comm.ranks(0).collectives());
}

TEST(NcclRas, RanksElsewhereThatLagOrDoNotAnswerAreKept) {
  FakeNcclRas ras;
  auto ranks = EightRanks();
  ranks[6].all_reduce = 4390;
  ranks[6].running = false;
  ranks[5].async_error = 6;
  ras.SetRanks(ranks, {{.rank = 8, .host = "10.0.0.3", .nvml_dev = 1}});
  NcclRasCollector c(Options(ras.address()));
  v1::NodeReport got;
  ASSERT_TRUE(CollectUntil(c, [&](const v1::NodeReport& r, const std::string&) {
    got = r;
    return r.communicators_size() == 1;
  }));
  const v1::Communicator& comm = got.communicators(0);
  EXPECT_EQ(comm.missing_ranks(), 1u);
  ASSERT_EQ(comm.ranks_size(), 7) << "4 local, then rank 5 (error), 6 (behind), 8 (missing)";
  EXPECT_EQ(comm.ranks(4).rank(), 5u);
  EXPECT_EQ(comm.ranks(4).state(), v1::RANK_STATE_ERROR);
  EXPECT_EQ(comm.ranks(4).error(), "async error 6 (remote error)");
  EXPECT_EQ(comm.ranks(5).rank(), 6u);
  EXPECT_FALSE(comm.ranks(5).local());
  EXPECT_EQ(comm.ranks(5).host(), "10.0.0.2");
  EXPECT_LT(comm.ranks(5).collectives(), comm.collectives_max());
  EXPECT_EQ(comm.ranks(6).rank(), 8u);
  EXPECT_EQ(comm.ranks(6).state(), v1::RANK_STATE_UNRESPONSIVE);
  EXPECT_FALSE(comm.ranks(6).has_collectives()) << "RAS has no count of a missing rank";
}

TEST(NcclRas, NothingListeningIsAbsentAndSaidOnce) {
  LogCapture log;
  const testing::ReservedPort closed;  // bound, never listening: connection refused
  NcclRasCollector c(Options(closed.address()));
  for (int i = 0; i < 3; ++i) {
    v1::NodeReport report;
    EXPECT_THROW(c.Collect(report), collectors::SourceAbsent);
    EXPECT_EQ(report.communicators_size(), 0) << "absent, never zero";
  }
  ASSERT_TRUE(
      WaitFor([&] { return log.Count("nothing listening on " + closed.address()) == 1; }, 20s));
}

// A RAS that answers nothing, garbage, half a report, or no JSON: the collector fails with the
// reason, says it once, and the tick never waits for it.
struct Failure {
  FakeNcclRas::Mode mode;
  std::string reason;
};
class NcclRasFailures : public ::testing::TestWithParam<Failure> {};

TEST_P(NcclRasFailures, FailWithTheReasonOnceAndNeverHoldTheTick) {
  LogCapture log;
  FakeNcclRas ras;
  ras.SetRanks(EightRanks());
  ras.SetMode(GetParam().mode);
  NcclRasCollector c(Options(ras.address()));
  std::string error;
  ASSERT_TRUE(CollectUntil(c, [&](const v1::NodeReport& r, const std::string& e) {
    error = e;
    EXPECT_EQ(r.communicators_size(), 0);
    return !e.empty();
  })) << "never failed";
  EXPECT_NE(error.find(GetParam().reason), std::string::npos) << error;
  // Three more conversations with the same failure: the log says it once.
  const uint64_t seen = ras.connections();
  ASSERT_TRUE(WaitFor([&] { return ras.connections() >= seen + 3; }, 30s));
  EXPECT_EQ(log.Count(GetParam().reason), 1u);
  if (GetParam().mode == FakeNcclRas::Mode::kSilent) {
    // While RAS holds a query open, a tick returns at once with the latest verdict.
    ASSERT_TRUE(WaitFor([&] { return ras.holding(); }, 20s));
    v1::NodeReport report;
    EXPECT_THROW(c.Collect(report), collectors::CollectorError);
    EXPECT_TRUE(ras.holding()) << "the tick returned while the query was still waiting";
  }
  // RAS recovers: the next answer is reported.
  ras.SetMode(FakeNcclRas::Mode::kAnswer);
  ASSERT_TRUE(CollectUntil(
      c, [&](const v1::NodeReport& r, const std::string&) { return r.communicators_size() == 1; }));
}

INSTANTIATE_TEST_SUITE_P(
    Modes, NcclRasFailures,
    ::testing::Values(Failure{FakeNcclRas::Mode::kSilent, "no answer within the timeout"},
                      Failure{FakeNcclRas::Mode::kGarbage, "not NCCL's RAS?"},
                      Failure{FakeNcclRas::Mode::kCloseMidAnswer, "ended mid-document"},
                      Failure{FakeNcclRas::Mode::kNoJson, "NCCL before 2.28.7"}),
    [](const auto& param_info) {
      switch (param_info.param.mode) {
        case FakeNcclRas::Mode::kSilent:
          return std::string("Silent");
        case FakeNcclRas::Mode::kGarbage:
          return std::string("Garbage");
        case FakeNcclRas::Mode::kCloseMidAnswer:
          return std::string("ClosedMidAnswer");
        default:
          return std::string("NoJson");
      }
    });

// Online, through a real exporter: an agent with 4 simulated devices of job 4711 and the
// nccl_ras collector on the fake. Rank 2 (device 2) stops; the other ranks launch one more
// collective and wait. job_stall names rank 2, its device and where it stopped, within two
// report intervals of the last collective (collective_intervals).
TEST(NcclRasOnline, JobStallNamesTheRankTheOthersWaitFor) {
  testing::LoopbackExporter exporter;
  FakeNcclRas ras;
  ras.SetRanks(EightRanks());
  std::vector<std::unique_ptr<collectors::Collector>> list;
  list.push_back(std::make_unique<collectors::SimCollector>(collectors::SimOptions{
      .devices = 4, .seed = 5, .node = "ras-node", .job = "4711", .communicators = false}));
  list.push_back(std::make_unique<NcclRasCollector>(Options(ras.address())));
  UplinkOptions uplink_options;
  uplink_options.exporter_address = exporter.grpc_address();
  uplink_options.node = "ras-node";
  Uplink uplink(uplink_options);
  Agent agent(AgentOptions{.node = "ras-node", .interval = 1s},
              collectors::CollectorSet(std::move(list)), uplink);
  uplink.Start();
  agent.Start();
  auto query = v1::Query::NewStub(
      grpc::CreateChannel(exporter.grpc_address(), grpc::InsecureChannelCredentials()));
  const auto stalls = [&] {
    grpc::ClientContext context;
    v1::GetFindingsRequest request;
    v1::GetFindingsResponse response;
    std::vector<v1::Finding> out;
    if (!query->GetFindings(&context, request, &response).ok()) return out;
    for (const v1::Finding& f : response.findings()) {
      if (f.rule() == "job_stall") out.push_back(f);
    }
    return out;
  };
  // Healthy first: a few answers, no stall.
  ASSERT_TRUE(WaitFor([&] { return ras.queries() >= 3; }, 30s));
  EXPECT_TRUE(stalls().empty());
  ras.StopRank(2);
  std::vector<v1::Finding> found;
  ASSERT_TRUE(WaitFor(
      [&] {
        found = stalls();
        return !found.empty();
      },
      30s));
  ASSERT_EQ(found.size(), 1u);
  const v1::Finding& f = found[0];
  EXPECT_EQ(f.job(), "4711");
  EXPECT_EQ(f.node(), "ras-node");
  EXPECT_NE(f.summary().find("rank 2 on ras-node device 2 stopped after 4,4"), std::string::npos)
      << f.summary();
  EXPECT_NE(f.summary().find("the other 7 ranks are at"), std::string::npos) << f.summary();
  // Opened two report intervals (of 1 s) after the last collective, in report time.
  const int64_t opened_after_s = f.detected_at().seconds() - f.start().seconds();
  EXPECT_GE(opened_after_s, 1);
  EXPECT_LE(opened_after_s, 3);
  agent.Stop();
  uplink.Stop();
}

}  // namespace
}  // namespace nccl_ras_test
}  // namespace accelmon
