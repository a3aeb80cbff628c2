#include "collectors/sim.h"

#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <set>

namespace accelmon::collectors {
namespace sim_test {
namespace {

constexpr int64_t kStart = 1'700'000'000;

// Runs `ticks` collections, one every `step_s` seconds, and returns every report.
std::vector<v1::NodeReport> Simulate(SimOptions options, int ticks, int64_t step_s = 1) {
  SimCollector sim(options);
  std::vector<v1::NodeReport> reports;
  for (int i = 0; i < ticks; ++i) {
    v1::NodeReport r;
    r.mutable_timestamp()->set_seconds(kStart + i * step_s);
    sim.Collect(r);
    reports.push_back(std::move(r));
  }
  return reports;
}

TEST(Sim, SameSeedSameTelemetry) {
  const auto a = Simulate({.devices = 8, .seed = 42}, 50);
  const auto b = Simulate({.devices = 8, .seed = 42}, 50);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(a[i], b[i])) << "tick " << i;
  }
}

TEST(Sim, DifferentSeedsDiffer) {
  const auto a = Simulate({.devices = 2, .seed = 1}, 5);
  const auto b = Simulate({.devices = 2, .seed = 2}, 5);
  EXPECT_NE(a.back().devices(0).identity().uuid(), b.back().devices(0).identity().uuid());
  EXPECT_NE(a.back().devices(0).memory().used_bytes(), b.back().devices(0).memory().used_bytes());
}

TEST(Sim, NodeSeedsAreStableAndDistinct) {
  EXPECT_EQ(SimSeedForNode("node-1"), SimSeedForNode("node-1"));
  EXPECT_NE(SimSeedForNode("node-1"), SimSeedForNode("node-2"));
}

TEST(Sim, IdentityIsCompleteAndUnique) {
  const auto r = Simulate({.devices = 8, .seed = 3}, 1).back();
  ASSERT_EQ(r.devices_size(), 8);
  std::set<std::string> uuids, buses;
  for (int i = 0; i < 8; ++i) {
    const auto& id = r.devices(i).identity();
    EXPECT_EQ(id.index(), static_cast<uint32_t>(i));
    EXPECT_EQ(id.vendor(), "sim");
    EXPECT_FALSE(id.model().empty());
    EXPECT_FALSE(id.firmware_version().empty());
    uuids.insert(id.uuid());
    buses.insert(id.pci_bus_id());
    // Full NVLink mesh among 8 devices plus one PCIe link to the host.
    EXPECT_EQ(r.devices(i).links_size(), 8);
  }
  EXPECT_EQ(uuids.size(), 8u);
  EXPECT_EQ(buses.size(), 8u);
}

TEST(Sim, LinkPeersNameOtherDevices) {
  const auto r = Simulate({.devices = 4, .seed = 3}, 1).back();
  std::set<std::string> buses;
  for (const auto& d : r.devices()) buses.insert(d.identity().pci_bus_id());
  for (const auto& d : r.devices()) {
    for (const auto& l : d.links()) {
      if (l.kind() == v1::LINK_KIND_NVLINK) {
        EXPECT_TRUE(buses.contains(l.peer()));
        EXPECT_NE(l.peer(), d.identity().pci_bus_id());
      } else {
        EXPECT_EQ(l.peer(), "host");
      }
    }
  }
}

TEST(Sim, LargeNodesUseRingNeighbours) {
  const auto r = Simulate({.devices = 16, .seed = 3}, 1).back();
  EXPECT_EQ(r.devices(0).links_size(), 6 + 1);  // ±1..3 neighbours plus PCIe
}

TEST(Sim, CountersOnlyIncreaseAndValuesStayPlausible) {
  const auto reports = Simulate({.devices = 8, .seed = 9}, 2000, 5);  // ~2.8 simulated hours
  for (size_t t = 1; t < reports.size(); ++t) {
    for (int d = 0; d < 8; ++d) {
      const auto& prev = reports[t - 1].devices(d);
      const auto& cur = reports[t].devices(d);
      ASSERT_GE(cur.power().energy_joules_total(), prev.power().energy_joules_total());
      ASSERT_GE(cur.errors().ecc_corrected_total(), prev.errors().ecc_corrected_total());
      for (int l = 0; l < cur.links_size(); ++l) {
        ASSERT_GE(cur.links(l).transmit_bytes_total(), prev.links(l).transmit_bytes_total());
        ASSERT_GE(cur.links(l).receive_bytes_total(), prev.links(l).receive_bytes_total());
        ASSERT_LE(cur.links(l).transmit_bytes_total() - prev.links(l).transmit_bytes_total(),
                  static_cast<uint64_t>(cur.links(l).max_bandwidth_bytes_per_second() * 5 * 1.1))
            << "a link cannot carry more than its capacity";
      }
      const auto& m = cur.memory();
      ASSERT_EQ(m.used_bytes() + m.free_bytes() + m.reserved_bytes(), m.total_bytes());
      // The largest free block is the device's free memory or a block the job's allocator
      // cached, whichever is larger; never more than all of that free memory together.
      ASSERT_EQ(cur.processes_size(), 1);
      const auto& p = cur.processes(0);
      ASSERT_LE(p.allocated_bytes(), p.reserved_bytes());
      ASSERT_GE(m.largest_free_block_bytes(), m.free_bytes());
      ASSERT_LE(m.largest_free_block_bytes(),
                m.free_bytes() + p.reserved_bytes() - p.allocated_bytes());
      ASSERT_GE(m.fragmentation_ratio(), 0.0);
      ASSERT_LE(m.fragmentation_ratio(), 1.0);
      ASSERT_GE(cur.utilization().compute_ratio(), 0.0);
      ASSERT_LE(cur.utilization().compute_ratio(), 1.0);
      ASSERT_LE(cur.power().usage_watts(), cur.power().limit_watts());
      ASSERT_GT(cur.thermal().core_celsius(), 20.0);
      ASSERT_LT(cur.thermal().core_celsius(), cur.thermal().shutdown_threshold_celsius());
    }
  }
}

TEST(Sim, MemoryLoadsThenFragmentationCreepsUp) {
  const auto reports = Simulate({.devices = 1, .seed = 5}, 721, 30);  // 6 hours, every 30 s
  const auto& first = reports.front().devices(0).memory();
  const auto& loaded = reports[10].devices(0).memory();  // after the 90 s ramp
  const auto& late = reports.back().devices(0).memory();
  EXPECT_LT(first.used_bytes(), 8ULL << 30);
  EXPECT_GT(loaded.used_bytes(), 60ULL << 30);
  EXPECT_LT(reports[10].devices(0).memory().fragmentation_ratio(), 0.05);
  EXPECT_GT(late.fragmentation_ratio(), 0.1) << "fragmentation builds over hours";
  // Fragmented: the largest block is well below what is free on the device and in the cache.
  const auto& process = reports.back().devices(0).processes(0);
  EXPECT_LT(late.largest_free_block_bytes(),
            0.9 * static_cast<double>(late.free_bytes() + process.reserved_bytes() -
                                      process.allocated_bytes()));
}

TEST(Sim, EachDeviceRunsAJobWhoseProcessPushes) {
  const auto r = Simulate({.devices = 3, .seed = 4}, 2).back();
  std::set<uint32_t> pids;
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(r.devices(i).processes_size(), 1);
    const auto& p = r.devices(i).processes(0);
    EXPECT_EQ(p.job(), "sim-job");
    EXPECT_EQ(p.rank(), std::to_string(i));
    EXPECT_GT(p.pid(), 0u);
    pids.insert(p.pid());
    EXPECT_TRUE(p.has_reserved_bytes() && p.has_allocated_bytes() &&
                p.has_largest_free_block_bytes() && p.has_alloc_retries_total() &&
                p.has_ooms_total());
    // The device's memory holds the process's reservation.
    EXPECT_GE(r.devices(i).memory().used_bytes(), p.reserved_bytes());
  }
  EXPECT_EQ(pids.size(), 3u);
}

