// The device and host rules (memory_fragmentation, host_oom_kill, thermal_throttling,
// memory_leak, ecc_errors, xid_error, firmware_below_minimum, device_lost) over handcrafted
// report sequences fed through the real engine: when each fires, what it says, when it closes,
// and the near misses that must stay quiet.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "diagnostics/engine.h"

namespace accelmon::diagnostics {
namespace diagnostics_device_rules_test {
namespace {

constexpr double kDrGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kDrMiB = 1024.0 * 1024.0;
constexpr int64_t kDrT0 = 1'700'000'000;  // seconds; reports are at kDrT0 + offsets
constexpr int64_t kDrNs = 1'000'000'000;

v1::NodeReport DrReport(int64_t offset_s) {
  v1::NodeReport r;
  r.set_node("n1");
  r.mutable_timestamp()->set_seconds(kDrT0 + offset_s);
  return r;
}

v1::DeviceTelemetry* DrDevice(v1::NodeReport& r, uint32_t index) {
  v1::DeviceTelemetry* d = r.add_devices();
  d->mutable_identity()->set_vendor("nvidia");
  d->mutable_identity()->set_model("NVIDIA H200");
  d->mutable_identity()->set_uuid("GPU-" + std::to_string(index));
  d->mutable_identity()->set_index(index);
  return d;
}

v1::Event* DrEvent(v1::NodeReport& r, v1::EventKind kind, int64_t offset_s) {
  v1::Event* e = r.add_events();
  e->set_kind(kind);
  e->mutable_time()->set_seconds(kDrT0 + offset_s);
  return e;
}

void DrMemory(v1::DeviceTelemetry* d, double total_gib, double free_gib,
              std::optional<double> ratio, std::optional<double> largest_gib = {}) {
  v1::DeviceMemory* m = d->mutable_memory();
  m->set_total_bytes(static_cast<uint64_t>(total_gib * kDrGiB));
  m->set_free_bytes(static_cast<uint64_t>(free_gib * kDrGiB));
  m->set_used_bytes(static_cast<uint64_t>((total_gib - free_gib) * kDrGiB));
  if (ratio) m->set_fragmentation_ratio(*ratio);
  if (largest_gib) m->set_largest_free_block_bytes(static_cast<uint64_t>(*largest_gib * kDrGiB));
}

struct DrChange {
  Change change;
  v1::Finding finding;
};

const v1::Evidence* DrEvidence(const v1::Finding& f, std::string_view name) {
  for (const v1::Evidence& e : f.evidence()) {
    if (e.name() == name) return &e;
  }
  return nullptr;
}

class DeviceRulesTest : public ::testing::Test {
 protected:
  DeviceRulesTest() { Start(Config{}); }

  void Start(Config config) {
    engine_ = std::make_unique<Engine>(std::move(config));
    changes_.clear();
    engine_->set_listener([this](Change c, const v1::Finding& f) { changes_.push_back({c, f}); });
  }

  void Feed(const v1::NodeReport& r) { engine_->Process(r); }

  std::vector<v1::Finding> Changes(Change change, std::string_view rule) const {
    std::vector<v1::Finding> out;
    for (const DrChange& c : changes_) {
      if (c.change == change && c.finding.rule() == rule) out.push_back(c.finding);
    }
    return out;
  }
  std::vector<v1::Finding> Opened(std::string_view rule) const {
    return Changes(Change::kOpened, rule);
  }
  std::vector<v1::Finding> Closed(std::string_view rule) const {
    return Changes(Change::kClosed, rule);
  }
  std::optional<v1::Finding> Open(std::string_view rule, std::string_view device) const {
    for (const v1::Finding& f : engine_->OpenFindings()) {
      if (f.rule() == rule && f.device() == device) return f;
    }
    return std::nullopt;
  }

