#include "collectors/sim_scenario.h"

#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "collectors/sim.h"

namespace accelmon::collectors {
namespace sim_scenario_test {
namespace {

using google::protobuf::util::MessageDifferencer;

constexpr int64_t kStart = 1'700'000'000;

std::shared_ptr<const Scenario> Parse(const std::string& yaml) {
  return std::make_shared<const Scenario>(ParseScenario(yaml, "test.yaml"));
}

// `ticks` reports, one every `step_s` seconds, of a 4-device node named "sim-0" playing `yaml`
// ("" for a healthy node).
std::vector<v1::NodeReport> Play(const std::string& yaml, int ticks, int64_t step_s = 1,
                                 const std::string& node = "sim-0", int devices = 4) {
  SimCollector sim({.devices = devices,
                    .seed = 7,
                    .scenario = yaml.empty() ? nullptr : Parse(yaml),
                    .node = node});
  std::vector<v1::NodeReport> reports;
  for (int i = 0; i < ticks; ++i) {
    v1::NodeReport r;
    r.mutable_timestamp()->set_seconds(kStart + i * step_s);
    sim.Collect(r);
    reports.push_back(std::move(r));
  }
  return reports;
}

std::string ErrorOf(const std::string& yaml) {
  try {
    ParseScenario(yaml, "test.yaml");
  } catch (const ScenarioError& e) {
    return e.what();
  }
  return "(no error)";
}

// Until `onset` (a report index), the faulted run is exactly the healthy one.
void ExpectHealthyBefore(const std::vector<v1::NodeReport>& faulted, size_t onset) {
  const auto healthy = Play(
      "", static_cast<int>(onset),
      faulted.size() > 1 ? faulted[1].timestamp().seconds() - faulted[0].timestamp().seconds() : 1);
  for (size_t i = 0; i < onset; ++i) {
    ASSERT_TRUE(MessageDifferencer::Equals(healthy[i], faulted[i])) << "report " << i;
  }
}

TEST(SimScenarioParse, ReadsFaultsWithDefaults) {
  const auto s = Parse(R"(faults:
  - at: 10m
    fault: thermal_ramp
    device: 3
    node: sim-2
    duration: 20m
    to: 92.5
  - at: 1.5h
    fault: link_burst
    device: all
  - {at: 500ms, fault: leak, rate: 1GiB}
)");
  ASSERT_EQ(s->faults.size(), 3u);
  const Fault& ramp = s->faults[0];
  EXPECT_EQ(ramp.kind, FaultKind::kThermalRamp);
  EXPECT_EQ(ramp.line, 2);
  EXPECT_EQ(ramp.at_s, 600);
  EXPECT_EQ(ramp.device, 3);
  EXPECT_EQ(ramp.node, "sim-2");
  EXPECT_EQ(ramp.duration_s, 1200);
  EXPECT_EQ(ramp.to, 92.5);
  EXPECT_EQ(ramp.over_s, 600);
  EXPECT_EQ(s->faults[1].at_s, 5400);
  EXPECT_EQ(s->faults[1].device, -1);
  EXPECT_EQ(s->faults[1].period_s, 20) << "link_burst's own default";
  EXPECT_EQ(s->faults[1].link, "nvlink0");
  EXPECT_EQ(s->faults[2].rate, 1024.0 * 1024 * 1024);
  EXPECT_EQ(s->faults[2].at_s, 0.5);
  EXPECT_EQ(Parse("faults:\n  - {at: 0s, fault: thermal_spike}\n")->faults[0].duration_s, 20);
  EXPECT_EQ(Parse("faults:\n  - {at: 0s, fault: pause}\n")->faults[0].duration_s, 60);
  EXPECT_TRUE(Parse("")->faults.empty());
}

TEST(SimScenarioParse, ErrorsNameFileAndLine) {
  EXPECT_EQ(ErrorOf("faults:\n  - at: 10m\n    fault: stall\n    devcie: 2\n"),
            "test.yaml:4: unknown key \"devcie\" for fault stall");
  EXPECT_EQ(ErrorOf("faults:\n  - at: 10m\n    fault: stall\n    to: 90\n"),
            "test.yaml:4: unknown key \"to\" for fault stall");
  EXPECT_EQ(ErrorOf("fault:\n  - at: 10m\n"),
            "test.yaml:1: unknown key \"fault\" (faults:, jobs:, expect: or allow:)");
  EXPECT_NE(
      ErrorOf("faults:\n  - at: 1m\n    fault: melt\n").find("test.yaml:3: unknown fault \"melt\""),
      std::string::npos);
  EXPECT_EQ(
      ErrorOf("faults:\n  - at: 10 minutes\n    fault: stall\n"),
      "test.yaml:2: at: \"10 minutes\" is not a duration (examples: 500ms, 30s, 10m, 2h, 1d)");
  EXPECT_EQ(ErrorOf("faults:\n  - fault: stall\n"), "test.yaml:2: at is missing (e.g. at: 10m)");
  EXPECT_EQ(ErrorOf("faults:\n  - at: 1m\n    fault: thermal_ramp\n    to: hot\n"),
            "test.yaml:4: to: \"hot\" is not a number");
  EXPECT_EQ(ErrorOf("faults:\n  - at: 1m\n    fault: leak\n    rate: [1]\n"),
            "test.yaml:4: rate must be a string");
  EXPECT_EQ(ErrorOf("faults:\n  - at: 1m\n    fault: stall\n    device: two\n"),
            "test.yaml:4: device (an index or \"all\"): \"two\" is not a number");
  EXPECT_EQ(ErrorOf("faults: [\n"), ErrorOf("faults: [\n"));
  EXPECT_EQ(ErrorOf("faults: [\n").rfind("test.yaml:", 0), 0u);
}

TEST(SimScenarioParse, JobsAreStrictAndNameTheLine) {
  const auto jobs = ParseScenario(
      "jobs:\n  - id: \"4711\"\n    nodes: [a, b]\n    devices: [1, 0]\n    user: alice\n"
      "  - {id: t, kind: pod, pod: \"p-{rank}\", namespace: ml}\n",
      "test.yaml");
  ASSERT_EQ(jobs.jobs.size(), 2u);
  EXPECT_EQ(jobs.jobs[0].id, "4711");
  EXPECT_FALSE(jobs.jobs[0].pod);
  EXPECT_EQ(jobs.jobs[0].nodes, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(jobs.jobs[0].devices, (std::vector<int>{1, 0}));
  EXPECT_EQ(jobs.jobs[0].user, "alice");
  EXPECT_EQ(jobs.jobs[0].line, 2);
  EXPECT_TRUE(jobs.jobs[1].pod);
  EXPECT_EQ(jobs.jobs[1].pod_namespace, "ml");
  EXPECT_EQ(ErrorOf("jobs:\n  - id: a\n    nodse: [x]\n"),
            "test.yaml:3: unknown key \"nodse\" for a job (id, kind, nodes, devices, user, pod, "
            "namespace)");
  EXPECT_EQ(ErrorOf("jobs:\n  - kind: pod\n"), "test.yaml:2: id is missing (e.g. id: \"4711\")");
  EXPECT_EQ(ErrorOf("jobs:\n  - {id: a, kind: k8s}\n"),
            "test.yaml:2: kind: \"k8s\" is not slurm or pod");
  EXPECT_EQ(ErrorOf("jobs:\n  - {id: a, pod: x}\n"),
            "test.yaml:2: pod and namespace are for kind: pod");
  EXPECT_EQ(ErrorOf("jobs:\n  - {id: a}\n  - {id: a}\n"), "test.yaml:3: job a is listed twice");
  EXPECT_EQ(ErrorOf("jobs:\n  - {id: a, devices: [0, 0]}\n"),
            "test.yaml:2: device 0 is listed twice");
  EXPECT_EQ(ErrorOf("faults:\n  - {at: 1m, fault: straggler, facter: 0.5}\n"),
            "test.yaml:2: unknown key \"facter\" for fault straggler");
}

TEST(SimScenarioParse, LoadScenarioNamesTheFile) {
  const auto path = std::filesystem::temp_directory_path() / "sim_scenario_test_bad.yaml";
  std::ofstream(path) << "# a comment\nfaults:\n  - at: 1m\n    fault: stall\n    bogus: 1\n";
  try {
    LoadScenario(path.string());
    FAIL() << "no error";
  } catch (const ScenarioError& e) {
    EXPECT_EQ(std::string(e.what()), path.string() + ":5: unknown key \"bogus\" for fault stall");
  }
  std::filesystem::remove(path);
  EXPECT_THROW(LoadScenario("/nonexistent/x.yaml"), ScenarioError);
}

TEST(SimScenario, DeviceOrLinkOutOfRangeIsAnErrorWithTheLine) {
  try {
    Play("faults:\n  - at: 1m\n    fault: stall\n    device: 4\n", 1);
    FAIL() << "no error";
  } catch (const ScenarioError& e) {
    EXPECT_EQ(std::string(e.what()),
              "test.yaml:2: device 4 is out of range: the simulation has 4 device(s)");
  }
  EXPECT_THROW(Play("faults:\n  - {at: 1m, fault: link_down, link: nvlink3}\n", 1), ScenarioError);
  EXPECT_NO_THROW(Play("faults:\n  - {at: 1m, fault: link_down, link: nvlink2}\n", 1));
  EXPECT_NO_THROW(Play("faults:\n  - {at: 1m, fault: link_down, link: pcie, device: all}\n", 1));
  EXPECT_THROW(CheckSimScenario(*Parse("faults:\n  - {at: 1m, fault: xid, device: 8}\n"), 8),
               ScenarioError);
  EXPECT_NO_THROW(CheckSimScenario(*Parse("faults:\n  - {at: 1m, fault: xid, device: 7}\n"), 8));
}

TEST(SimScenario, FragmentationCreep) {
  const auto r = Play("faults:\n  - {at: 100s, fault: fragmentation_creep, device: 1}\n", 80, 10);
  ExpectHealthyBefore(r, 10);
  const auto healthy = Play("", 80, 10);
  EXPECT_LT(r[9].devices(1).memory().fragmentation_ratio(), 0.1);
  EXPECT_LT(r[40].devices(1).memory().fragmentation_ratio(), 0.7) << "a ramp, not a step";
  EXPECT_GT(r[40].devices(1).memory().fragmentation_ratio(), 0.3);
  EXPECT_NEAR(r[75].devices(1).memory().fragmentation_ratio(), 0.85, 0.03);
  EXPECT_LT(r[75].devices(0).memory().fragmentation_ratio(), 0.1) << "only device 1";
  // The job's memory stays allocated as it was.
  EXPECT_EQ(r[75].devices(1).processes(0).allocated_bytes(),
            healthy[75].devices(1).processes(0).allocated_bytes());
}

TEST(SimScenario, ThermalRampThrottles) {
  const auto r =
      Play("faults:\n  - {at: 200s, fault: thermal_ramp, device: 2, over: 5m}\n", 120, 10);
  ExpectHealthyBefore(r, 20);
  const auto healthy = Play("", 120, 10);
  const auto& before = r[19].devices(2).thermal();
  EXPECT_FALSE(before.throttle_reasons().at("hw_thermal"));
  const auto& late = r[119].devices(2);
  EXPECT_GT(late.thermal().core_celsius(), 89);
  EXPECT_TRUE(late.thermal().throttle_reasons().at("hw_thermal"));
  EXPECT_LT(late.utilization().compute_ratio(),
            0.8 * healthy[119].devices(2).utilization().compute_ratio());
  EXPECT_FALSE(r[119].devices(1).thermal().throttle_reasons().at("hw_thermal"));
}

TEST(SimScenario, ThermalSpikeIsBriefAndBelowSlowdown) {
  const auto r = Play("faults:\n  - {at: 300s, fault: thermal_spike}\n", 420);
  ExpectHealthyBefore(r, 300);
  EXPECT_NEAR(r[305].devices(0).thermal().core_celsius(), 86, 1.5);
  for (const auto& report : r) {
    EXPECT_FALSE(report.devices(0).thermal().throttle_reasons().at("hw_thermal"));
  }
  EXPECT_LT(r[419].devices(0).thermal().core_celsius(), 83) << "cools after 20 s";
}

TEST(SimScenario, PowerThrottleSetsSwPowerCapForItsDurationOnly) {
  const auto r = Play("faults:\n  - {at: 10s, fault: power_throttle, duration: 10s}\n", 30);
  ExpectHealthyBefore(r, 10);
  EXPECT_TRUE(r[10].devices(0).thermal().throttle_reasons().at("sw_power_cap"));
  EXPECT_TRUE(r[19].devices(0).thermal().throttle_reasons().at("sw_power_cap"));
  EXPECT_FALSE(r[20].devices(0).thermal().throttle_reasons().at("sw_power_cap"));
}

TEST(SimScenario, LinkDownStopsItsCounters) {
  const auto r = Play("faults:\n  - {at: 120s, fault: link_down, link: nvlink1}\n", 130);
  ExpectHealthyBefore(r, 120);
  const auto& before = r[119].devices(0);
  const auto& after = r[129].devices(0);
  EXPECT_TRUE(before.links(1).up());
  EXPECT_FALSE(after.links(1).up());
  EXPECT_EQ(after.links(1).name(), "nvlink1");
  EXPECT_EQ(after.links(1).transmit_bytes_total(),
            r[120].devices(0).links(1).transmit_bytes_total());
  EXPECT_EQ(after.links(1).transmit_bytes_total(), before.links(1).transmit_bytes_total());
  EXPECT_TRUE(after.links(0).up());
  EXPECT_GT(after.links(0).transmit_bytes_total(), before.links(0).transmit_bytes_total());
}

TEST(SimScenario, LinkFlapToggles) {
  const auto r = Play("faults:\n  - {at: 100s, fault: link_flap, period: 30s}\n", 20, 10);
  ExpectHealthyBefore(r, 10);
  const std::vector<bool> up = {false, false, false, true, true, true, false, false, false, true};
  for (size_t i = 0; i < up.size(); ++i) {
    EXPECT_EQ(r[10 + i].devices(0).links(0).up(), up[i]) << i;
  }
}

TEST(SimScenario, LinkDegradeHalvesPcie) {
  const auto r = Play("faults:\n  - {at: 100s, fault: link_degrade, link: pcie}\n", 120);
  ExpectHealthyBefore(r, 100);
  const auto& before = r[99].devices(0).links(3);
  const auto& after = r[110].devices(0).links(3);
  ASSERT_EQ(after.kind(), v1::LINK_KIND_PCIE);
  EXPECT_EQ(before.pcie_width(), 16u);
  EXPECT_EQ(after.pcie_width(), 8u);
  EXPECT_EQ(after.pcie_generation(), 5u);
  EXPECT_EQ(after.max_bandwidth_bytes_per_second(), before.max_bandwidth_bytes_per_second() / 2);
}

TEST(SimScenario, LinkDegradeTrafficAndBurst) {
  const auto healthy = Play("", 200);
  const auto low =
      Play("faults:\n  - {at: 100s, fault: link_degrade, capacity: 1, traffic: 0.1}\n", 200);
  const auto burst = Play("faults:\n  - {at: 100s, fault: link_burst}\n", 200);
  const auto moved = [](const std::vector<v1::NodeReport>& r, size_t from, size_t to) {
    return static_cast<double>(r[to].devices(0).links(0).transmit_bytes_total() -
                               r[from].devices(0).links(0).transmit_bytes_total());
  };
  EXPECT_NEAR(moved(low, 150, 190) / moved(healthy, 150, 190), 0.1, 0.03);
  EXPECT_EQ(low[150].devices(0).links(0).max_bandwidth_bytes_per_second(),
            healthy[150].devices(0).links(0).max_bandwidth_bytes_per_second());
  // Bursting: 2x for 20 s (up to the link's capacity), then 0.2x.
  EXPECT_GT(moved(burst, 100, 119) / moved(healthy, 100, 119), 1.2);
  EXPECT_NEAR(moved(burst, 120, 139) / moved(healthy, 120, 139), 0.2, 0.05);
}

TEST(SimScenario, StallFreezesEverything) {
  const auto r = Play("faults:\n  - {at: 200s, fault: stall, device: all}\n", 260);
  ExpectHealthyBefore(r, 200);
  for (int d = 0; d < 4; ++d) {
    const auto& before = r[199].devices(d);
    for (size_t t = 200; t < 260; ++t) {
      const auto& cur = r[t].devices(d);
      ASSERT_LE(cur.utilization().compute_ratio(), 0.01);
      ASSERT_LE(cur.utilization().memory_bandwidth_ratio(), 0.01);
      ASSERT_EQ(cur.memory().used_bytes(), before.memory().used_bytes());
      ASSERT_EQ(cur.processes(0).allocated_bytes(), before.processes(0).allocated_bytes());
      for (int l = 0; l < cur.links_size(); ++l) {
        ASSERT_TRUE(cur.links(l).up());
        ASSERT_EQ(cur.links(l).transmit_bytes_total(),
                  r[200].devices(d).links(l).transmit_bytes_total());
      }
    }
  }
}

TEST(SimScenario, PauseEndsAfterAMinute) {
  const auto r = Play("faults:\n  - {at: 200s, fault: pause, device: all}\n", 300);
  EXPECT_LE(r[259].devices(0).utilization().compute_ratio(), 0.01);
  EXPECT_GT(r[260].devices(0).utilization().compute_ratio(), 0.5);
  EXPECT_GT(r[262].devices(0).links(0).transmit_bytes_total(),
            r[261].devices(0).links(0).transmit_bytes_total());
}

TEST(SimScenario, JobEndFreesMemoryThenRestarts) {
  const auto r = Play("faults:\n  - {at: 200s, fault: job_end, duration: 100s}\n", 420);
  ExpectHealthyBefore(r, 200);
  const auto& ended = r[250].devices(0);
  EXPECT_EQ(ended.processes_size(), 0);
  EXPECT_EQ(ended.memory().used_bytes(), 0u);
  EXPECT_EQ(ended.utilization().compute_ratio(), 0);
  EXPECT_EQ(ended.links(0).transmit_bytes_total(),
            r[200].devices(0).links(0).transmit_bytes_total());
  const auto& back = r[300].devices(0);
  ASSERT_EQ(back.processes_size(), 1);
  EXPECT_NE(back.processes(0).pid(), r[199].devices(0).processes(0).pid()) << "a new process";
  EXPECT_LT(back.memory().used_bytes(), 16ULL << 30) << "loading again";
  EXPECT_GT(r[419].devices(0).memory().used_bytes(), 60ULL << 30);
  EXPECT_EQ(r[250].devices(1).processes_size(), 1) << "only device 0";
}

TEST(SimScenario, ThroughputDropScalesComputeButNotMemory) {
  const auto healthy = Play("", 300);
  const auto r = Play("faults:\n  - {at: 200s, fault: throughput_drop, factor: 0.3}\n", 300);
  ExpectHealthyBefore(r, 200);
  EXPECT_NEAR(r[250].devices(0).utilization().compute_ratio(),
              0.3 * healthy[250].devices(0).utilization().compute_ratio(), 0.05);
  EXPECT_EQ(r[250].devices(0).processes(0).allocated_bytes(),
            healthy[250].devices(0).processes(0).allocated_bytes());
}

TEST(SimScenario, StragglerSlowsComputeStepsAndLinksOfItsDevice) {
  const auto healthy = Play("", 300);
  const auto r = Play("faults:\n  - {at: 200s, fault: straggler, device: 1}\n", 300);
  ExpectHealthyBefore(r, 200);
  const auto& slow = r[250].devices(1);
  EXPECT_NEAR(slow.utilization().compute_ratio(),
              0.6 * healthy[250].devices(1).utilization().compute_ratio(), 0.05);
  const auto steps = [](const std::vector<v1::NodeReport>& run, int d) {
    return static_cast<double>(run[299].devices(d).processes(0).steps_total() -
                               run[200].devices(d).processes(0).steps_total());
  };
  EXPECT_NEAR(steps(r, 1) / steps(healthy, 1), 0.6, 0.05);
  EXPECT_NEAR(steps(r, 0) / steps(healthy, 0), 1.0, 1e-9) << "the other devices run as before";
  const auto link_bytes = [](const std::vector<v1::NodeReport>& run, int d) {
    return static_cast<double>(run[299].devices(d).links(0).transmit_bytes_total() -
                               run[200].devices(d).links(0).transmit_bytes_total());
  };
  EXPECT_NEAR(link_bytes(r, 1) / link_bytes(healthy, 1), 0.6, 0.05);
}

TEST(SimScenario, JobsPlaceHoldersWithRanksAndLeaveOtherDevicesIdle) {
  const std::string yaml =
      "jobs:\n"
      "  - {id: \"4711\", nodes: [sim-9, sim-0], devices: [2, 0], user: alice}\n"
      "  - {id: t, kind: pod, nodes: [sim-0], devices: [3], pod: \"trainer-{node}-{rank}\", "
      "namespace: ml}\n";
  const auto r = Play(yaml, 200).back();
  const auto& d2 = r.devices(2);
  ASSERT_EQ(d2.holders_size(), 1);
  EXPECT_EQ(d2.holders(0).job(), "4711");
  EXPECT_EQ(d2.holders(0).kind(), v1::HOLDER_KIND_SLURM);
  EXPECT_EQ(d2.holders(0).user(), "alice");
  EXPECT_EQ(d2.holders(0).rank(), "2") << "second node of the job, first of its devices";
  EXPECT_EQ(d2.holders(0).world_size(), 4u);
  EXPECT_EQ(r.devices(0).holders(0).rank(), "3");
  const auto& d3 = r.devices(3);
  ASSERT_EQ(d3.holders_size(), 1);
  EXPECT_EQ(d3.holders(0).kind(), v1::HOLDER_KIND_POD);
  EXPECT_EQ(d3.holders(0).pod(), "trainer-sim-0-0");
  EXPECT_EQ(d3.holders(0).namespace_(), "ml");
  EXPECT_EQ(d3.holders(0).container(), "trainer");
  EXPECT_EQ(d3.processes(0).job(), "t");
  // Device 1 is in no job: nobody holds it, it idles.
  const auto& d1 = r.devices(1);
  EXPECT_EQ(d1.holders_size(), 0);
  EXPECT_EQ(d1.processes_size(), 0);
  EXPECT_EQ(d1.utilization().compute_ratio(), 0);
  // A node in no job holds nothing at all.
  const auto elsewhere = Play(yaml, 2, 1, "sim-5");
  for (const auto& d : elsewhere.back().devices()) EXPECT_EQ(d.holders_size(), 0);
}

TEST(SimScenario, JobsOutOfRangeOrSharedDevicesAreErrors) {
  const auto error = [](const std::string& yaml) {
    try {
      SimCollector sim({.devices = 4, .seed = 1, .scenario = Parse(yaml), .node = "sim-0"});
    } catch (const ScenarioError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_EQ(error("jobs:\n  - {id: a, devices: [4]}\n"),
            "test.yaml:2: job a: device 4 is out of range: the simulation has 4 device(s)");
  EXPECT_EQ(error("jobs:\n  - {id: a, devices: [1]}\n  - {id: b, devices: [0, 1]}\n"),
            "test.yaml:3: job b: device 1 of node sim-0 is already held by job a");
}

TEST(SimScenario, LeakGrowsUntilFull) {
  const auto healthy = Play("", 70, 60);
  const auto r = Play("faults:\n  - {at: 5m, fault: leak, rate: 16MiB}\n", 70, 60);
  ExpectHealthyBefore(r, 5);
  const auto grown = r[10].devices(0).processes(0).allocated_bytes() -
                     healthy[10].devices(0).processes(0).allocated_bytes();
  EXPECT_NEAR(static_cast<double>(grown), 300.0 * 16 * 1024 * 1024, 1e6);
  const auto& full = r[69].devices(0).memory();
  EXPECT_LT(full.free_bytes(), 1ULL << 30);
  EXPECT_EQ(full.used_bytes() + full.free_bytes() + full.reserved_bytes(), full.total_bytes());
}

TEST(SimScenario, EccBurstAddsUncorrectedAtOnceAndCorrectedOverItsDuration) {
  const auto r = Play(
      "faults:\n  - {at: 100s, fault: ecc_burst, corrected: 100, uncorrected: 2, duration: 100s}\n",
      300);
  ExpectHealthyBefore(r, 100);
  const auto healthy = Play("", 300);
  EXPECT_EQ(r[100].devices(0).errors().ecc_uncorrected_total(), 2u);
  EXPECT_EQ(r[299].devices(0).errors().ecc_uncorrected_total(), 2u);
  EXPECT_EQ(r[150].devices(0).errors().ecc_corrected_total(),
            healthy[150].devices(0).errors().ecc_corrected_total() + 50);
  EXPECT_EQ(r[299].devices(0).errors().ecc_corrected_total(),
            healthy[299].devices(0).errors().ecc_corrected_total() + 100);
}

int CountEvents(const std::vector<v1::NodeReport>& r, v1::EventKind kind) {
  int n = 0;
  for (const auto& report : r) {
    for (const auto& e : report.events()) n += e.kind() == kind;
  }
  return n;
}

TEST(SimScenario, XidEventOnceAtOnset) {
  const auto r = Play("faults:\n  - {at: 50s, fault: xid, device: 2, code: 48}\n", 100);
  ExpectHealthyBefore(r, 50);
  EXPECT_EQ(CountEvents(r, v1::EVENT_KIND_XID), 1);
  ASSERT_EQ(r[50].events_size(), 1);
  const auto& e = r[50].events(0);
  EXPECT_EQ(e.code(), 48u);
  EXPECT_EQ(e.device_index(), 2u);
  EXPECT_EQ(e.device_uuid(), r[50].devices(2).identity().uuid());
  EXPECT_EQ(e.message(), "XID 48 (simulated)");
  EXPECT_EQ(e.time().seconds(), kStart + 50);
}

TEST(SimScenario, DeviceLostReportsOnlyIdentity) {
  const auto r = Play("faults:\n  - {at: 50s, fault: device_lost, device: 1}\n", 60);
  ExpectHealthyBefore(r, 50);
  EXPECT_EQ(CountEvents(r, v1::EVENT_KIND_DEVICE_LOST), 1);
  EXPECT_EQ(r[50].events(0).device_index(), 1u);
  const auto& lost = r[55].devices(1);
  EXPECT_FALSE(lost.up());
  EXPECT_TRUE(lost.has_up());
  EXPECT_EQ(lost.identity().uuid(), r[49].devices(1).identity().uuid());
  EXPECT_FALSE(lost.has_memory());
  EXPECT_FALSE(lost.has_thermal());
  EXPECT_FALSE(lost.has_power());
  EXPECT_FALSE(lost.has_utilization());
  EXPECT_FALSE(lost.has_clocks());
  EXPECT_FALSE(lost.has_errors());
  EXPECT_EQ(lost.links_size(), 0);
  EXPECT_EQ(lost.processes_size(), 0);
  EXPECT_TRUE(r[55].devices(0).up());
}

TEST(SimScenario, FirmwareAndOomKill) {
  const auto r = Play(
      "faults:\n  - {at: 10s, fault: firmware, version: 0.8.1}\n"
      "  - {at: 20s, fault: oom_kill, count: 3}\n",
      40);
  ExpectHealthyBefore(r, 10);
  EXPECT_EQ(r[9].devices(0).identity().firmware_version(), "1.0.0-sim");
  EXPECT_EQ(r[10].devices(0).identity().firmware_version(), "0.8.1");
  EXPECT_EQ(r[10].devices(1).identity().firmware_version(), "1.0.0-sim");
  EXPECT_EQ(CountEvents(r, v1::EVENT_KIND_OOM_KILL), 3);
  ASSERT_EQ(r[20].events_size(), 3);
  EXPECT_FALSE(r[20].events(0).has_device_index());
  EXPECT_NE(r[20].events(0).message().find("(python) (simulated)"), std::string::npos);
  EXPECT_FALSE(r[20].has_host()) << "host values come from real host collectors";
}

TEST(SimScenario, AFaultForOneNodeLeavesOtherNodesAlone) {
  const std::string yaml = "faults:\n  - {at: 10s, fault: xid, node: sim-1}\n";
  EXPECT_EQ(CountEvents(Play(yaml, 20, 1, "sim-0"), v1::EVENT_KIND_XID), 0);
  EXPECT_EQ(CountEvents(Play(yaml, 20, 1, "sim-1"), v1::EVENT_KIND_XID), 1);
}

TEST(SimScenario, TheSameScenarioPlaysTheSameReports) {
  const std::string yaml =
      "faults:\n  - {at: 30s, fault: link_flap, device: all, period: 5s}\n"
      "  - {at: 40s, fault: thermal_ramp, device: 1}\n  - {at: 50s, fault: xid}\n";
  const auto a = Play(yaml, 90);
  const auto b = Play(yaml, 90);
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_TRUE(MessageDifferencer::Equals(a[i], b[i])) << "report " << i;
  }
}

TEST(SimScenario, CountersNeverDecreaseUnderFaults) {
  const auto r = Play(
      "faults:\n  - {at: 30s, fault: link_flap, device: all, period: 5s}\n"
      "  - {at: 40s, fault: stall, device: all, duration: 20s}\n"
      "  - {at: 70s, fault: job_end, device: 2, duration: 20s}\n"
      "  - {at: 80s, fault: ecc_burst, corrected: 9, duration: 30s}\n",
      150);
  for (size_t t = 1; t < r.size(); ++t) {
    for (int d = 0; d < 4; ++d) {
      const auto& prev = r[t - 1].devices(d);
      const auto& cur = r[t].devices(d);
      ASSERT_GE(cur.power().energy_joules_total(), prev.power().energy_joules_total());
      ASSERT_GE(cur.errors().ecc_corrected_total(), prev.errors().ecc_corrected_total());
      for (int l = 0; l < cur.links_size(); ++l) {
        ASSERT_GE(cur.links(l).transmit_bytes_total(), prev.links(l).transmit_bytes_total());
      }
    }
  }
}

// The shipped scenarios all load and fit an 8-device node.
TEST(SimScenario, EveryFixtureScenarioLoadsAndChecks) {
  int n = 0;
  for (const auto& entry :
       std::filesystem::directory_iterator(ACCELMON_FIXTURES_DIR "/scenarios")) {
    SCOPED_TRACE(entry.path().string());
    const Scenario s = LoadScenario(entry.path().string());
    EXPECT_FALSE(s.faults.empty());
    EXPECT_NO_THROW(CheckSimScenario(s, 8));
    ++n;
  }
  EXPECT_GE(n, 18);
}

}  // namespace
}  // namespace sim_scenario_test
}  // namespace accelmon::collectors