// By default every device holds one Slurm job across the fleet, with global ranks.
TEST(Sim, EveryDeviceHoldsTheDefaultJobWithItsGlobalRank) {
  const auto reports =
      Simulate({.devices = 4, .seed = 4, .node = "sim-2", .node_index = 2, .nodes = 3}, 121);
  const auto& r = reports.back();
  for (int i = 0; i < 4; ++i) {
    const auto& d = r.devices(i);
    ASSERT_EQ(d.holders_size(), 1);
    const auto& h = d.holders(0);
    const auto& p = d.processes(0);
    EXPECT_EQ(h.kind(), v1::HOLDER_KIND_SLURM);
    EXPECT_EQ(h.job(), "sim-job");
    EXPECT_EQ(h.step(), "0");
    EXPECT_EQ(h.user(), "sim");
    EXPECT_EQ(h.rank(), std::to_string(2 * 4 + i));
    EXPECT_EQ(h.world_size(), 12u);
    ASSERT_EQ(h.pids_size(), 1);
    EXPECT_EQ(h.pids(0), p.pid());
    EXPECT_EQ(h.memory_used_bytes(), d.memory().used_bytes());
    EXPECT_EQ(p.rank(), h.rank());
    EXPECT_EQ(p.world_size(), 12u);
    EXPECT_TRUE(h.pod().empty() && h.namespace_().empty()) << "absent, not made up";
  }
}