  std::unique_ptr<Engine> engine_;
  std::vector<DrChange> changes_;
};

// Whether `text` contains `part` (gtest without gmock's matchers).
bool DrHas(const std::string& text, std::string_view part) {
  return text.find(part) != std::string::npos;
}

// Whether every name is among the finding's evidence.
bool DrHasEvidence(const v1::Finding& f, std::initializer_list<std::string_view> names) {
  for (std::string_view name : names) {
    if (DrEvidence(f, name) == nullptr) return false;
  }
  return true;
}

// ---------------------------------------------------------------------------------------------
// memory_fragmentation

TEST_F(DeviceRulesTest, FragmentationFiresAtOnceAndClosesWhenDefragmented) {
  v1::NodeReport r = DrReport(0);
  DrMemory(DrDevice(r, 3), 80, 31, 0.62, 1.2);
  Feed(r);
  ASSERT_EQ(Opened("memory_fragmentation").size(), 1u);
  const v1::Finding f = Opened("memory_fragmentation")[0];
  EXPECT_EQ(f.severity(), "warning");
  EXPECT_EQ(f.device(), "3");
  EXPECT_EQ(f.device_uuid(), "GPU-3");
  EXPECT_EQ(f.plot(), "fragmentation_ratio");
  EXPECT_TRUE(DrHas(f.summary(), "device 3 memory 62% fragmented")) << f.summary();
  EXPECT_TRUE(DrHasEvidence(f, {"fragmentation_ratio", "largest_free_block_bytes", "free_share"}));
  EXPECT_DOUBLE_EQ(DrEvidence(f, "fragmentation_ratio")->value(), 0.62);

  v1::NodeReport later = DrReport(10);
  DrMemory(DrDevice(later, 3), 80, 31, 0.05, 29.5);
  Feed(later);
  ASSERT_EQ(Closed("memory_fragmentation").size(), 1u);
  EXPECT_EQ(Closed("memory_fragmentation")[0].end().seconds(), kDrT0 + 10);
}

TEST_F(DeviceRulesTest, FragmentationMustHoldForSecondsAndStartsAtTheOnset) {
  Config c;
  c.memory_fragmentation.for_seconds = 30;
  Start(c);
  for (int64_t t = 0; t <= 20; t += 10) {
    v1::NodeReport r = DrReport(t);
    DrMemory(DrDevice(r, 0), 80, 40, 0.7, 12);
    Feed(r);
  }
  EXPECT_TRUE(Opened("memory_fragmentation").empty()) << "20 s of 30";
  v1::NodeReport r = DrReport(30);
  DrMemory(DrDevice(r, 0), 80, 40, 0.7, 12);
  Feed(r);
  ASSERT_EQ(Opened("memory_fragmentation").size(), 1u);
  EXPECT_EQ(Opened("memory_fragmentation")[0].start().seconds(), kDrT0);
}

TEST_F(DeviceRulesTest, FragmentationJobRequestLargerThanTheLargestBlock) {
  Config c;
  c.memory_fragmentation.job_request_bytes = static_cast<uint64_t>(4 * kDrGiB);
  Start(c);
  v1::NodeReport r = DrReport(0);
  DrMemory(DrDevice(r, 1), 80, 30, 0.1, 2);  // ratio below 0.5, block below the request
  Feed(r);
  ASSERT_EQ(Opened("memory_fragmentation").size(), 1u);
  const v1::Finding f = Opened("memory_fragmentation")[0];
  EXPECT_EQ(f.device(), "1");
  EXPECT_TRUE(DrHasEvidence(f, {"job_request_bytes", "largest_free_block_bytes"}));
  EXPECT_TRUE(DrHas(f.summary(), "below the job request")) << f.summary();
}

TEST_F(DeviceRulesTest, FragmentationOfNearlyFullMemoryIsNotAFindingUnlessTheCacheFreesIt) {
  v1::NodeReport full = DrReport(0);
  DrMemory(DrDevice(full, 0), 80, 4, 0.8, 0.8);  // 5% free: simply full
  Feed(full);
  EXPECT_TRUE(Opened("memory_fragmentation").empty());

  // The same device free share once the allocator's cached-but-unallocated memory counts.
  v1::NodeReport cached = DrReport(10);
  v1::DeviceTelemetry* d = DrDevice(cached, 0);
  DrMemory(d, 80, 4, 0.8, 0.8);
  v1::ProcessMemory* p = d->add_processes();
  p->set_reserved_bytes(static_cast<uint64_t>(60 * kDrGiB));
  p->set_allocated_bytes(static_cast<uint64_t>(40 * kDrGiB));
  v1::ProcessMemory* odd = d->add_processes();  // reserved < allocated: ignored, not negative
  odd->set_reserved_bytes(static_cast<uint64_t>(1 * kDrGiB));
  odd->set_allocated_bytes(static_cast<uint64_t>(2 * kDrGiB));
  Feed(cached);
  ASSERT_EQ(Opened("memory_fragmentation").size(), 1u);
  EXPECT_NEAR(DrEvidence(Opened("memory_fragmentation")[0], "free_share")->value(), 0.3, 1e-6);
}

TEST_F(DeviceRulesTest, FragmentationAbsentValuesNeverFire) {
  for (int64_t t = 0; t < 100; t += 10) {
    v1::NodeReport r = DrReport(t);
    DrDevice(r, 0);  // no memory at all
    v1::DeviceTelemetry* d = DrDevice(r, 1);
    d->mutable_memory()->set_fragmentation_ratio(0.9);  // no total, no free
    v1::DeviceTelemetry* e = DrDevice(r, 2);
    DrMemory(e, 80, 40, std::nullopt, 1);  // no ratio, no job request configured
    Feed(r);
  }
  EXPECT_TRUE(Opened("memory_fragmentation").empty());
}

// ---------------------------------------------------------------------------------------------
// host_oom_kill

v1::NodeReport DrHost(int64_t t, std::optional<uint64_t> oom, std::optional<uint64_t> full_us) {
  v1::NodeReport r = DrReport(t);
  if (oom) r.mutable_host()->mutable_vmstat()->set_oom_kill_total(*oom);
  if (full_us) r.mutable_host()->mutable_memory_pressure()->set_full_total_us(*full_us);
  r.mutable_host()->mutable_memory()->set_total_bytes(static_cast<uint64_t>(512 * kDrGiB));
  r.mutable_host()->mutable_memory()->set_available_bytes(static_cast<uint64_t>(10.24 * kDrGiB));
  return r;
}

TEST_F(DeviceRulesTest, OomKillFromTheCounterWithPressureEvidenceHeldThenClosed) {
  Feed(DrHost(0, 5, 1'000'000));
  EXPECT_TRUE(Opened("host_oom_kill").empty()) << "the first value is a baseline";
  Feed(DrHost(10, 7, 4'000'000));  // 3 s of full stall in 10 s
  ASSERT_EQ(Opened("host_oom_kill").size(), 1u);
  const v1::Finding f = Opened("host_oom_kill")[0];
  EXPECT_EQ(f.severity(), "critical");
  EXPECT_EQ(f.device(), "");
  EXPECT_EQ(f.plot(), "host_oom_kill_total");
  EXPECT_TRUE(DrHas(f.summary(), "killed 2 processes")) << f.summary();
  EXPECT_DOUBLE_EQ(DrEvidence(f, "oom_kills")->value(), 2);
  EXPECT_NEAR(DrEvidence(f, "host_memory_available_share")->value(), 0.02, 1e-6);
  EXPECT_NEAR(DrEvidence(f, "memory_full_stall_share")->value(), 0.3, 1e-9);

  Feed(DrHost(300, 7, 4'000'000));
  EXPECT_TRUE(Open("host_oom_kill", "")) << "held for 600 s after the kill";
  EXPECT_TRUE(Closed("host_oom_kill").empty());
  Feed(DrHost(610, 7, 4'000'000));
  ASSERT_EQ(Closed("host_oom_kill").size(), 1u);
  EXPECT_EQ(Closed("host_oom_kill")[0].end().seconds(), kDrT0 + 610);
}

TEST_F(DeviceRulesTest, OomKillFromAnEventCarriesItsMessage) {
  v1::NodeReport r = DrReport(0);
  DrEvent(r, v1::EVENT_KIND_OOM_KILL, -2)->set_message("Killed process 4242 (python)");
  Feed(r);
  ASSERT_EQ(Opened("host_oom_kill").size(), 1u);
  const v1::Finding f = Opened("host_oom_kill")[0];
  EXPECT_EQ(DrEvidence(f, "oom_message")->text(), "Killed process 4242 (python)");
  EXPECT_EQ(f.start().seconds(), kDrT0 - 2) << "starts at the event";
}

TEST_F(DeviceRulesTest, OomKillCounterResetAndAbsentVmstatNeverFire) {
  Feed(DrHost(0, 5, std::nullopt));
  Feed(DrHost(10, 0, std::nullopt));  // reboot: counter reset
  Feed(DrHost(20, std::nullopt, std::nullopt));
  Feed(DrHost(30, std::nullopt, std::nullopt));
  Feed(DrHost(40, 0, std::nullopt));
  Feed(DrHost(50, 0, std::nullopt));
  EXPECT_TRUE(Opened("host_oom_kill").empty());
}

// ---------------------------------------------------------------------------------------------
// thermal_throttling

v1::NodeReport DrThermal(int64_t t, std::optional<double> core, std::vector<std::string> active,
                         std::optional<double> threshold = 90.0) {
  v1::NodeReport r = DrReport(t);
  v1::DeviceThermal* th = DrDevice(r, 2)->mutable_thermal();
  if (core) th->set_core_celsius(*core);
  th->set_memory_celsius(60);
  if (threshold) th->set_slowdown_threshold_celsius(*threshold);
  for (const char* reason : {"sw_thermal", "hw_thermal", "hw_slowdown", "sw_power_cap"}) {
    (*th->mutable_throttle_reasons())[reason] =
        std::find(active.begin(), active.end(), reason) != active.end();
  }
  return r;
}

TEST_F(DeviceRulesTest, ThrottleReasonFor30sIsCriticalForHardwareSlowdownAndCloses) {
  for (int64_t t = 0; t <= 20; t += 10) Feed(DrThermal(t, 70, {"hw_slowdown"}));
  EXPECT_TRUE(Opened("thermal_throttling").empty()) << "20 s of 30";
  Feed(DrThermal(30, 70, {"hw_slowdown"}));
  ASSERT_EQ(Opened("thermal_throttling").size(), 1u);
  const v1::Finding f = Opened("thermal_throttling")[0];
  EXPECT_EQ(f.severity(), "critical");
  EXPECT_EQ(f.device(), "2");
  EXPECT_EQ(f.plot(), "core_celsius");
  EXPECT_EQ(f.start().seconds(), kDrT0);
  EXPECT_EQ(DrEvidence(f, "throttle_reasons")->text(), "hw_slowdown");
  EXPECT_TRUE(DrHasEvidence(f, {"core_celsius", "slowdown_threshold_celsius"}));

  Feed(DrThermal(40, 70, {}));
  ASSERT_EQ(Closed("thermal_throttling").size(), 1u);
  EXPECT_EQ(Closed("thermal_throttling")[0].end().seconds(), kDrT0 + 40);
}

TEST_F(DeviceRulesTest, NearTheSlowdownThresholdIsAWarningThatRisesAtTheThreshold) {
  for (int64_t t = 0; t <= 30; t += 10) Feed(DrThermal(t, 86, {}));
  ASSERT_EQ(Opened("thermal_throttling").size(), 1u);
  EXPECT_EQ(Opened("thermal_throttling")[0].severity(), "warning");
  Feed(DrThermal(40, 91, {}));
  ASSERT_EQ(Changes(Change::kEscalated, "thermal_throttling").size(), 1u);
  EXPECT_EQ(Open("thermal_throttling", "2")->severity(), "critical");
}

TEST_F(DeviceRulesTest, ThermalBriefSpikeOrNoThresholdDoesNotFire) {
  // 20 s at 88 °C (3 reports), and 20 s of sw_thermal, then back to normal.
  Feed(DrThermal(0, 60, {}));
  for (int64_t t = 10; t <= 30; t += 10) Feed(DrThermal(t, 88, {"sw_thermal"}));
  Feed(DrThermal(40, 60, {}));
  for (int64_t t = 50; t <= 70; t += 10) Feed(DrThermal(t, 88, {"sw_thermal"}));
  Feed(DrThermal(80, 60, {}));
  // Hot, but without a known threshold (and no reasons) there is nothing to compare with.
  for (int64_t t = 90; t <= 300; t += 10) Feed(DrThermal(t, 99, {}, std::nullopt));
  // Temperature absent altogether.
  for (int64_t t = 310; t <= 400; t += 10) Feed(DrThermal(t, std::nullopt, {}));
  EXPECT_TRUE(Opened("thermal_throttling").empty());
}

// A cool device whose sampled reasons are all clear, with the driver's violation counters.
v1::NodeReport DrViolations(int64_t t, std::optional<double> thermal_s,
                            std::optional<double> power_s) {
  v1::NodeReport r = DrThermal(t, 70, {});
  v1::DeviceClocks* c = r.mutable_devices(0)->mutable_clocks();
  if (thermal_s) c->set_thermal_violation_seconds_total(*thermal_s);
  if (power_s) c->set_power_violation_seconds_total(*power_s);
  return r;
}

TEST_F(DeviceRulesTest, ThermalViolationCountersCatchThrottlingTheSampledReasonsMiss) {
  // Collected every 30 s; held back by heat 20 s of every 30 between two collections, while
  // every sample of the reasons happens to catch them clear.
  Feed(DrViolations(0, 100, 5));
  Feed(DrViolations(30, 120, 5));
  EXPECT_TRUE(Opened("thermal_throttling").empty()) << "one interval is not yet 3 reports";
  Feed(DrViolations(60, 140, 5));
  ASSERT_EQ(Opened("thermal_throttling").size(), 1u);
  const v1::Finding f = Opened("thermal_throttling")[0];
  EXPECT_EQ(f.severity(), "warning");
  EXPECT_EQ(f.start().seconds(), kDrT0)
      << "the first interval held back began at the report before";
  ASSERT_NE(DrEvidence(f, "thermal_violation_share"), nullptr);
  EXPECT_NEAR(DrEvidence(f, "thermal_violation_share")->value(), 2.0 / 3, 1e-9);
  EXPECT_DOUBLE_EQ(DrEvidence(f, "power_violation_share")->value(), 0);
  EXPECT_TRUE(DrHas(f.summary(), "held below its clocks 67 % of the time (heat)")) << f.summary();

  // The counter stops growing: closed at that report.
  Feed(DrViolations(90, 140, 5));
  ASSERT_EQ(Closed("thermal_throttling").size(), 1u);
  EXPECT_EQ(Closed("thermal_throttling")[0].end().seconds(), kDrT0 + 90);
}

TEST_F(DeviceRulesTest, ThermalViolationBelowTheShareAResetOrAbsentCountersDoNotFire) {
  // 40 % of the time, below the default share of 0.5.
  for (int64_t t = 0; t <= 120; t += 10) Feed(DrViolations(t, 4.0 * t / 10, std::nullopt));
  // A driver reload: the counters start again from 0, which is no negative share.
  Feed(DrViolations(130, 0, std::nullopt));
  Feed(DrViolations(140, 1, std::nullopt));
  // No counters at all (not NVIDIA, or not supported).
  for (int64_t t = 150; t <= 300; t += 10) Feed(DrViolations(t, std::nullopt, std::nullopt));
  EXPECT_TRUE(Opened("thermal_throttling").empty());
}

TEST_F(DeviceRulesTest, PowerViolationCountsAndAZeroShareTurnsTheCountersOff) {
  for (int64_t t = 0; t <= 30; t += 10) Feed(DrViolations(t, 0, 0.9 * t));
  ASSERT_EQ(Opened("thermal_throttling").size(), 1u);
  EXPECT_TRUE(DrHas(Opened("thermal_throttling")[0].summary(), "(power)"));

  Config off;
  off.thermal_throttling.violation_share = 0;
  Start(off);
  for (int64_t t = 0; t <= 60; t += 10) Feed(DrViolations(t, t, t));
  EXPECT_TRUE(Opened("thermal_throttling").empty());
}

// ---------------------------------------------------------------------------------------------
// low_sm_activity

// GPU 3 held by `job` (none when empty) with GPM SM activity `sm` (absent when nullopt), the
// coarse utilization at 100 % throughout.
v1::NodeReport DrSm(int64_t t, std::optional<double> sm, const std::string& job = "j1") {
  v1::NodeReport r = DrReport(t);
  v1::DeviceTelemetry* d = DrDevice(r, 3);
  d->mutable_utilization()->set_compute_ratio(1.0);
  if (sm) d->mutable_activity()->set_sm_ratio(*sm);
  d->mutable_activity()->set_tensor_ratio(0.3);
  if (!job.empty()) {
    v1::DeviceHolder* h = d->add_holders();
    h->set_kind(v1::HOLDER_KIND_SLURM);
    h->set_job(job);
  }
  return r;
}

TEST_F(DeviceRulesTest, LowSmActivityAgainstTheJobsOwnMedianFiresAfterForAndCloses) {
  // 30 min of a busy job (every 10 s, 0.55..0.65), then its SMs drop to 10 % while utilization
  // stays at 100 %.
  int64_t t = 0;
  for (; t < 1800; t += 10) Feed(DrSm(t, 0.55 + 0.01 * static_cast<double>((t / 10) % 11)));
  const int64_t drop = t;
  for (; t < drop + 290; t += 10) Feed(DrSm(t, 0.1));
  EXPECT_TRUE(Opened("low_sm_activity").empty()) << "under 5 min";
  for (; t <= drop + 300; t += 10) Feed(DrSm(t, 0.1));
  ASSERT_EQ(Opened("low_sm_activity").size(), 1u);
  const v1::Finding f = Opened("low_sm_activity")[0];
  EXPECT_EQ(f.severity(), "warning");
  EXPECT_EQ(f.device(), "3");
  EXPECT_EQ(f.plot(), "sm_ratio");
  EXPECT_EQ(f.start().seconds(), kDrT0 + drop);
  EXPECT_DOUBLE_EQ(DrEvidence(f, "sm_ratio")->value(), 0.1);
  EXPECT_NEAR(DrEvidence(f, "median_sm_ratio")->value(), 0.6, 0.011);
  EXPECT_EQ(DrEvidence(f, "job")->text(), "j1");
  EXPECT_TRUE(DrHasEvidence(f, {"tensor_ratio", "compute_ratio", "low_for", "share"}));
  EXPECT_TRUE(DrHas(f.summary(), "device 3 of job j1: SM activity 10% vs its 60% median"))
      << f.summary();
  EXPECT_TRUE(DrHas(f.summary(), "(utilization 100%)")) << f.summary();

  Feed(DrSm(t, 0.58));
  ASSERT_EQ(Closed("low_sm_activity").size(), 1u);
  EXPECT_EQ(Closed("low_sm_activity")[0].end().seconds(), kDrT0 + t);
}

TEST_F(DeviceRulesTest, LowSmActivityNeedsAJobABusyMedianAndGpmAndANewJobStartsOver) {
  int64_t t = 0;
  // No job: the same drop is nobody's.
  for (; t < 1800; t += 10) Feed(DrSm(t, 0.6, ""));
  for (const int64_t end = t + 600; t < end; t += 10) Feed(DrSm(t, 0.1, ""));
  // An idle job (median 10 %) going to 2 %: not busy enough to judge.
  for (const int64_t end = t + 1800; t < end; t += 10) Feed(DrSm(t, 0.1, "idle"));
  for (const int64_t end = t + 600; t < end; t += 10) Feed(DrSm(t, 0.02, "idle"));
  // A busy job, then another job on the device ramping up from 5 %: a fresh median.
  for (const int64_t end = t + 1800; t < end; t += 10) Feed(DrSm(t, 0.6, "first"));
  for (const int64_t end = t + 600; t < end; t += 10) Feed(DrSm(t, 0.05, "second"));
  // No SM activity at all (no GPM): nothing to judge.
  for (const int64_t end = t + 2400; t < end; t += 10) Feed(DrSm(t, std::nullopt, "third"));
  EXPECT_TRUE(Opened("low_sm_activity").empty());
}

TEST_F(DeviceRulesTest, LowSmActivityNeedsMostOfTheBaselineCovered) {
  // 20 of 30 minutes of history: the median is not judged yet.
  int64_t t = 0;
  for (; t < 1200; t += 10) Feed(DrSm(t, 0.6));
  for (const int64_t end = t + 600; t < end; t += 10) Feed(DrSm(t, 0.1));
  EXPECT_TRUE(Opened("low_sm_activity").empty());
}

// ---------------------------------------------------------------------------------------------
// memory_leak

v1::NodeReport DrUsed(int64_t t, double used_bytes, double total_gib = 80) {
  v1::NodeReport r = DrReport(t);
  v1::DeviceMemory* m = DrDevice(r, 0)->mutable_memory();
  m->set_total_bytes(static_cast<uint64_t>(total_gib * kDrGiB));
  m->set_used_bytes(static_cast<uint64_t>(used_bytes));
  return r;
}

// Deterministic +-32 MiB jitter so the fit is not trivially perfect.
double DrJitter(int64_t t) { return ((t * 7919) % 65 - 32) * kDrMiB; }

TEST_F(DeviceRulesTest, MemoryLeakFiresAfterTheWindowFillsAndClosesWhenTheJobFreesMemory) {
  int64_t t = 0;
  const double slope = 16 * kDrMiB;
  for (; t <= 1800; t += 10) {
    Feed(DrUsed(t, 10 * kDrGiB + slope * static_cast<double>(t) + DrJitter(t)));
    if (t < 1600) {
      ASSERT_TRUE(Opened("memory_leak").empty()) << "before 0.9 x window at " << t;
    }
  }
  ASSERT_EQ(Opened("memory_leak").size(), 1u);
  const v1::Finding f = Opened("memory_leak")[0];
  EXPECT_EQ(f.severity(), "warning");
  EXPECT_EQ(f.device(), "0");
  EXPECT_EQ(f.plot(), "memory_used_bytes");
  EXPECT_TRUE(DrHasEvidence(f, {"slope_bytes_per_second", "r_squared", "exhaustion_seconds",
                                "used_bytes", "total_bytes"}));
  EXPECT_NEAR(DrEvidence(f, "slope_bytes_per_second")->value(), slope, 0.01 * slope);
  EXPECT_GT(DrEvidence(f, "r_squared")->value(), 0.99);
  EXPECT_LT(DrEvidence(f, "exhaustion_seconds")->value(), 7200);

  // The job frees its memory: the window restarts and the finding closes.
  Feed(DrUsed(t, 2 * kDrGiB));
  ASSERT_EQ(Closed("memory_leak").size(), 1u);
  EXPECT_EQ(Closed("memory_leak")[0].end().seconds(), kDrT0 + t);
}

TEST_F(DeviceRulesTest, MemoryLeakOpensWithin30sOfTheWindowFilling) {
  int64_t opened_at = -1;  // the report offset at which it opened
  for (int64_t t = 0; t <= 2000 && opened_at < 0; t += 10) {
    Feed(DrUsed(t, 20 * kDrGiB + 16 * kDrMiB * static_cast<double>(t) + DrJitter(t)));
    if (!Opened("memory_leak").empty()) opened_at = t;
  }
  EXPECT_GE(opened_at, 1620) << "not before 0.9 x the 1800 s window";
  EXPECT_LE(opened_at, 1650);
  ASSERT_EQ(Opened("memory_leak").size(), 1u);
  EXPECT_EQ(Opened("memory_leak")[0].start().seconds(), kDrT0)
      << "the finding starts at its window's first sample";
}

TEST_F(DeviceRulesTest, MemoryLeakHealthyAllocatorCacheGrowingSlowlyDoesNotFire) {
  // A cache growing 4 MB/s at first and slowing down over hours (settling ~13 GiB higher),
  // starting with 30 GiB free: exhaustion is always hours away.
  double used = 50 * kDrGiB;
  for (int64_t t = 0; t <= 4 * 3600; t += 10) {
    used += 4e6 * std::exp(-static_cast<double>(t) / 3600.0) * 10;
    Feed(DrUsed(t, used + DrJitter(t)));
  }
  EXPECT_TRUE(Opened("memory_leak").empty()) << "decaying growth";
  // Steady 3 MB/s from 30 GiB free, judged over its first full window: 2.5 h to exhaustion.
  for (int64_t t = 5 * 3600; t <= 5 * 3600 + 1800; t += 10) {
    Feed(DrUsed(t, 50 * kDrGiB + 3e6 * static_cast<double>(t - 5 * 3600)));
  }
  EXPECT_TRUE(Opened("memory_leak").empty());
}

TEST_F(DeviceRulesTest, MemoryLeakJobThatFreesMemoryPeriodicallyOrNoUsedValueDoesNotFire) {
  // Grows 24 MiB/s for 900 s, then frees back to 4 GiB: never a full window of growth.
  for (int64_t t = 0; t <= 3 * 3600; t += 10) {
    Feed(DrUsed(t, 4 * kDrGiB + 24 * kDrMiB * static_cast<double>(t % 900)));
  }
  // Then a device that stops reporting used bytes.
  for (int64_t t = 4 * 3600; t <= 6 * 3600; t += 10) {
    v1::NodeReport r = DrReport(t);
    DrDevice(r, 0)->mutable_memory()->set_total_bytes(static_cast<uint64_t>(80 * kDrGiB));
    Feed(r);
  }
  EXPECT_TRUE(Opened("memory_leak").empty());
}

// ---------------------------------------------------------------------------------------------
// ecc_errors

v1::NodeReport DrEcc(int64_t t, std::optional<uint64_t> corrected,
                     std::optional<uint64_t> uncorrected, bool remap_failed = false) {
  v1::NodeReport r = DrReport(t);
  v1::DeviceErrors* e = DrDevice(r, 1)->mutable_errors();
  if (corrected) e->set_ecc_corrected_total(*corrected);
  if (uncorrected) e->set_ecc_uncorrected_total(*uncorrected);
  if (remap_failed) e->set_remapped_rows_failure(true);
  return r;
}

TEST_F(DeviceRulesTest, EccUncorrectedIncreaseIsCriticalHeldThenClosed) {
  Feed(DrEcc(0, std::nullopt, 3));
  EXPECT_TRUE(Opened("ecc_errors").empty()) << "a first value is a baseline";
  Feed(DrEcc(10, std::nullopt, 5));
  ASSERT_EQ(Opened("ecc_errors").size(), 1u);
  const v1::Finding f = Opened("ecc_errors")[0];
  EXPECT_EQ(f.severity(), "critical");
  EXPECT_EQ(f.device(), "1");
  EXPECT_EQ(f.plot(), "ecc_uncorrected_total");
  EXPECT_DOUBLE_EQ(DrEvidence(f, "ecc_uncorrected_new")->value(), 2);
  EXPECT_TRUE(DrHas(f.summary(), "2 new uncorrectable ECC errors")) << f.summary();
  Feed(DrEcc(500, std::nullopt, 5));
  EXPECT_TRUE(Closed("ecc_errors").empty()) << "held 600 s";
  Feed(DrEcc(610, std::nullopt, 5));
  ASSERT_EQ(Closed("ecc_errors").size(), 1u);
}

TEST_F(DeviceRulesTest, EccUncorrectedNamesTheLocationsThatCountedThem) {
  auto with_locations = [](int64_t t, uint64_t sram, uint64_t dram) {
    v1::NodeReport r = DrEcc(t, std::nullopt, sram + dram);
    v1::DeviceErrors* e = r.mutable_devices(0)->mutable_errors();
    for (const auto& [location, count] :
         {std::pair{v1::MEMORY_LOCATION_SRAM, sram}, {v1::MEMORY_LOCATION_DRAM, dram}}) {
      auto* l = e->add_ecc_by_location();
      l->set_location(location);
      l->set_uncorrected_total(count);
    }
    return r;
  };
  Feed(with_locations(0, 0, 0));
  Feed(with_locations(10, 1, 0));
  ASSERT_EQ(Opened("ecc_errors").size(), 1u);
  const v1::Finding f = Opened("ecc_errors")[0];
  EXPECT_TRUE(DrHas(f.summary(), "1 new uncorrectable ECC error (in sram)")) << f.summary();
  EXPECT_DOUBLE_EQ(DrEvidence(f, "ecc_uncorrected_total_sram")->value(), 1);
  EXPECT_FALSE(DrHasEvidence(f, {"ecc_uncorrected_total_dram"})) << "no uncorrected there";
}

TEST_F(DeviceRulesTest, EccFastCorrectedNeedsFiveMinutesOfHistory) {
  // 50 per 10 s = 18000/h, far over 100/h; judged only once 300 s are known.
  for (int64_t t = 0; t < 300; t += 10) Feed(DrEcc(t, 50 * static_cast<uint64_t>(t / 10), 0));
  EXPECT_TRUE(Opened("ecc_errors").empty());
  Feed(DrEcc(300, 1500, 0));
  ASSERT_EQ(Opened("ecc_errors").size(), 1u);
  const v1::Finding f = Opened("ecc_errors")[0];
  EXPECT_EQ(f.severity(), "warning");
  EXPECT_EQ(f.plot(), "ecc_corrected_total");
  EXPECT_NEAR(DrEvidence(f, "ecc_corrected_per_hour")->value(), 18000, 1);
  // An uncorrected error on top raises it to critical.
  Feed(DrEcc(310, 1550, 1));
  EXPECT_EQ(Open("ecc_errors", "1")->severity(), "critical");
}

TEST_F(DeviceRulesTest, EccSlowCorrectedResetsAndAbsentCountersDoNotFire) {
  // 1 corrected error a minute (60/h) for two hours.
  for (int64_t t = 0; t <= 7200; t += 60) Feed(DrEcc(t, static_cast<uint64_t>(t / 60), 7));
  // Driver reload: both counters reset to 0.
  Feed(DrEcc(7210, 0, 0));
  Feed(DrEcc(7220, 0, 0));
  // Counters absent.
  for (int64_t t = 7230; t <= 8000; t += 10) Feed(DrEcc(t, std::nullopt, std::nullopt));
  EXPECT_TRUE(Opened("ecc_errors").empty());
}

TEST_F(DeviceRulesTest, EccCorrectedRateSpansTheTrailingHourWhileTheTotalHoldsStill) {
  // A report a second: none for 10 minutes, a burst of 500 at 600 s, then none for over an hour.
  // The rate is measured from the last report at or before an hour ago, however long the total
  // has held still (the rule keeps runs of equal totals, not every report).
  const auto corrected = [](int64_t t) -> uint64_t { return t < 600 ? 0 : 500; };
  for (int64_t t = 0; t < 4200; ++t) Feed(DrEcc(t, corrected(t), 0));
  ASSERT_EQ(Opened("ecc_errors").size(), 1u);
  EXPECT_EQ(Opened("ecc_errors")[0].start().seconds(), kDrT0 + 600);
  // Up to 4199 s the hour reaches back before the burst (500 in it, over the 100/h threshold);
  // from 4200 s it starts at the burst, with none since. The last fast report is 4199 s, held
  // for hold_seconds (600): closed at 4799 s, not a second sooner or later.
  for (int64_t t = 4200; t <= 5000; ++t) Feed(DrEcc(t, corrected(t), 0));
  ASSERT_EQ(Closed("ecc_errors").size(), 1u);
  EXPECT_EQ(Closed("ecc_errors")[0].end().seconds(), kDrT0 + 4199 + 600);
}

TEST_F(DeviceRulesTest, EccRemapFailureIsCriticalWhileReported) {
  Feed(DrEcc(0, 0, 0, true));
  ASSERT_EQ(Opened("ecc_errors").size(), 1u);
  EXPECT_EQ(Opened("ecc_errors")[0].severity(), "critical");
  EXPECT_TRUE(DrHasEvidence(Opened("ecc_errors")[0], {"remapped_rows_failure"}));
  Feed(DrEcc(10, 0, 0, false));
  EXPECT_EQ(Closed("ecc_errors").size(), 1u);
}

// ---------------------------------------------------------------------------------------------
// xid_error

v1::NodeReport DrXid(int64_t t, std::optional<uint64_t> code, std::optional<uint32_t> index,
                     std::string uuid = {}, std::string message = {}) {
  v1::NodeReport r = DrReport(t);
  for (uint32_t i = 0; i < 4; ++i) DrDevice(r, i);
  if (code) {
    v1::Event* e = DrEvent(r, v1::EVENT_KIND_XID, t);
    e->set_code(*code);
    if (index) e->set_device_index(*index);
    e->set_device_uuid(uuid);
    e->set_message(message);
  }
  return r;
}

TEST_F(DeviceRulesTest, Xid79IsCriticalOnTheNamedDeviceHeldThenClosed) {
  Feed(DrXid(0, std::nullopt, std::nullopt));
  Feed(DrXid(10, 79, std::nullopt, "GPU-2", "GPU has fallen off the bus."));
  ASSERT_EQ(Opened("xid_error").size(), 1u);
  const v1::Finding f = Opened("xid_error")[0];
  EXPECT_EQ(f.severity(), "critical");
  EXPECT_EQ(f.device(), "2");
  EXPECT_EQ(f.device_uuid(), "GPU-2");
  EXPECT_EQ(f.plot(), "device_up");
  EXPECT_EQ(f.summary(), "device 2 XID 79 (GPU has fallen off the bus)");
  EXPECT_DOUBLE_EQ(DrEvidence(f, "xid")->value(), 79);
  EXPECT_EQ(DrEvidence(f, "message")->text(), "GPU has fallen off the bus.");

  Feed(DrXid(300, std::nullopt, std::nullopt));
  EXPECT_TRUE(Open("xid_error", "2"));
  Feed(DrXid(620, std::nullopt, std::nullopt));
  ASSERT_EQ(Closed("xid_error").size(), 1u);
  EXPECT_EQ(Closed("xid_error")[0].end().seconds(), kDrT0 + 620);
}

TEST_F(DeviceRulesTest, XidByIndexIsAWarningUnlessCriticalAndIgnoredOnesDoNot) {
  Config c;
  c.xid_error.ignore = {43};
  Start(c);
  Feed(DrXid(0, 13, 1));
  ASSERT_EQ(Opened("xid_error").size(), 1u);
  EXPECT_EQ(Opened("xid_error")[0].severity(), "warning");
  EXPECT_EQ(Opened("xid_error")[0].device_uuid(), "GPU-1") << "the uuid found from the index";
  EXPECT_TRUE(DrHas(Opened("xid_error")[0].summary(), "graphics engine exception"))
      << Opened("xid_error")[0].summary();

  Feed(DrXid(10, 43, 3));  // ignored
  EXPECT_FALSE(Open("xid_error", "3"));

  // A device not in the report: named by its index.
  Feed(DrXid(20, 48, 7));
  const std::optional<v1::Finding> f = Open("xid_error", "7");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->severity(), "critical");
  EXPECT_EQ(f->device_uuid(), "");
  EXPECT_EQ(Opened("xid_error").size(), 2u);
}

// XIDs graded by the error catalogue (diagnostics/error_catalog.cc), one per action class.
class XidCatalogTest : public DeviceRulesTest {
 protected:
  // The finding one XID on device 1 opens.
  v1::Finding FindingOf(uint64_t code) {
    Feed(DrXid(0, code, 1));
    const std::vector<v1::Finding> opened = Opened("xid_error");
    EXPECT_EQ(opened.size(), 1u);
    return opened.empty() ? v1::Finding() : opened[0];
  }
};

TEST_F(XidCatalogTest, RestartAppXid13IsAWarningToRestartTheApplication) {
  const v1::Finding f = FindingOf(13);
  EXPECT_EQ(f.severity(), "warning");
  EXPECT_EQ(f.action(), "restart_application");
  EXPECT_EQ(f.summary(), "device 1 XID 13 (graphics engine exception)");
  EXPECT_EQ(DrEvidence(f, "action")->text(), "restart_application");
}

TEST_F(XidCatalogTest, ContainedEccXid94IsAWarningToRestartTheApplication) {
  const v1::Finding f = FindingOf(94);
  EXPECT_EQ(f.severity(), "warning");
  EXPECT_EQ(f.action(), "restart_application");
}

TEST_F(XidCatalogTest, ResetGpuXid95IsCriticalToResetTheDevice) {
  const v1::Finding f = FindingOf(95);
  EXPECT_EQ(f.severity(), "critical");
  EXPECT_EQ(f.action(), "reset_device");
  EXPECT_EQ(DrEvidence(f, "xid_name")->text(), "uncontained ECC error");
}

TEST_F(XidCatalogTest, DoubleBitEccXid48IsCriticalToResetTheDevice) {
  const v1::Finding f = FindingOf(48);
  EXPECT_EQ(f.severity(), "critical");
  EXPECT_EQ(f.action(), "reset_device");
}

TEST_F(XidCatalogTest, RestartBmXid79IsCriticalToRebootTheNode) {
  const v1::Finding f = FindingOf(79);
  EXPECT_EQ(f.severity(), "critical");
  EXPECT_EQ(f.action(), "reboot_node");
}

TEST_F(XidCatalogTest, IgnoreXid92HighSingleBitRateIsAWarningWithNoAction) {
  // Critical before the catalogue (the old default `critical` list); NVIDIA's bucket is IGNORE.
  const v1::Finding f = FindingOf(92);
  EXPECT_EQ(f.severity(), "warning");
  EXPECT_EQ(f.action(), "none");
}

TEST_F(XidCatalogTest, IgnoreXid43ApplicationFaultIsAWarningWithNoAction) {
  const v1::Finding f = FindingOf(43);
  EXPECT_EQ(f.severity(), "warning");
  EXPECT_EQ(f.action(), "none");
}

TEST_F(XidCatalogTest, CheckMechanicalsXid54IsAWarningToCheckTheHardware) {
  const v1::Finding f = FindingOf(54);
  EXPECT_EQ(f.severity(), "warning");
  EXPECT_EQ(f.action(), "check_hardware");
}

TEST_F(XidCatalogTest, UpdateSwfwXid78IsAWarningToUpdateTheSoftware) {
  const v1::Finding f = FindingOf(78);
  EXPECT_EQ(f.severity(), "warning");
  EXPECT_EQ(f.action(), "update_software");
}

TEST_F(XidCatalogTest, ContactSupportXid61IsAWarningToContactSupport) {
  const v1::Finding f = FindingOf(61);
  EXPECT_EQ(f.severity(), "warning");
  EXPECT_EQ(f.action(), "contact_support");
}

TEST_F(XidCatalogTest, UnknownXidIsAWarningToContactSupportWithoutAName) {
  const v1::Finding f = FindingOf(9999);
  EXPECT_EQ(f.severity(), "warning");
  EXPECT_EQ(f.action(), "contact_support");
  EXPECT_EQ(f.summary(), "device 1 XID 9999");
  EXPECT_EQ(DrEvidence(f, "xid_name"), nullptr);
  EXPECT_EQ(DrEvidence(f, "action")->text(), "contact_support");
}

TEST_F(XidCatalogTest, OverridesFromTheConfigFileChangeSeverityAndAction) {
  Start(
      ParseConfig("rules:\n"
                  "  xid_error:\n"
                  "    overrides:\n"
                  "      - {xid: 13, severity: critical, action: reset_device}\n"
                  "      - {xid: 79, action: drain_node}\n"
                  "      - {xid: 9999, severity: critical}\n",
                  "diag.yaml"));
  Feed(DrXid(0, 13, 1));
  Feed(DrXid(10, 79, 2));
  Feed(DrXid(20, 9999, 3));
  const std::optional<v1::Finding> xid13 = Open("xid_error", "1");
  const std::optional<v1::Finding> xid79 = Open("xid_error", "2");
  const std::optional<v1::Finding> unknown = Open("xid_error", "3");
  ASSERT_TRUE(xid13 && xid79 && unknown);
  EXPECT_EQ(xid13->severity(), "critical");
  EXPECT_EQ(xid13->action(), "reset_device");
  EXPECT_EQ(xid79->severity(), "critical") << "the catalogue's severity, only the action changed";
  EXPECT_EQ(xid79->action(), "drain_node");
  EXPECT_EQ(unknown->severity(), "critical");
  EXPECT_EQ(unknown->action(), "contact_support");
}

TEST_F(XidCatalogTest, CriticalListWinsOverCatalogueAndOverridesAndIgnoreDropsTheXid) {
  Config c;
  c.xid_error.overrides = {{.xid = 92, .severity = "warning", .action = "reset_device"}};
  c.xid_error.critical = {92};
  c.xid_error.ignore = {13};
  Start(c);
  Feed(DrXid(0, 92, 1));
  Feed(DrXid(10, 13, 2));
  ASSERT_TRUE(Open("xid_error", "1"));
  EXPECT_EQ(Open("xid_error", "1")->severity(), "critical");
  EXPECT_EQ(Open("xid_error", "1")->action(), "reset_device");
  EXPECT_FALSE(Open("xid_error", "2"));
}

TEST_F(DeviceRulesTest, EccUncorrectedOnNvidiaSaysResetDeviceAndRemapFailureDrainNode) {
  Feed(DrEcc(0, std::nullopt, 3));
  Feed(DrEcc(10, std::nullopt, 5));
  ASSERT_TRUE(Open("ecc_errors", "1"));
  EXPECT_EQ(Open("ecc_errors", "1")->action(), "reset_device");
  EXPECT_EQ(DrEvidence(*Open("ecc_errors", "1"), "action")->text(), "reset_device");

  Start(Config{});
  Feed(DrEcc(0, 0, 0, true));
  ASSERT_TRUE(Open("ecc_errors", "1"));
  EXPECT_EQ(Open("ecc_errors", "1")->action(), "drain_node");
}

TEST_F(DeviceRulesTest, EccUmcUncorrectedOnAmdSaysResetDevice) {
  for (int64_t t : {0, 10}) {
    v1::NodeReport r = DrEcc(t, std::nullopt, t == 0 ? 1 : 2);
    r.mutable_devices(0)->mutable_identity()->set_vendor("amd");
    Feed(r);
  }
  ASSERT_TRUE(Open("ecc_errors", "1"));
  EXPECT_EQ(Open("ecc_errors", "1")->severity(), "critical");
  EXPECT_EQ(Open("ecc_errors", "1")->action(), "reset_device");
}

TEST_F(DeviceRulesTest, EccCorrectedRateSaysNoActionAndAVendorWithoutEntriesSaysNothing) {
  // 300 corrected errors a minute for 10 minutes: above 100/h.
  for (int64_t t = 0; t <= 600; t += 60) {
    Feed(DrEcc(t, static_cast<uint64_t>(t * 5), 0));
  }
  ASSERT_TRUE(Open("ecc_errors", "1"));
  EXPECT_EQ(Open("ecc_errors", "1")->severity(), "warning");
  EXPECT_EQ(Open("ecc_errors", "1")->action(), "none");

  Start(Config{});
  for (int64_t t : {0, 10}) {
    v1::NodeReport r = DrEcc(t, std::nullopt, t == 0 ? 1 : 2);
    r.mutable_devices(0)->mutable_identity()->set_vendor("sim");
    Feed(r);
  }
  ASSERT_TRUE(Open("ecc_errors", "1"));
  EXPECT_EQ(Open("ecc_errors", "1")->action(), "") << "no catalogue entry for the vendor";
  EXPECT_EQ(DrEvidence(*Open("ecc_errors", "1"), "action"), nullptr);
}

// ---------------------------------------------------------------------------------------------
// firmware_below_minimum

v1::NodeReport DrFirmware(int64_t t, std::string vendor, std::string firmware,
                          std::string driver = {}) {
  v1::NodeReport r = DrReport(t);
  v1::DeviceIdentity* id = DrDevice(r, 0)->mutable_identity();
  id->set_vendor(vendor);
  id->set_firmware_version(firmware);
  id->set_driver_version(driver);
  return r;
}

TEST_F(DeviceRulesTest, FirmwareBelowTheDefaultSimMinimumFiresAndClosesOnUpgrade) {
  Feed(DrFirmware(0, "sim", "0.9.7-sim"));
  ASSERT_EQ(Opened("firmware_below_minimum").size(), 1u);
  const v1::Finding f = Opened("firmware_below_minimum")[0];
  EXPECT_EQ(f.severity(), "warning");
  EXPECT_EQ(f.device(), "0");
  EXPECT_EQ(f.plot(), "");
  EXPECT_EQ(DrEvidence(f, "firmware_version")->text(), "0.9.7-sim (minimum 1.0.0)");
  Feed(DrFirmware(10, "sim", "1.0.0-sim"));  // equal: the suffix is not a component
  ASSERT_EQ(Closed("firmware_below_minimum").size(), 1u);
  Feed(DrFirmware(20, "sim", "1.0.10"));
  Feed(DrFirmware(30, "sim", ""));        // not reported
  Feed(DrFirmware(40, "nvidia", "0.1"));  // no minimum for the vendor
  EXPECT_EQ(Opened("firmware_below_minimum").size(), 1u);
}

TEST_F(DeviceRulesTest, FirmwareComparesNumericComponentsNotText) {
  Config c;
  c.firmware_below_minimum.minimums = {
      {.vendor = "nvidia", .model = "", .firmware = "96.00.74.00.01", .driver = "550.127.05"},
      {.vendor = "nvidia", .model = "NVIDIA A100", .firmware = "99", .driver = ""}};
  Start(c);
  Feed(DrFirmware(0, "nvidia", "96.00.89.00.01", "550.127.5"));  // both at or above
  EXPECT_TRUE(Opened("firmware_below_minimum").empty()) << "the A100 minimum is for another model";
  Feed(DrFirmware(10, "nvidia", "96.00.89.00.01", "550.54.15"));  // 54 < 127 numerically
  ASSERT_EQ(Opened("firmware_below_minimum").size(), 1u);
  const v1::Finding f = Opened("firmware_below_minimum")[0];
  EXPECT_EQ(DrEvidence(f, "driver_version")->text(), "550.54.15 (minimum 550.127.05)");
  EXPECT_EQ(DrEvidence(f, "firmware_version"), nullptr);
  Feed(DrFirmware(20, "nvidia", "96.00.74.00.01", "560.28.03"));
  EXPECT_EQ(Closed("firmware_below_minimum").size(), 1u);
  Feed(DrFirmware(30, "nvidia", "96.00.74", ""));  // 96.0.74(.0.0) < 96.0.74.0.1
  EXPECT_EQ(Opened("firmware_below_minimum").size(), 2u);
}

// ---------------------------------------------------------------------------------------------
// device_lost

v1::NodeReport DrDevices(int64_t t, std::vector<uint32_t> indexes, bool collector_ok = true) {
  v1::NodeReport r = DrReport(t);
  for (uint32_t i : indexes) DrDevice(r, i);
  v1::CollectorStatus* c = r.add_collectors();
  c->set_name("nvml");
  c->set_success(collector_ok);
  return r;
}

TEST_F(DeviceRulesTest, DeviceLostWhenItSaysUpFalseAndClearsWhenItAnswers) {
  Feed(DrDevices(0, {0, 1}));
  v1::NodeReport down = DrDevices(10, {0, 1});
  down.mutable_devices(1)->set_up(false);
  Feed(down);
  ASSERT_EQ(Opened("device_lost").size(), 1u);
  const v1::Finding f = Opened("device_lost")[0];
  EXPECT_EQ(f.severity(), "critical");
  EXPECT_EQ(f.device(), "1");
  EXPECT_EQ(f.device_uuid(), "GPU-1");
  EXPECT_EQ(f.plot(), "device_up");
  EXPECT_TRUE(DrHasEvidence(f, {"state"}));
  v1::NodeReport back = DrDevices(20, {0, 1});
  back.mutable_devices(1)->set_up(true);
  Feed(back);
  ASSERT_EQ(Closed("device_lost").size(), 1u);
  EXPECT_EQ(Closed("device_lost")[0].end().seconds(), kDrT0 + 20);
}

TEST_F(DeviceRulesTest, DeviceMissingWhileItsSiblingsReportIsLostAtOnce) {
  Feed(DrDevices(0, {0, 1, 2}));
  Feed(DrDevices(10, {0, 2}));
  ASSERT_EQ(Opened("device_lost").size(), 1u);
  EXPECT_EQ(Opened("device_lost")[0].device(), "1");
  EXPECT_EQ(Opened("device_lost")[0].start().seconds(), kDrT0 + 10);
  EXPECT_TRUE(DrHasEvidence(Opened("device_lost")[0], {"missing_seconds"}));
  Feed(DrDevices(20, {0, 1, 2}));  // answers again (up absent: not lost)
  ASSERT_EQ(Closed("device_lost").size(), 1u);
}

TEST_F(DeviceRulesTest, DeviceMissingBecauseTheCollectorFailedIsJudgedAfterTwoIntervals) {
  Feed(DrDevices(0, {0}));
  Feed(DrDevices(10, {0}));
  Feed(DrDevices(20, {}, false));  // a failed tick: no devices at all
  EXPECT_TRUE(Opened("device_lost").empty()) << "one missed tick is not a loss";
  Feed(DrDevices(30, {0}));
  Feed(DrDevices(40, {}, false));
  EXPECT_TRUE(Opened("device_lost").empty());
  Feed(DrDevices(50, {}, false));  // 20 s = two intervals since last seen
  ASSERT_EQ(Opened("device_lost").size(), 1u);
  EXPECT_EQ(Opened("device_lost")[0].device(), "0");
  EXPECT_EQ(Opened("device_lost")[0].start().seconds(), kDrT0 + 40);

  // A failed collector with other devices present is not proof either.
  Start(Config{});
  Feed(DrDevices(0, {0, 1}));
  Feed(DrDevices(10, {0, 1}));
  Feed(DrDevices(20, {0}, false));
  EXPECT_TRUE(Opened("device_lost").empty());
  Feed(DrDevices(30, {0}, false));
  ASSERT_EQ(Opened("device_lost").size(), 1u);
  EXPECT_EQ(Opened("device_lost")[0].device(), "1");
}

TEST_F(DeviceRulesTest, DeviceLostStaysOpenWhileTheDeviceIsAbsentFromAReport) {
  Feed(DrDevices(0, {0}));
  v1::NodeReport down = DrDevices(10, {0});
  down.mutable_devices(0)->set_up(false);
  Feed(down);
  ASSERT_EQ(Opened("device_lost").size(), 1u);
  Feed(DrDevices(20, {}, false));  // the rule does not raise it (one tick) but it stays open
  EXPECT_TRUE(Closed("device_lost").empty());
  EXPECT_TRUE(Open("device_lost", "0"));
  v1::NodeReport up = DrDevices(30, {0});
  up.mutable_devices(0)->set_up(true);
  Feed(up);
  ASSERT_EQ(Closed("device_lost").size(), 1u);
  EXPECT_EQ(Opened("device_lost").size(), 1u) << "never reopened";
}

TEST_F(DeviceRulesTest, DeviceLostEventAndUnknownUp) {
  // up absent in every report: unknown, never lost.
  for (int64_t t = 0; t <= 50; t += 10) Feed(DrDevices(t, {0, 1}));
  EXPECT_TRUE(Opened("device_lost").empty());
  v1::NodeReport r = DrDevices(60, {0, 1});
  v1::Event* e = DrEvent(r, v1::EVENT_KIND_DEVICE_LOST, 58);
  e->set_device_index(0);
  e->set_message("GPU is lost");
  Feed(r);
  ASSERT_EQ(Opened("device_lost").size(), 1u);
  EXPECT_EQ(Opened("device_lost")[0].device(), "0");
  EXPECT_EQ(Opened("device_lost")[0].start().seconds(), kDrT0 + 58);
  EXPECT_EQ(DrEvidence(Opened("device_lost")[0], "message")->text(), "GPU is lost");
}

}  // namespace
}  // namespace diagnostics_device_rules_test
}  // namespace accelmon::diagnostics
