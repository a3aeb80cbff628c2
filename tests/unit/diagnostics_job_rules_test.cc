// The job layer with hand-built reports: job_stall across nodes, job_straggler, the first fault,
// and the job a device finding carries.
#include <gtest/gtest.h>

#include "diagnostics/engine.h"

namespace accelmon::diagnostics {
namespace diagnostics_job_rules_test {
namespace {

constexpr uint64_t kGiB = 1ULL << 30;
constexpr double kLinkBytesPerSecond = 50e9;

struct Dev {
  double compute = 0.9;
  uint64_t used = 80 * kGiB;
  double link_share = 0.5;  // of capacity, since the previous report
  std::string job = "J";
  std::string rank{};
};

// A node's report at `seconds`: each device with one link whose counter advanced by
// `link_share` of capacity over the previous 10 s (a running total per node and device).
class Fleet {
 public:
  v1::NodeReport Report(const std::string& node, int64_t seconds, const std::vector<Dev>& devs) {
    v1::NodeReport r;
    r.set_node(node);
    r.mutable_timestamp()->set_seconds(seconds);
    for (size_t i = 0; i < devs.size(); ++i) {
      const Dev& dev = devs[i];
      auto& d = *r.add_devices();
      d.mutable_identity()->set_index(static_cast<uint32_t>(i));
      d.mutable_identity()->set_uuid(node + "-GPU-" + std::to_string(i));
      d.mutable_utilization()->set_compute_ratio(dev.compute);
      d.mutable_memory()->set_used_bytes(dev.used);
      uint64_t& bytes = bytes_[node + std::to_string(i)];
      bytes += static_cast<uint64_t>(dev.link_share * kLinkBytesPerSecond * 10);
      auto& link = *d.add_links();
      link.set_name("nvlink0");
      link.set_transmit_bytes_total(bytes);
      link.set_max_bandwidth_bytes_per_second(kLinkBytesPerSecond);
      if (dev.job.empty()) continue;
      d.add_processes()->set_pid(100 + static_cast<uint32_t>(i));
      auto& h = *d.add_holders();
      h.set_kind(v1::HOLDER_KIND_SLURM);
      h.set_job(dev.job);
      h.set_rank(dev.rank);
    }
    return r;
  }