TEST(Sim, WithoutJobsNobodyHoldsTheDevices) {
  const auto r = Simulate({.devices = 2, .seed = 4, .jobs = false}, 2).back();
  for (const auto& d : r.devices()) {
    EXPECT_EQ(d.holders_size(), 0);
    ASSERT_EQ(d.processes_size(), 1) << "the process and its allocator are still there";
    EXPECT_EQ(d.processes(0).job(), "");
    EXPECT_EQ(d.processes(0).rank(), "");
    EXPECT_FALSE(d.processes(0).has_world_size());
  }
}

// Steps advance with the useful work: a busy device about 100 a second at full compute.
TEST(Sim, StepsAdvanceWithUsefulWork) {
  const auto reports = Simulate({.devices = 2, .seed = 4}, 301);
  const auto& early = reports[200].devices(0);
  const auto& late = reports[300].devices(0);
  const double rate =
      static_cast<double>(late.processes(0).steps_total() - early.processes(0).steps_total()) /
      100.0;
  EXPECT_NEAR(rate, 100 * late.utilization().compute_ratio(), 15);
  for (size_t t = 1; t < reports.size(); ++t) {
    EXPECT_GE(reports[t].devices(1).processes(0).steps_total(),
              reports[t - 1].devices(1).processes(0).steps_total());
  }
}

// Fragmentation builds while a job runs and starts over when the job restarts (a new process);
// its memory loads again. The restarts come from the seed, every few hours.
TEST(Sim, FragmentationResetsWhenTheJobRestarts) {
  const auto reports = Simulate({.devices = 1, .seed = 5}, 30 * 360 + 1, 10);  // 30 hours
  std::vector<size_t> restarts;
  for (size_t t = 1; t < reports.size(); ++t) {
    if (reports[t].devices(0).processes(0).pid() != reports[t - 1].devices(0).processes(0).pid()) {
      restarts.push_back(t);
    }
  }
  ASSERT_GE(restarts.size(), 2u) << "a job runs 6 to 10 hours";
  ASSERT_LE(restarts.size(), 5u);
  for (const size_t t : restarts) {
    SCOPED_TRACE(t);
    ASSERT_GE(t, 6 * 360u) << "not before 6 hours";
    ASSERT_LT(t + 30, reports.size());
    const auto& before = reports[t - 1].devices(0);
    const auto& after = reports[t].devices(0);
    EXPECT_GT(before.memory().fragmentation_ratio(), 0.1);
    EXPECT_LT(after.memory().fragmentation_ratio(), 0.05) << "a new process, a clean cache";
    EXPECT_LT(after.memory().used_bytes(), 16ULL << 30) << "the new job loads its weights again";
    EXPECT_GT(reports[t + 30].devices(0).memory().used_bytes(), 60ULL << 30);
    EXPECT_EQ(after.processes(0).alloc_retries_total(), 0u) << "a new process counts anew";
  }
  // Deterministic from the seed.
  const auto again = Simulate({.devices = 1, .seed = 5}, 30 * 360 + 1, 10);
  EXPECT_EQ(again[restarts[0]].devices(0).processes(0).pid(),
            reports[restarts[0]].devices(0).processes(0).pid());
  EXPECT_NE(again[restarts[0] - 1].devices(0).processes(0).pid(),
            again[restarts[0]].devices(0).processes(0).pid());
}

TEST(Sim, ClockSteppingBackDoesNotRewindCounters) {
  SimCollector sim({.devices = 1, .seed = 1});
  v1::NodeReport a, b, c;
  a.mutable_timestamp()->set_seconds(kStart);
  b.mutable_timestamp()->set_seconds(kStart + 100);
  c.mutable_timestamp()->set_seconds(kStart + 50);  // NTP stepped the clock back
  sim.Collect(a);
  sim.Collect(b);
  sim.Collect(c);
  EXPECT_GE(c.devices(0).power().energy_joules_total(), b.devices(0).power().energy_joules_total());
  EXPECT_GE(c.devices(0).links(0).transmit_bytes_total(),
            b.devices(0).links(0).transmit_bytes_total());
}

// Healthy devices stay clear of the memory_fragmentation rule (0.5), however long the job runs.
TEST(Sim, HealthyFragmentationStaysBelowTheRule) {
  const auto reports = Simulate({.devices = 8, .seed = 11}, 12 * 60 + 1, 60);  // 12 hours
  for (const auto& r : reports) {
    for (const auto& d : r.devices()) ASSERT_LT(d.memory().fragmentation_ratio(), 0.45);
  }
}

TEST(Sim, ZeroDevicesReportsNothing) {
  EXPECT_EQ(Simulate({.devices = 0, .seed = 1}, 3).back().devices_size(), 0);
}

}  // namespace
}  // namespace sim_test
}  // namespace accelmon::collectors
