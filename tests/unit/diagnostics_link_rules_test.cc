// The link and job rules (link_down, link_degraded, link_flapping, job_stall, throughput_drop) on
// handcrafted report sequences fed through the engine with the default config.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "diagnostics/engine.h"

namespace accelmon::diagnostics {
namespace diagnostics_link_rules_test {
namespace {

constexpr int64_t kLrT0Seconds = 1'700'000'000;
constexpr double kLrGiB = 1024.0 * 1024 * 1024;

struct LrLink {
  std::string name;
  v1::LinkKind kind = v1::LINK_KIND_NVLINK;
  std::optional<bool> up = true;
  double rate = 0;       // tx+rx bytes/s from now on
  bool counters = true;  // reports byte counters
  double total = 0;      // tx+rx bytes so far
  std::optional<double> capacity = 50e9;
  std::optional<uint32_t> pcie_generation = std::nullopt;
  std::optional<uint32_t> pcie_width = std::nullopt;
};

struct LrDevice {
  std::optional<double> compute;
  std::optional<double> used_bytes;
  std::string job;       // a process of this job when set
  bool process = false;  // a process without a job
  std::vector<LrLink> links;
};

// One node whose state the test sets; Next() advances time by one interval and builds the report.
class LrNode {
 public:
  explicit LrNode(double interval) : interval_(interval) {}

  std::vector<LrDevice> devices;
  std::vector<LrLink> host_links;

  double now() const { return t_; }