 private:
  std::map<std::string, uint64_t> bytes_;
};

struct Recorder {
  explicit Recorder(Engine& engine) {
    engine.set_listener([this](Change c, const v1::Finding& f) {
      if (c == Change::kOpened) opened.push_back(f);
      if (c == Change::kClosed) closed.push_back(f);
    });
  }
  std::vector<v1::Finding> Of(std::string_view rule) const {
    std::vector<v1::Finding> out;
    for (const auto& f : opened) {
      if (f.rule() == rule) out.push_back(f);
    }
    return out;
  }
  std::vector<v1::Finding> opened, closed;
};

std::string Text(const v1::Finding& f, std::string_view name) {
  for (const auto& e : f.evidence()) {
    if (e.name() == name) return e.text();
  }
  return {};
}

const Dev kBusy{};
const Dev kIdle{.compute = 0.01, .link_share = 0};

TEST(JobStallAcrossNodes, OneFindingForTheJobOnTheNodeThatWentIdleFirst) {
  Engine engine;
  Recorder rec(engine);
  Fleet fleet;
  for (int64_t t = 0; t <= 60; t += 10) {
    engine.Process(fleet.Report("a", 1000 + t, {kBusy, kBusy}));
    engine.Process(fleet.Report("b", 1000 + t + 1, {kBusy, kBusy}));
  }
  // b hangs first (at 1071), a ten seconds later; reports interleave.
  for (int64_t t = 70; t <= 300; t += 10) {
    engine.Process(fleet.Report("a", 1000 + t, {t >= 80 ? kIdle : kBusy, t >= 80 ? kIdle : kBusy}));
    engine.Process(fleet.Report("b", 1000 + t + 1, {kIdle, kIdle}));
  }
  const auto stalls = rec.Of("job_stall");
  ASSERT_EQ(stalls.size(), 1u);
  EXPECT_EQ(stalls[0].job(), "J");
  EXPECT_EQ(stalls[0].node(), "b");
  EXPECT_EQ(stalls[0].device(), "");
  EXPECT_EQ(stalls[0].start().seconds(), 1080) << "since the last device went idle";
  EXPECT_EQ(Text(stalls[0], "nodes"), "a, b");
  EXPECT_EQ(Text(stalls[0], "first_idle_node"), "b");
  EXPECT_EQ(rec.opened.size(), 1u) << "the per-node part leaves devices with a job alone";
}

TEST(JobStallAcrossNodes, ANodeStillComputingMeansNoStall) {
  Engine engine;
  Recorder rec(engine);
  Fleet fleet;
  for (int64_t t = 0; t <= 60; t += 10) {
    engine.Process(fleet.Report("a", 1000 + t, {kBusy}));
    engine.Process(fleet.Report("b", 1000 + t, {kBusy}));
  }
  for (int64_t t = 70; t <= 600; t += 10) {
    engine.Process(fleet.Report("a", 1000 + t, {kIdle}));
    engine.Process(fleet.Report("b", 1000 + t, {kBusy}));
  }
  EXPECT_TRUE(rec.opened.empty());
}

TEST(JobStallAcrossNodes, ClosesWhenTheJobLeavesItsDevices) {
  Engine engine;
  Recorder rec(engine);
  Fleet fleet;
  for (int64_t t = 0; t <= 60; t += 10) engine.Process(fleet.Report("a", 1000 + t, {kBusy}));
  for (int64_t t = 70; t <= 300; t += 10) engine.Process(fleet.Report("a", 1000 + t, {kIdle}));
  ASSERT_EQ(rec.Of("job_stall").size(), 1u);
  Dev gone = kIdle;
  gone.job.clear();
  engine.Process(fleet.Report("a", 1310, {gone}));
  ASSERT_EQ(rec.closed.size(), 1u);
  EXPECT_EQ(rec.closed[0].end().seconds(), 1310);
  EXPECT_TRUE(engine.OpenFindings().empty());
}

TEST(JobStallAcrossNodes, ForgettingItsLastNodeClosesTheJobsFinding) {
  Engine engine;
  Recorder rec(engine);
  Fleet fleet;
  for (int64_t t = 0; t <= 60; t += 10) engine.Process(fleet.Report("a", 1000 + t, {kBusy}));
  for (int64_t t = 70; t <= 300; t += 10) engine.Process(fleet.Report("a", 1000 + t, {kIdle}));
  ASSERT_EQ(rec.Of("job_stall").size(), 1u);
  const std::string node = "a";
  engine.ForgetNode(node, 1400'000'000'000);
  ASSERT_EQ(rec.closed.size(), 1u);
  EXPECT_EQ(rec.closed[0].rule(), "job_stall");
  EXPECT_EQ(rec.closed[0].end().seconds(), 1400);
  EXPECT_TRUE(engine.OpenFindings().empty());
}

TEST(JobStallPerNode, StaysForDevicesWithoutAJob) {
  Engine engine;
  Recorder rec(engine);
  Fleet fleet;
  Dev busy = kBusy, idle = kIdle;
  busy.job = idle.job = "";
  for (int64_t t = 0; t <= 60; t += 10) engine.Process(fleet.Report("a", 1000 + t, {busy, busy}));
  for (int64_t t = 70; t <= 300; t += 10) engine.Process(fleet.Report("a", 1000 + t, {idle, idle}));
  const auto stalls = rec.Of("job_stall");
  ASSERT_EQ(stalls.size(), 1u);
  EXPECT_EQ(stalls[0].job(), "");
  EXPECT_EQ(stalls[0].node(), "a");
}

std::vector<Dev> Ranks(int first, std::vector<double> compute) {
  std::vector<Dev> out;
  for (size_t i = 0; i < compute.size(); ++i) {
    out.push_back(Dev{.compute = compute[i],
                      .link_share = 0.5 * compute[i],
                      .rank = std::to_string(first + static_cast<int>(i))});
  }
  return out;
}

TEST(JobStraggler, NamesTheSlowRankAfterItsFor) {
  Engine engine;
  Recorder rec(engine);
  Fleet fleet;
  for (int64_t t = 0; t <= 400; t += 10) {
    engine.Process(fleet.Report("a", 1000 + t, Ranks(0, {0.9, 0.88})));
    engine.Process(fleet.Report("b", 1000 + t, Ranks(2, {0.91, t >= 100 ? 0.4 : 0.9})));
  }
  const auto stragglers = rec.Of("job_straggler");
  ASSERT_EQ(stragglers.size(), 1u);
  const v1::Finding& f = stragglers[0];
  EXPECT_EQ(f.job(), "J");
  EXPECT_EQ(f.node(), "b");
  EXPECT_EQ(f.device(), "1");
  EXPECT_EQ(f.device_uuid(), "b-GPU-1");
  EXPECT_EQ(Text(f, "rank"), "3");
  EXPECT_EQ(Text(f, "measure"), "compute_ratio") << "no steps pushed";
  EXPECT_EQ(f.start().seconds(), 1100);
}

TEST(JobStraggler, JudgesPushedStepRateFirst) {
  Engine engine;
  Recorder rec(engine);
  Fleet fleet;
  for (int64_t t = 0; t <= 400; t += 10) {
    for (const std::string node : {"a", "b"}) {
      v1::NodeReport r = fleet.Report(node, 1000 + t, Ranks(node == "a" ? 0 : 2, {0.9, 0.9}));
      for (int i = 0; i < r.devices_size(); ++i) {
        // Same utilization everywhere, but b's device 0 steps at a third of the others' rate.
        const bool slow = node == "b" && i == 0 && t >= 100;
        const uint64_t steps =
            slow ? 300 + static_cast<uint64_t>(t - 100) : static_cast<uint64_t>(3 * t);
        r.mutable_devices(i)->mutable_processes(0)->set_steps_total(steps);
      }
      engine.Process(r);
    }
  }
  const auto stragglers = rec.Of("job_straggler");
  ASSERT_EQ(stragglers.size(), 1u);
  EXPECT_EQ(stragglers[0].node(), "b");
  EXPECT_EQ(stragglers[0].device(), "0");
  EXPECT_EQ(Text(stragglers[0], "measure"), "step_rate");
}

TEST(JobStraggler, SilentWhenAllAreEquallySlowTooFewRanksOrTheJobIdles) {
  for (const auto& [a, b] : std::vector<std::pair<std::vector<double>, std::vector<double>>>{
           {{0.4, 0.4}, {0.4, 0.4}},   // everyone equally slow
           {{0.9}, {0.2}},             // 2 ranks: under min_ranks (4)
           {{0.1, 0.1}, {0.1, 0.01}},  // the job idles: job_stall's business, not a straggler
       }) {
    Engine engine;
    Recorder rec(engine);
    Fleet fleet;
    for (int64_t t = 0; t <= 600; t += 10) {
      engine.Process(fleet.Report("a", 1000 + t, Ranks(0, a)));
      engine.Process(fleet.Report("b", 1000 + t, Ranks(2, b)));
    }
    EXPECT_TRUE(rec.Of("job_straggler").empty()) << rec.Of("job_straggler")[0].summary();
  }
}

TEST(JobStraggler, RecoveredRankCloses) {
  Engine engine;
  Recorder rec(engine);
  Fleet fleet;
  for (int64_t t = 0; t <= 600; t += 10) {
    const bool slow = t >= 100 && t < 400;
    engine.Process(fleet.Report("a", 1000 + t, Ranks(0, {0.9, 0.9})));
    engine.Process(fleet.Report("b", 1000 + t, Ranks(2, {0.9, slow ? 0.3 : 0.9})));
  }
  ASSERT_EQ(rec.Of("job_straggler").size(), 1u);
  ASSERT_EQ(rec.closed.size(), 1u);
  EXPECT_EQ(rec.closed[0].end().seconds(), 1400);
}

// A node rule of the test's own: a device above 0.95 compute is "hot", from this report on.
class HotRule final : public Rule {
 public:
  void Observe(const v1::NodeReport& report, RuleContext& context) override {
    for (const v1::DeviceTelemetry& d : report.devices()) {
      if (d.utilization().compute_ratio() > 0.95) {
        Raised raised;
        raised.summary = "hot";
        context.Raise(DeviceSubject(d), std::move(raised));
      }
    }
  }
};

const RuleDefinition kHotRule[] = {
    {"hot", [](const Config&) -> std::unique_ptr<Rule> { return std::make_unique<HotRule>(); },
     [](const Config&) { return true; }},
};

TEST(FirstFault, ALaterFindingOfTheJobNamesTheFirstWithinTheWindow) {
  Config config;
  config.first_fault.window_seconds = 300;
  Engine engine(config, kHotRule);
  Recorder rec(engine);
  Fleet fleet;
  Dev hot{.compute = 0.99};
  Dev other_job{.compute = 0.99, .job = "K"};
  Dev no_job{.compute = 0.99, .job = ""};
  engine.Process(fleet.Report("a", 1000, {hot, kBusy}));                     // first fault
  engine.Process(fleet.Report("b", 1100, {kBusy, hot, other_job, no_job}));  // within 5m
  engine.Process(fleet.Report("a", 1350, {hot, hot}));  // 350 s after the first
  ASSERT_EQ(rec.opened.size(), 5u);
  EXPECT_EQ(rec.opened[0].job(), "J");
  EXPECT_EQ(rec.opened[0].consequence_of(), "");
  EXPECT_EQ(rec.opened[1].node(), "b");
  EXPECT_EQ(rec.opened[1].consequence_of(), "hot on a device 0");
  EXPECT_EQ(rec.opened[2].job(), "K");
  EXPECT_EQ(rec.opened[2].consequence_of(), "") << "another job";
  EXPECT_EQ(rec.opened[3].job(), "");
  EXPECT_EQ(rec.opened[3].consequence_of(), "") << "no job";
  EXPECT_EQ(rec.opened[4].device(), "1");
  EXPECT_EQ(rec.opened[4].consequence_of(), "hot on a device 0")
      << "follows b's finding (250 s later), itself a consequence of the first fault";
}

}  // namespace
}  // namespace diagnostics_job_rules_test
}  // namespace accelmon::diagnostics