  v1::NodeReport Next() {
    t_ += interval_;
    v1::NodeReport r;
    r.set_node("lr-node");
    const int64_t ns = kLrT0Seconds * 1'000'000'000LL + static_cast<int64_t>(t_ * 1e9);
    r.mutable_timestamp()->set_seconds(ns / 1'000'000'000);
    r.mutable_timestamp()->set_nanos(static_cast<int32_t>(ns % 1'000'000'000));
    for (size_t i = 0; i < devices.size(); ++i) {
      LrDevice& d = devices[i];
      v1::DeviceTelemetry* out = r.add_devices();
      out->mutable_identity()->set_vendor("sim");
      out->mutable_identity()->set_index(static_cast<uint32_t>(i));
      out->mutable_identity()->set_uuid("GPU-lr-" + std::to_string(i));
      if (d.compute) out->mutable_utilization()->set_compute_ratio(*d.compute);
      if (d.used_bytes) out->mutable_memory()->set_used_bytes(static_cast<uint64_t>(*d.used_bytes));
      out->mutable_memory()->set_total_bytes(static_cast<uint64_t>(141 * kLrGiB));
      if (!d.job.empty() || d.process) {
        v1::ProcessMemory* p = out->add_processes();
        p->set_pid(1000 + static_cast<uint32_t>(i));
        p->set_job(d.job);
      }
      for (LrLink& l : d.links) AddLink(l, out->add_links());
    }
    for (LrLink& l : host_links) AddLink(l, r.mutable_host()->add_links());
    return r;
  }

 private:
  void AddLink(LrLink& l, v1::Link* out) {
    l.total += l.rate * interval_;
    out->set_name(l.name);
    out->set_kind(l.kind);
    if (l.up) out->set_up(*l.up);
    if (l.counters) {
      const uint64_t total = static_cast<uint64_t>(l.total);
      out->set_transmit_bytes_total(total / 2);
      out->set_receive_bytes_total(total - total / 2);
    }
    if (l.capacity) out->set_max_bandwidth_bytes_per_second(*l.capacity);
    if (l.pcie_generation) out->set_pcie_generation(*l.pcie_generation);
    if (l.pcie_width) out->set_pcie_width(*l.pcie_width);
  }

  double interval_;
  double t_ = 0;
};

struct LrEvent {
  Change change;
  v1::Finding finding;
  double at;  // seconds since kLrT0Seconds of the report that made it
};

// Runs the engine with the default config and records the events of the rules under test.
class LrHarness {
 public:
  LrHarness() {
    engine_.set_listener([this](Change change, const v1::Finding& f) {
      events_.push_back({change, f, now_});
    });
  }

  void Feed(LrNode& node) {
    const v1::NodeReport r = node.Next();
    now_ = node.now();
    engine_.Process(r);
  }
  // Feeds reports until `seconds` have passed.
  void FeedFor(LrNode& node, double seconds) {
    const double until = node.now() + seconds - 1e-6;
    while (node.now() < until) Feed(node);
  }

  const LrEvent* First(std::string_view rule, Change change) const {
    for (const LrEvent& e : events_) {
      if (e.finding.rule() == rule && e.change == change) return &e;
    }
    return nullptr;
  }
  size_t Count(std::string_view rule, Change change) const {
    return static_cast<size_t>(std::count_if(events_.begin(), events_.end(), [&](const LrEvent& e) {
      return e.finding.rule() == rule && e.change == change;
    }));
  }
  std::vector<v1::Finding> Open(std::string_view rule) const {
    std::vector<v1::Finding> out;
    for (const v1::Finding& f : engine_.OpenFindings()) {
      if (f.rule() == rule) out.push_back(f);
    }
    return out;
  }

 private:
  Engine engine_;
  std::vector<LrEvent> events_;
  double now_ = 0;
};

double LrSeconds(const google::protobuf::Timestamp& t) {
  return static_cast<double>(t.seconds() - kLrT0Seconds) + t.nanos() / 1e9;
}

std::vector<std::string> LrEvidenceNames(const v1::Finding& f) {
  std::vector<std::string> names;
  for (const v1::Evidence& e : f.evidence()) names.push_back(e.name());
  return names;
}

const v1::Evidence* LrEvidence(const v1::Finding& f, std::string_view name) {
  for (const v1::Evidence& e : f.evidence()) {
    if (e.name() == name) return &e;
  }
  return nullptr;
}

// A device with four NVLinks carrying `rate` each.
LrDevice LrNvlinkDevice(double rate) {
  LrDevice d;
  d.compute = 0.9;
  d.used_bytes = 80 * kLrGiB;
  for (int i = 0; i < 4; ++i) {
    d.links.push_back(LrLink{.name = "nvlink" + std::to_string(i), .rate = rate});
  }
  return d;
}

// ---------------------------------------------------------------------------------------------
// link_down

TEST(LinkDownRule, FiresWhenAnUpLinkGoesDownAndClosesWhenItComesBack) {
  LrNode node(10);
  node.devices.push_back(LrNvlinkDevice(1e9));
  LrHarness h;
  h.FeedFor(node, 30);
  node.devices[0].links[1].up = false;
  h.Feed(node);
  const double down_at = node.now();
  const LrEvent* opened = h.First("link_down", Change::kOpened);
  ASSERT_NE(opened, nullptr);
  EXPECT_EQ(opened->at, down_at);
  EXPECT_EQ(opened->finding.severity(), "critical");
  EXPECT_EQ(opened->finding.device(), "0");
  EXPECT_EQ(opened->finding.device_uuid(), "GPU-lr-0");
  EXPECT_EQ(opened->finding.link(), "nvlink1");
  EXPECT_EQ(opened->finding.plot(), "link_up");
  const std::vector<std::string> names = LrEvidenceNames(opened->finding);
  EXPECT_NE(std::find(names.begin(), names.end(), "link_up"), names.end());
  EXPECT_EQ(LrSeconds(opened->finding.start()), down_at);

  h.FeedFor(node, 60);  // stays raised while down
  EXPECT_EQ(h.Open("link_down").size(), 1u);
  EXPECT_EQ(h.First("link_down", Change::kClosed), nullptr);

  node.devices[0].links[1].up = true;
  h.Feed(node);
  const LrEvent* closed = h.First("link_down", Change::kClosed);
  ASSERT_NE(closed, nullptr);
  EXPECT_TRUE(closed->finding.has_end());
  EXPECT_EQ(LrSeconds(closed->finding.end()), node.now());
  EXPECT_TRUE(h.Open("link_down").empty());
}

TEST(LinkDownRule, GpuFallingOutOfItsNvlinkFabricFires) {
  // The NVML collector reports the fabric registration as a link (collectors/nvml.cc).
  LrNode node(10);
  LrDevice gpu;
  gpu.links.push_back(LrLink{.name = "fabric",
                             .kind = v1::LINK_KIND_NVLINK_FABRIC,
                             .counters = false,
                             .capacity = std::nullopt});
  node.devices.push_back(gpu);
  LrHarness h;
  h.FeedFor(node, 30);
  node.devices[0].links[0].up = false;
  h.Feed(node);
  const LrEvent* opened = h.First("link_down", Change::kOpened);
  ASSERT_NE(opened, nullptr);
  EXPECT_EQ(opened->finding.link(), "fabric");
  EXPECT_NE(opened->finding.summary().find("NVLink fabric link fabric of device 0"),
            std::string::npos)
      << opened->finding.summary();
}

TEST(LinkDownRule, HostLinkHasNoDevice) {
  LrNode node(1);
  node.host_links.push_back(LrLink{.name = "ib0", .kind = v1::LINK_KIND_INFINIBAND});
  LrHarness h;
  h.FeedFor(node, 5);
  node.host_links[0].up = false;
  h.Feed(node);
  const LrEvent* opened = h.First("link_down", Change::kOpened);
  ASSERT_NE(opened, nullptr);
  EXPECT_EQ(opened->at, node.now());
  EXPECT_EQ(opened->finding.device(), "");
  EXPECT_EQ(opened->finding.link(), "ib0");
}

TEST(LinkDownRule, LinkDownFromTheStartDoesNotFire) {
  LrNode node(10);
  node.host_links.push_back(LrLink{.name = "eth1", .kind = v1::LINK_KIND_ETHERNET, .up = false});
  LrHarness h;
  h.FeedFor(node, 600);
  EXPECT_EQ(h.Count("link_down", Change::kOpened), 0u);
}

TEST(LinkDownRule, AbsentUpIsUnknownNotAChange) {
  LrNode node(10);
  node.host_links.push_back(LrLink{.name = "eth0", .kind = v1::LINK_KIND_ETHERNET});
  node.host_links.push_back(
      LrLink{.name = "eth1", .kind = v1::LINK_KIND_ETHERNET, .up = std::nullopt});
  LrHarness h;
  h.FeedFor(node, 20);
  node.host_links[0].up = false;
  h.Feed(node);
  ASSERT_EQ(h.Open("link_down").size(), 1u);
  node.host_links[0].up = std::nullopt;  // unknown: the link stays down as far as we know
  h.FeedFor(node, 30);
  ASSERT_EQ(h.Open("link_down").size(), 1u);
  EXPECT_EQ(h.Open("link_down")[0].link(), "eth0");
  EXPECT_EQ(h.Count("link_down", Change::kClosed), 0u);
}

// ---------------------------------------------------------------------------------------------
// link_flapping

TEST(LinkFlappingRule, ThreeChangesInTheWindowFireUntilTheyAgeOut) {
  LrNode node(10);
  node.devices.push_back(LrNvlinkDevice(1e9));
  LrHarness h;
  h.FeedFor(node, 20);
  const double first_change = node.now() + 10;
  for (bool up : {false, true, false}) {
    node.devices[0].links[2].up = up;
    h.Feed(node);
  }
  const LrEvent* opened = h.First("link_flapping", Change::kOpened);
  ASSERT_NE(opened, nullptr);
  EXPECT_EQ(opened->at, node.now());  // at the third change
  EXPECT_EQ(opened->finding.severity(), "warning");
  EXPECT_EQ(opened->finding.device(), "0");
  EXPECT_EQ(opened->finding.link(), "nvlink2");
  EXPECT_EQ(opened->finding.plot(), "link_up");
  EXPECT_EQ(LrSeconds(opened->finding.start()), first_change);
  ASSERT_NE(LrEvidence(opened->finding, "changes"), nullptr);
  EXPECT_EQ(LrEvidence(opened->finding, "changes")->value(), 3);
  ASSERT_NE(LrEvidence(opened->finding, "window"), nullptr);
  EXPECT_EQ(LrEvidence(opened->finding, "window")->value(), 300);

  node.devices[0].links[2].up = true;  // a fourth change, then stable
  h.FeedFor(node, 400);
  const LrEvent* closed = h.First("link_flapping", Change::kClosed);
  ASSERT_NE(closed, nullptr);
  // Closes when only two changes remain in the trailing 300 s: the second one aged out.
  EXPECT_GE(closed->at, first_change + 10 + 300);
  EXPECT_LE(closed->at, first_change + 10 + 300 + 10);
}

TEST(LinkFlappingRule, TwoChangesInFiveMinutesDoNotFire) {
  LrNode node(10);
  node.host_links.push_back(LrLink{.name = "eth0", .kind = v1::LINK_KIND_ETHERNET});
  LrHarness h;
  h.FeedFor(node, 30);
  node.host_links[0].up = false;
  h.FeedFor(node, 100);
  node.host_links[0].up = true;
  h.FeedFor(node, 600);
  EXPECT_EQ(h.Count("link_flapping", Change::kOpened), 0u);
  EXPECT_EQ(h.Count("link_down", Change::kOpened), 1u);  // the outage itself is link_down's
}

TEST(LinkFlappingRule, AbsentValuesBetweenEqualStatesAreNotChanges) {
  LrNode node(10);
  node.host_links.push_back(LrLink{.name = "eth0", .kind = v1::LINK_KIND_ETHERNET});
  LrHarness h;
  for (int i = 0; i < 20; ++i) {
    node.host_links[0].up = i % 2 == 0 ? std::optional<bool>(true) : std::nullopt;
    h.Feed(node);
  }
  EXPECT_EQ(h.Count("link_flapping", Change::kOpened), 0u);
}

// ---------------------------------------------------------------------------------------------
// link_degraded

TEST(LinkDegradedRule, CapacityDropFiresAtOnceAndClosesWhenRestored) {
  LrNode node(10);
  node.devices.push_back(LrNvlinkDevice(10e9));
  LrHarness h;
  h.FeedFor(node, 60);
  node.devices[0].links[0].capacity = 25e9;
  h.Feed(node);
  const LrEvent* opened = h.First("link_degraded", Change::kOpened);
  ASSERT_NE(opened, nullptr);
  EXPECT_EQ(opened->at, node.now());
  EXPECT_EQ(opened->finding.severity(), "warning");
  EXPECT_EQ(opened->finding.device(), "0");
  EXPECT_EQ(opened->finding.link(), "nvlink0");
  EXPECT_EQ(opened->finding.plot(), "link_bytes_per_second");
  ASSERT_NE(LrEvidence(opened->finding, "max_bandwidth"), nullptr);
  EXPECT_EQ(LrEvidence(opened->finding, "max_bandwidth")->value(), 25e9);
  EXPECT_EQ(LrEvidence(opened->finding, "max_bandwidth")->unit(), "bytes_per_second");
  ASSERT_NE(LrEvidence(opened->finding, "best_max_bandwidth"), nullptr);
  EXPECT_EQ(LrEvidence(opened->finding, "best_max_bandwidth")->value(), 50e9);

  node.devices[0].links[0].capacity = 50e9;
  h.Feed(node);
  const LrEvent* closed = h.First("link_degraded", Change::kClosed);
  ASSERT_NE(closed, nullptr);
  EXPECT_EQ(closed->at, node.now());
}

TEST(LinkDegradedRule, PcieDownTrainingFires) {
  LrNode node(10);
  LrDevice d;
  d.links.push_back(LrLink{.name = "pcie",
                           .kind = v1::LINK_KIND_PCIE,
                           .rate = 1e9,
                           .capacity = std::nullopt,
                           .pcie_generation = 5,
                           .pcie_width = 16});
  node.devices.push_back(d);
  LrHarness h;
  h.FeedFor(node, 30);
  node.devices[0].links[0].pcie_width = 8;
  h.Feed(node);
  const LrEvent* opened = h.First("link_degraded", Change::kOpened);
  ASSERT_NE(opened, nullptr);
  EXPECT_EQ(opened->at, node.now());
  EXPECT_EQ(opened->finding.link(), "pcie");
  ASSERT_NE(LrEvidence(opened->finding, "pcie_width"), nullptr);
  EXPECT_EQ(LrEvidence(opened->finding, "pcie_width")->value(), 8);
  ASSERT_NE(LrEvidence(opened->finding, "best_pcie_width"), nullptr);
  EXPECT_EQ(LrEvidence(opened->finding, "best_pcie_width")->value(), 16);
  EXPECT_NE(opened->finding.summary().find("x8"), std::string::npos) << opened->finding.summary();
}

TEST(LinkDegradedRule, PcieGenerationDroppingAtIdleIsPowerSavingNotDegradation) {
  // GPUs train their PCIe link down to gen1 when idle and back up under load; the bandwidth a
  // collector derives from the current generation drops with it. Only lost lanes count.
  LrNode node(10);
  LrDevice d;
  d.links.push_back(LrLink{.name = "pcie",
                           .kind = v1::LINK_KIND_PCIE,
                           .rate = 1e9,
                           .capacity = 63e9,
                           .pcie_generation = 5,
                           .pcie_width = 16});
  node.devices.push_back(d);
  LrHarness h;
  h.FeedFor(node, 30);
  node.devices[0].links[0].pcie_generation = 1;
  node.devices[0].links[0].capacity = 4e9;
  node.devices[0].links[0].rate = 0;
  h.FeedFor(node, 120);
  EXPECT_EQ(h.First("link_degraded", Change::kOpened), nullptr);
}

TEST(LinkDegradedRule, LinkCarryingLittleOfItsSiblingsTrafficFiresAfterFor) {
  for (double interval : {1.0, 10.0}) {
    SCOPED_TRACE(interval);
    LrNode node(interval);
    node.devices.push_back(LrNvlinkDevice(20e9));
    LrHarness h;
    h.FeedFor(node, 60);
    node.devices[0].links[3].rate = 1e9;  // 5% of its siblings
    const double onset = node.now() + interval;
    h.FeedFor(node, 120);
    const LrEvent* opened = h.First("link_degraded", Change::kOpened);
    ASSERT_NE(opened, nullptr);
    EXPECT_GE(opened->at, onset + 60);
    EXPECT_LE(opened->at, onset + 60 + 2 * interval);
    EXPECT_EQ(opened->finding.link(), "nvlink3");
    EXPECT_EQ(LrSeconds(opened->finding.start()), onset);
    ASSERT_NE(LrEvidence(opened->finding, "link_rate"), nullptr);
    EXPECT_NEAR(LrEvidence(opened->finding, "link_rate")->value(), 1e9, 1e6);
    ASSERT_NE(LrEvidence(opened->finding, "sibling_median_rate"), nullptr);
    EXPECT_NEAR(LrEvidence(opened->finding, "sibling_median_rate")->value(), 20e9, 1e7);
    EXPECT_EQ(h.Count("link_degraded", Change::kOpened), 1u);  // only the slow link

    node.devices[0].links[3].rate = 20e9;
    h.FeedFor(node, 2 * interval);
    ASSERT_NE(h.First("link_degraded", Change::kClosed), nullptr);
    EXPECT_TRUE(h.Open("link_degraded").empty());
  }
}

TEST(LinkDegradedRule, HostLinksAreComparedWithHostSiblings) {
  LrNode node(10);
  for (int i = 0; i < 4; ++i) {
    node.host_links.push_back(LrLink{.name = "mlx5_" + std::to_string(i),
                                     .kind = v1::LINK_KIND_INFINIBAND,
                                     .rate = 20e9,
                                     .capacity = 50e9});
  }
  LrHarness h;
  h.FeedFor(node, 30);
  node.host_links[2].rate = 0;
  h.FeedFor(node, 100);
  const LrEvent* opened = h.First("link_degraded", Change::kOpened);
  ASSERT_NE(opened, nullptr);
  EXPECT_EQ(opened->finding.device(), "");
  EXPECT_EQ(opened->finding.link(), "mlx5_2");
}

TEST(LinkDegradedRule, BurstyTrafficInPhaseDoesNotFire) {
  LrNode node(10);
  node.devices.push_back(LrNvlinkDevice(20e9));
  LrHarness h;
  for (int i = 0; i < 60; ++i) {
    for (LrLink& l : node.devices[0].links) l.rate = i % 2 == 0 ? 40e9 : 4e9;
    h.Feed(node);
  }
  EXPECT_EQ(h.Count("link_degraded", Change::kOpened), 0u);
}

TEST(LinkDegradedRule, OutOfPhaseBurstsWithBriefDipsDoNotFire) {
  LrNode node(10);
  node.devices.push_back(LrNvlinkDevice(20e9));
  LrHarness h;
  for (int i = 0; i < 90; ++i) {
    // nvlink3 dips for 40 s (< for: 60 s) then bursts 20 s, out of phase with its siblings.
    node.devices[0].links[3].rate = i % 6 < 4 ? 1e9 : 60e9;
    h.Feed(node);
  }
  EXPECT_EQ(h.Count("link_degraded", Change::kOpened), 0u);
}

TEST(LinkDegradedRule, CounterResetIsSkippedNotAnOutlier) {
  LrNode node(10);
  node.devices.push_back(LrNvlinkDevice(20e9));
  LrHarness h;
  for (int i = 0; i < 60; ++i) {
    if (i % 10 == 5) node.devices[0].links[1].total = 0;  // driver reload: counter restarts
    h.Feed(node);
  }
  EXPECT_EQ(h.Count("link_degraded", Change::kOpened), 0u);
}

TEST(LinkDegradedRule, IdleSiblingsAreNotAReference) {
  LrNode node(10);
  node.devices.push_back(LrNvlinkDevice(1e6));  // far below busy_share x capacity
  node.devices[0].links[0].rate = 0;
  LrHarness h;
  h.FeedFor(node, 300);
  EXPECT_EQ(h.Count("link_degraded", Change::kOpened), 0u);
}

// ---------------------------------------------------------------------------------------------
// job_stall

// Eight busy devices with NVLinks carrying 20 GB/s each, all in `job` when set.
LrNode LrBusyNode(double interval, const std::string& job = "") {
  LrNode node(interval);
  for (int i = 0; i < 8; ++i) {
    node.devices.push_back(LrNvlinkDevice(20e9));
    node.devices.back().job = job;
  }
  return node;
}

void LrIdle(LrDevice& d) {
  d.compute = 0.0;
  for (LrLink& l : d.links) l.rate = 0;
}

void LrBusy(LrDevice& d) {
  d.compute = 0.9;
  for (LrLink& l : d.links) l.rate = 20e9;
}

class JobStallRuleTest : public ::testing::TestWithParam<double> {};

TEST_P(JobStallRuleTest, HungCollectiveFiresAfterForAndClosesWhenWorkResumes) {
  const double interval = GetParam();
  LrNode node = LrBusyNode(interval);
  LrHarness h;
  h.FeedFor(node, 300);
  for (LrDevice& d : node.devices) LrIdle(d);
  const double onset = node.now() + interval;
  h.FeedFor(node, 200);
  const LrEvent* opened = h.First("job_stall", Change::kOpened);
  ASSERT_NE(opened, nullptr);
  EXPECT_GE(opened->at, onset + 120);
  EXPECT_LE(opened->at, onset + 120 + 2 * interval);
  EXPECT_EQ(opened->finding.severity(), "critical");
  EXPECT_EQ(opened->finding.device(), "");
  EXPECT_EQ(opened->finding.link(), "");
  EXPECT_EQ(opened->finding.plot(), "compute_ratio");
  EXPECT_EQ(LrSeconds(opened->finding.start()), onset);
  ASSERT_NE(LrEvidence(opened->finding, "idle_devices"), nullptr);
  EXPECT_EQ(LrEvidence(opened->finding, "idle_devices")->value(), 8);
  ASSERT_NE(LrEvidence(opened->finding, "memory_used_avg"), nullptr);
  EXPECT_EQ(LrEvidence(opened->finding, "memory_used_avg")->value(), 80 * kLrGiB);
  EXPECT_EQ(LrEvidence(opened->finding, "memory_used_avg")->unit(), "bytes");
  ASSERT_NE(LrEvidence(opened->finding, "idle_for"), nullptr);
  EXPECT_EQ(LrEvidence(opened->finding, "job"), nullptr);
  EXPECT_NE(opened->finding.summary().find("all 8 devices idle for 2m"), std::string::npos)
      << opened->finding.summary();
  EXPECT_NE(opened->finding.summary().find("80 GiB avg"), std::string::npos);

  for (LrDevice& d : node.devices) LrBusy(d);
  h.Feed(node);
  h.Feed(node);  // the link rate needs two reports; compute alone ends it at once
  const LrEvent* closed = h.First("job_stall", Change::kClosed);
  ASSERT_NE(closed, nullptr);
  EXPECT_LE(closed->at, node.now());
  EXPECT_TRUE(h.Open("job_stall").empty());
}

TEST_P(JobStallRuleTest, JobThatEndsNormallyIsNotAStall) {
  const double interval = GetParam();
  LrNode node = LrBusyNode(interval);
  LrHarness h;
  h.FeedFor(node, 300);
  for (LrDevice& d : node.devices) {
    LrIdle(d);
    d.used_bytes = 0.5 * kLrGiB;  // memory freed
  }
  h.FeedFor(node, 600);
  EXPECT_EQ(h.Count("job_stall", Change::kOpened), 0u);
}

TEST_P(JobStallRuleTest, SixtySecondCheckpointPauseIsNotAStall) {
  const double interval = GetParam();
  LrNode node = LrBusyNode(interval);
  LrHarness h;
  for (int round = 0; round < 3; ++round) {
    h.FeedFor(node, 600);
    for (LrDevice& d : node.devices) LrIdle(d);
    h.FeedFor(node, 60);
    for (LrDevice& d : node.devices) LrBusy(d);
  }
  h.FeedFor(node, 60);
  EXPECT_EQ(h.Count("job_stall", Change::kOpened), 0u);
}

TEST_P(JobStallRuleTest, StallsArePerPushedJob) {
  const double interval = GetParam();
  LrNode node = LrBusyNode(interval, "llm-a");
  for (int i = 4; i < 8; ++i) node.devices[static_cast<size_t>(i)].job = "llm-b";
  LrHarness h;
  h.FeedFor(node, 300);
  // llm-a hangs; llm-b keeps training on the same node.
  for (int i = 0; i < 4; ++i) LrIdle(node.devices[static_cast<size_t>(i)]);
  const double onset = node.now() + interval;
  h.FeedFor(node, 200);
  const LrEvent* opened = h.First("job_stall", Change::kOpened);
  ASSERT_NE(opened, nullptr);
  EXPECT_LE(opened->at, onset + 120 + 2 * interval);
  ASSERT_NE(LrEvidence(opened->finding, "job"), nullptr);
  EXPECT_EQ(LrEvidence(opened->finding, "job")->text(), "llm-a");
  EXPECT_EQ(LrEvidence(opened->finding, "idle_devices")->value(), 4);
  EXPECT_NE(opened->finding.summary().find("llm-a"), std::string::npos);
  EXPECT_EQ(opened->finding.device(), "");
}

TEST_P(JobStallRuleTest, JobWhoseProcessesGoAwayIsNotAStall) {
  const double interval = GetParam();
  LrNode node = LrBusyNode(interval, "llm-a");
  LrHarness h;
  h.FeedFor(node, 300);
  for (LrDevice& d : node.devices) {
    LrIdle(d);
    d.job.clear();  // the processes exited; the driver has not reclaimed memory yet
  }
  h.FeedFor(node, 600);
  EXPECT_EQ(h.Count("job_stall", Change::kOpened), 0u);
}

TEST_P(JobStallRuleTest, AbsentUtilizationIsNotIdle) {
  const double interval = GetParam();
  LrNode node = LrBusyNode(interval);
  LrHarness h;
  h.FeedFor(node, 300);
  // The utilization source goes away while the links go quiet and memory stays: unknown, not 0.
  for (LrDevice& d : node.devices) {
    d.compute = std::nullopt;
    for (LrLink& l : d.links) l.rate = 0;
  }
  h.FeedFor(node, 600);
  EXPECT_EQ(h.Count("job_stall", Change::kOpened), 0u);
}

TEST_P(JobStallRuleTest, BusyLinksMeanTheJobIsCommunicating) {
  const double interval = GetParam();
  LrNode node = LrBusyNode(interval);
  LrHarness h;
  h.FeedFor(node, 300);
  for (LrDevice& d : node.devices) d.compute = 0.0;  // links still at 20 GB/s
  h.FeedFor(node, 600);
  EXPECT_EQ(h.Count("job_stall", Change::kOpened), 0u);
}

INSTANTIATE_TEST_SUITE_P(Intervals, JobStallRuleTest, ::testing::Values(1.0, 10.0));

// ---------------------------------------------------------------------------------------------
// throughput_drop

// One device busy at 0.8 with 80 GiB for the whole 30 min baseline.
LrNode LrBaselineNode(double interval) {
  LrNode node(interval);
  LrDevice d;
  d.compute = 0.8;
  d.used_bytes = 80 * kLrGiB;
  node.devices.push_back(d);
  return node;
}

class ThroughputDropRuleTest : public ::testing::TestWithParam<double> {};

TEST_P(ThroughputDropRuleTest, ComputeDropFiresAfterForAgainstAnUnpulledBaseline) {
  const double interval = GetParam();
  LrNode node = LrBaselineNode(interval);
  LrHarness h;
  h.FeedFor(node, 1900);
  node.devices[0].compute = 0.3;  // under 0.5 x 0.8
  const double onset = node.now() + interval;
  h.FeedFor(node, 400);
  const LrEvent* opened = h.First("throughput_drop", Change::kOpened);
  ASSERT_NE(opened, nullptr);
  EXPECT_GE(opened->at, onset + 300);
  EXPECT_LE(opened->at, onset + 300 + 30);
  EXPECT_EQ(opened->finding.severity(), "warning");
  EXPECT_EQ(opened->finding.device(), "0");
  EXPECT_EQ(opened->finding.link(), "");
  EXPECT_EQ(opened->finding.plot(), "compute_ratio");
  EXPECT_EQ(LrSeconds(opened->finding.start()), onset);
  ASSERT_NE(LrEvidence(opened->finding, "compute_ratio"), nullptr);
  EXPECT_DOUBLE_EQ(LrEvidence(opened->finding, "compute_ratio")->value(), 0.3);
  ASSERT_NE(LrEvidence(opened->finding, "baseline_compute_ratio"), nullptr);
  EXPECT_NEAR(LrEvidence(opened->finding, "baseline_compute_ratio")->value(), 0.8, 1e-9);
  ASSERT_NE(LrEvidence(opened->finding, "share"), nullptr);
  EXPECT_EQ(LrEvidence(opened->finding, "share")->value(), 0.5);
  ASSERT_NE(LrEvidence(opened->finding, "low_for"), nullptr);
  EXPECT_EQ(LrEvidence(opened->finding, "low_for")->unit(), "seconds");

  node.devices[0].compute = 0.8;
  h.Feed(node);
  const LrEvent* closed = h.First("throughput_drop", Change::kClosed);
  ASSERT_NE(closed, nullptr);
  EXPECT_EQ(closed->at, node.now());
}

TEST_P(ThroughputDropRuleTest, LinkTrafficDropFires) {
  const double interval = GetParam();
  LrNode node = LrBaselineNode(interval);
  for (int i = 0; i < 4; ++i) {
    node.devices[0].links.push_back(LrLink{.name = "nvlink" + std::to_string(i), .rate = 20e9});
  }
  LrHarness h;
  h.FeedFor(node, 1900);
  for (LrLink& l : node.devices[0].links) l.rate = 4e9;  // compute unchanged
  const double onset = node.now() + interval;
  h.FeedFor(node, 400);
  const LrEvent* opened = h.First("throughput_drop", Change::kOpened);
  ASSERT_NE(opened, nullptr);
  EXPECT_LE(opened->at, onset + 300 + 30);
  EXPECT_EQ(opened->finding.device(), "0");
  ASSERT_NE(LrEvidence(opened->finding, "link_rate"), nullptr);
  EXPECT_NEAR(LrEvidence(opened->finding, "link_rate")->value(), 16e9, 1e7);
  ASSERT_NE(LrEvidence(opened->finding, "baseline_link_rate"), nullptr);
  EXPECT_NEAR(LrEvidence(opened->finding, "baseline_link_rate")->value(), 80e9, 1e8);
}

TEST_P(ThroughputDropRuleTest, JobThatEndsDoesNotFire) {
  const double interval = GetParam();
  LrNode node = LrBaselineNode(interval);
  LrHarness h;
  h.FeedFor(node, 1900);
  node.devices[0].compute = 0.0;
  node.devices[0].used_bytes = 0.5 * kLrGiB;
  h.FeedFor(node, 900);
  EXPECT_EQ(h.Count("throughput_drop", Change::kOpened), 0u);
}

TEST_P(ThroughputDropRuleTest, JobRestartRampDoesNotFire) {
  const double interval = GetParam();
  LrNode node = LrBaselineNode(interval);
  LrHarness h;
  h.FeedFor(node, 1900);
  node.devices[0].compute = 0.0;
  node.devices[0].used_bytes = 0.5 * kLrGiB;
  h.FeedFor(node, 60);
  // The restarted job loads its memory, then ramps up over ten minutes.
  node.devices[0].used_bytes = 80 * kLrGiB;
  const double ramp_start = node.now();
  while (node.now() < ramp_start + 600) {
    node.devices[0].compute = 0.8 * (node.now() - ramp_start) / 600;
    h.Feed(node);
  }
  node.devices[0].compute = 0.8;
  h.FeedFor(node, 1200);
  EXPECT_EQ(h.Count("throughput_drop", Change::kOpened), 0u);
}

TEST_P(ThroughputDropRuleTest, DipShorterThanForDoesNotFire) {
  const double interval = GetParam();
  LrNode node = LrBaselineNode(interval);
  LrHarness h;
  h.FeedFor(node, 1900);
  for (int i = 0; i < 4; ++i) {
    node.devices[0].compute = 0.1;
    h.FeedFor(node, 240);
    node.devices[0].compute = 0.8;
    h.FeedFor(node, 60);
  }
  EXPECT_EQ(h.Count("throughput_drop", Change::kOpened), 0u);
}

TEST_P(ThroughputDropRuleTest, AbsentUtilizationIsNotADrop) {
  const double interval = GetParam();
  LrNode node = LrBaselineNode(interval);
  LrHarness h;
  h.FeedFor(node, 1900);
  node.devices[0].compute = std::nullopt;
  h.FeedFor(node, 900);
  EXPECT_EQ(h.Count("throughput_drop", Change::kOpened), 0u);
}

TEST_P(ThroughputDropRuleTest, UnfilledBaselineIsNotJudged) {
  const double interval = GetParam();
  LrNode node = LrBaselineNode(interval);
  LrHarness h;
  h.FeedFor(node, 900);  // half the baseline window
  node.devices[0].compute = 0.1;
  h.FeedFor(node, 600);
  EXPECT_EQ(h.Count("throughput_drop", Change::kOpened), 0u);
}

TEST_P(ThroughputDropRuleTest, LinkCounterResetIsSkipped) {
  const double interval = GetParam();
  LrNode node = LrBaselineNode(interval);
  node.devices[0].links.push_back(LrLink{.name = "nvlink0", .rate = 20e9});
  LrHarness h;
  h.FeedFor(node, 1900);
  for (int i = 0; i < 5; ++i) {
    node.devices[0].links[0].total = 0;  // counter restarts
    h.FeedFor(node, 120);
  }
  EXPECT_EQ(h.Count("throughput_drop", Change::kOpened), 0u);
}

INSTANTIATE_TEST_SUITE_P(Intervals, ThroughputDropRuleTest, ::testing::Values(1.0, 10.0));

}  // namespace
}  // namespace diagnostics_link_rules_test
}  // namespace accelmon::diagnostics
