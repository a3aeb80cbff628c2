#include "daemon/exporter/metrics_renderer.h"

#include <gtest/gtest.h>
#include <prometheus/text_serializer.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <tuple>

#include "daemon/common/version.h"
#include "daemon/exporter/text_exposition.h"
#include "support/golden.h"
#include "support/prom_text.h"

namespace accelmon {
namespace metrics_renderer_test {
namespace {

using testing::CountSamples;
using testing::FindValue;
using testing::ParseExposition;

const Clock::time_point kNow = Clock::time_point(std::chrono::seconds(1'700'000'001));

// A node with one fully reported device and one that reports almost nothing.
v1::NodeReport FullNode() {
  v1::NodeReport r;
  r.set_node("gpu-node-01");
  r.set_agent_instance_id("0123456789abcdef");
  r.set_sequence(7);
  r.mutable_timestamp()->set_seconds(1'700'000'000);
  r.mutable_timestamp()->set_nanos(500'000'000);
  r.mutable_interval()->set_seconds(1);
  auto* ok = r.add_collectors();
  ok->set_name("meminfo");
  ok->set_success(true);
  ok->set_duration_seconds(0.000125);
  auto* failed = r.add_collectors();
  failed->set_name("nvml");
  failed->set_success(false);
  failed->set_duration_seconds(0.5);
  failed->set_error("dlopen libnvidia-ml.so.1: not found");
  r.mutable_agent()->set_dropped_reports_total(3);
  r.mutable_agent()->set_spool_reports(1);
  r.mutable_agent()->set_resent_reports_total(2);
  (*r.mutable_agent()->mutable_push_rejected_total())["unknown_device"] = 2;
  (*r.mutable_agent()->mutable_push_rejected_total())["allocated_exceeds_reserved"] = 0;
  r.mutable_host()->mutable_memory()->set_total_bytes(540'000'000'000);
  r.mutable_host()->mutable_memory()->set_available_bytes(400'000'000'000);

  auto* d = r.add_devices();
  auto* id = d->mutable_identity();
  id->set_vendor("nvidia");
  id->set_model("NVIDIA H200");
  id->set_uuid("GPU-11111111-2222-3333-4444-555555555555");
  id->set_index(0);
  id->set_pci_bus_id("0000:18:00.0");
  id->set_firmware_version("96.00.99.00.01");
  id->set_driver_version("570.86.15");
  d->set_up(true);
  auto* m = d->mutable_memory();
  m->set_total_bytes(150'000'000'000);
  m->set_used_bytes(80'000'000'000);
  m->set_free_bytes(69'500'000'000);
  m->set_reserved_bytes(500'000'000);
  m->set_largest_free_block_bytes(20'000'000'000);
  m->set_fragmentation_ratio(0.7122302158273381);
  auto* t = d->mutable_thermal();
  t->set_core_celsius(71);
  t->set_memory_celsius(78.5);
  t->set_slowdown_threshold_celsius(87);
  t->set_shutdown_threshold_celsius(95);
  (*t->mutable_throttle_reasons())["sw_power_cap"] = true;
  (*t->mutable_throttle_reasons())["hw_thermal"] = false;
  d->mutable_power()->set_usage_watts(612.25);
  d->mutable_power()->set_limit_watts(700);
  d->mutable_power()->set_energy_joules_total(123456789.5);
  d->mutable_utilization()->set_compute_ratio(0.93);
  d->mutable_utilization()->set_memory_bandwidth_ratio(0.61);
  d->mutable_clocks()->set_compute_hz(1.98e9);
  d->mutable_errors()->set_ecc_corrected_total(2);
  d->mutable_errors()->set_ecc_uncorrected_total(0);
  // The health counters and states (NVML), a fan on this board.
  t->set_fan_speed_ratio(0.45);
  d->mutable_clocks()->set_power_violation_seconds_total(12.5);
  d->mutable_clocks()->set_thermal_violation_seconds_total(0);
  d->mutable_state()->set_performance_state(0);
  d->mutable_state()->set_persistence_mode(true);
  d->mutable_activity()->set_sm_ratio(0.71);
  d->mutable_activity()->set_tensor_ratio(0.42);
  d->mutable_activity()->set_dram_bandwidth_ratio(0.6);
  d->mutable_activity()->set_vector_ratio(0.35);
  d->mutable_activity()->add_compute_die_ratios(0.7);
  d->mutable_activity()->add_compute_die_ratios(0.55);
  d->mutable_activity()->set_nvlink_transmit_bytes_per_second(1.5e11);
  d->mutable_errors()->set_ecc_corrected_lifetime_total(40);
  d->mutable_errors()->set_ecc_uncorrected_lifetime_total(1);
  d->mutable_errors()->set_retired_pages_single_bit(2);
  d->mutable_errors()->set_retired_pages_double_bit(0);
  d->mutable_errors()->set_retired_pages_pending(false);
  for (const auto location : {v1::MEMORY_LOCATION_DRAM, v1::MEMORY_LOCATION_SRAM}) {
    auto* l = d->mutable_errors()->add_ecc_by_location();
    l->set_location(location);
    l->set_corrected_total(location == v1::MEMORY_LOCATION_DRAM ? 2 : 0);
    l->set_uncorrected_total(0);
    l->set_corrected_lifetime_total(location == v1::MEMORY_LOCATION_DRAM ? 30 : 10);
    l->set_uncorrected_lifetime_total(location == v1::MEMORY_LOCATION_DRAM ? 0 : 1);
  }
  d->mutable_errors()->set_remapped_rows_pending(false);
  d->mutable_errors()->set_remapped_rows_failure(false);
  auto* nv = d->add_links();
  nv->set_kind(v1::LINK_KIND_NVLINK);
  nv->set_name("nvlink0");
  nv->set_peer("0000:28:00.0");
  nv->set_up(true);
  nv->set_transmit_bytes_total(1'000'000'000'000);
  nv->set_receive_bytes_total(999'000'000'000);
  nv->set_max_bandwidth_bytes_per_second(50e9);
  (*nv->mutable_errors_total())["replay"] = 4;
  (*nv->mutable_errors_total())["crc"] = 1;
  auto* fabric = d->add_links();  // NVSwitch fabric registration, with its health bit
  fabric->set_kind(v1::LINK_KIND_NVLINK_FABRIC);
  fabric->set_name("fabric");
  fabric->set_peer("nvswitch");
  fabric->set_up(true);
  fabric->set_degraded(false);
  auto* pcie = d->add_links();
  pcie->set_kind(v1::LINK_KIND_PCIE);
  pcie->set_name("pcie");
  pcie->set_peer("host");
  pcie->set_up(false);
  // A training process that pushed its allocator statistics (one with only some of them).
  auto* proc = d->add_processes();
  proc->set_pid(4242);
  proc->set_job("slurm-1234");
  proc->set_rank("0");
  proc->set_reserved_bytes(60'000'000'000);
  proc->set_allocated_bytes(50'000'000'000);
  proc->set_largest_free_block_bytes(2'000'000'000);
  proc->set_alloc_retries_total(12);
  proc->set_ooms_total(0);
  proc->set_used_bytes(61'000'000'000);
  proc->set_steps_total(1500);
  proc->set_world_size(8);
  proc->set_command("python3");
  proc->set_user("alice");
  auto* partial = d->add_processes();
  partial->set_pid(4243);
  partial->set_reserved_bytes(1'000'000'000);
  // A process the driver lists that pushes nothing (a profiler, say).
  auto* listed = d->add_processes();
  listed->set_pid(5150);
  listed->set_used_bytes(500'000'000);
  listed->set_user("bob");
  // Who holds the device: a Kubernetes container running job slurm-1234's rank 0 (its GPU
  // through a DRA claim), and bob's process outside any job.
  auto* pod = d->add_holders();
  pod->set_kind(v1::HOLDER_KIND_POD);
  pod->set_job("slurm-1234");
  pod->set_pod("trainer-0");
  pod->set_namespace_("ml");
  pod->set_container("pytorch");
  pod->set_claim("train-gpus");
  pod->set_claim_namespace("ml");
  pod->set_pod_uid("0b7c0e8a-1f2d-4e3c-8a9b-1c2d3e4f5a6b");
  pod->set_user("alice");
  pod->add_pids(4242);
  pod->add_pids(4243);
  pod->set_rank("0");
  pod->set_world_size(8);
  pod->set_memory_used_bytes(61'000'000'000);
  pod->set_command("python3");
  auto* other = d->add_holders();
  other->set_kind(v1::HOLDER_KIND_PROCESS);
  other->set_user("bob");
  other->add_pids(5150);
  other->set_memory_used_bytes(500'000'000);
  other->set_command("nsys");

  auto* sparse = r.add_devices();
  sparse->mutable_identity()->set_vendor("huawei");
  sparse->mutable_identity()->set_model("Ascend910B");
  sparse->mutable_identity()->set_uuid("npu-1");
  sparse->mutable_identity()->set_index(1);
  sparse->mutable_memory()->set_total_bytes(68'719'476'736);
  sparse->mutable_memory()->set_used_bytes(0);  // an idle device: zero, and present
  auto* slurm = sparse->add_holders();          // a Slurm step; its processes are not listed
  slurm->set_kind(v1::HOLDER_KIND_SLURM);
  slurm->set_job("slurm-1234");
  slurm->set_step("0");
  slurm->set_user("alice");

  // A MIG device of the H200: a device of its own that names its GPU.
  d->mutable_state()->set_mig_enabled(true);
  auto* mig = r.add_devices();
  mig->mutable_identity()->set_vendor("nvidia");
  mig->mutable_identity()->set_model("NVIDIA H200 MIG 1g.18gb");
  mig->mutable_identity()->set_uuid("MIG-5c1d0000-0000-4000-8000-000000000009");
  mig->mutable_identity()->set_index(100);
  auto* instance = mig->mutable_identity()->mutable_mig();
  instance->set_parent_uuid(d->identity().uuid());
  instance->set_parent_index(0);
  instance->set_gpu_instance_id(9);
  instance->set_compute_instance_id(0);
  instance->set_profile("1g.18gb");
  mig->set_up(true);
  mig->mutable_memory()->set_total_bytes(19'327'352'832);
  mig->mutable_memory()->set_used_bytes(1'073'741'824);
  return r;
}

std::vector<NodeEntry> Nodes() {
  v1::NodeReport quiet;
  quiet.set_node("gpu-node-02");
  quiet.set_agent_instance_id("fedcba9876543210");
  quiet.set_sequence(1);
  quiet.mutable_timestamp()->set_seconds(1'699'999'990);
  quiet.mutable_interval()->set_seconds(2);
  NodeEntry full{std::make_shared<const v1::NodeReport>(FullNode()),
                 kNow - std::chrono::milliseconds(500)};
  // What the node store measured from earlier reports (step_rates_test.cc).
  full.step_rates = std::make_shared<const std::vector<StepRate>>(
      std::vector<StepRate>{{.device_index = 0, .pid = 4242, .steps_per_second = 2.5}});
  return {full,
          // Last heard 10 s ago with a 2 s interval: more than three intervals missed.
          {std::make_shared<const v1::NodeReport>(quiet), kNow - std::chrono::seconds(10)}};
}

std::string Serialize(const std::vector<prometheus::MetricFamily>& families) {
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, families);
  return out.str();
}

// What /metrics writes for `nodes` (without the per-job series: what RenderNodes has).
std::string NodesText(const std::vector<NodeEntry>& nodes) {
  TextExpositionSink sink;
  EmitNodes(nodes, kNow, sink);
  std::string out;
  sink.AppendTo(out);
  return out;
}

// What /metrics writes for `nodes`.
std::string Text(const std::vector<NodeEntry>& nodes) {
  TextExpositionSink sink;
  EmitNodes(nodes, kNow, sink);
  EmitJobs(nodes, sink);
  std::string out;
  sink.AppendTo(out);
  return out;
}

TEST(MetricsRenderer, MatchesGoldenExposition) {
  EXPECT_TRUE(testing::MatchesGolden(Text(Nodes()), "render.prom"));
}

// The text sink and the MetricFamily sink (OpenMetrics writer) see the same samples, and
// prometheus-cpp's serialiser of the latter writes the same exposition except, at most, for
// doubles it rounds to 16 digits.
TEST(MetricsRenderer, TextAndMetricFamiliesAgree) {
  const std::string ours = NodesText(Nodes());
  const std::string theirs = Serialize(RenderNodes(Nodes(), kNow));
  const auto a = ParseExposition(ours);
  const auto b = ParseExposition(theirs);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].name, b[i].name);
    EXPECT_EQ(a[i].labels, b[i].labels) << a[i].name;
    EXPECT_DOUBLE_EQ(a[i].value, b[i].value) << a[i].name;
  }
}

TEST(MetricsRenderer, AbsentValuesAreAbsentNotZero) {
  const auto samples = ParseExposition(Text(Nodes()));
  const std::map<std::string, std::string> npu{{"node", "gpu-node-01"}, {"device", "1"}};
  EXPECT_EQ(FindValue(samples, "accelmon_device_memory_used_bytes", npu), 0.0);
  EXPECT_EQ(FindValue(samples, "accelmon_device_memory_total_bytes", npu), 68'719'476'736.0);
  for (const char* absent :
       {"accelmon_device_memory_free_bytes", "accelmon_device_temperature_celsius",
        "accelmon_device_power_watts", "accelmon_device_utilization_ratio", "accelmon_device_up",
        "accelmon_device_memory_fragmentation_ratio"}) {
    EXPECT_FALSE(FindValue(samples, absent, npu)) << absent;
  }
  // The quiet node reported no host memory at all.
  EXPECT_FALSE(FindValue(samples, "accelmon_host_memory_total_bytes", {{"node", "gpu-node-02"}}));
  // Only the values that were reported: no swap, no clocks for memory.
  EXPECT_EQ(CountSamples(samples, "accelmon_host_memory_swap_total_bytes"), 0u);
  EXPECT_FALSE(FindValue(samples, "accelmon_device_clock_hertz", {{"kind", "memory"}}));
}

TEST(MetricsRenderer, NodeUpFollowsMissedIntervals) {
  const auto samples = ParseExposition(Text(Nodes()));
  EXPECT_EQ(FindValue(samples, "accelmon_node_up", {{"node", "gpu-node-01"}}), 1.0);
  EXPECT_EQ(FindValue(samples, "accelmon_node_up", {{"node", "gpu-node-02"}}), 0.0);
  EXPECT_EQ(
      FindValue(samples, "accelmon_node_last_report_timestamp_seconds", {{"node", "gpu-node-01"}}),
      1'700'000'000.5);
}

// NCCL RAS's communicators (collectors/nccl_ras.h): this node's ranks with their counts, the
// other nodes' listed ranks with their host, how far behind the ones that lag are.
TEST(MetricsRenderer, NcclRanksCarryStateAndTheLaggingOnesHowFarBehind) {
  v1::NodeReport r;
  r.set_node("gpu-7");
  r.set_agent_instance_id("ras");
  r.set_sequence(1);
  r.mutable_timestamp()->set_seconds(1'700'000'000);
  auto* c = r.add_communicators();
  c->set_hash("0x9e1");
  c->set_size(256);
  c->set_missing_ranks(1);
  c->set_collectives_max(4412);
  auto* local = c->add_ranks();
  local->set_rank(17);
  local->set_local(true);
  local->set_device(5);
  local->set_state(v1::RANK_STATE_OK);
  local->set_collectives(4411);
  auto* remote = c->add_ranks();
  remote->set_rank(90);
  remote->set_host("10.0.0.3");
  remote->set_state(v1::RANK_STATE_UNRESPONSIVE);
  const auto samples = ParseExposition(
      Text({{std::make_shared<const v1::NodeReport>(r), kNow - std::chrono::milliseconds(500)}}));
  const std::map<std::string, std::string> comm{{"node", "gpu-7"}, {"communicator", "0x9e1"}};
  EXPECT_EQ(FindValue(samples, "accelmon_nccl_communicator_ranks", comm), 256.0);
  EXPECT_EQ(FindValue(samples, "accelmon_nccl_communicator_missing_ranks", comm), 1.0);
  EXPECT_EQ(FindValue(samples, "accelmon_nccl_communicator_collectives_max", comm), 4412.0);
  std::map<std::string, std::string> rank17 = comm;
  rank17.insert({{"rank", "17"}, {"device", "5"}});
  EXPECT_EQ(FindValue(samples, "accelmon_nccl_rank_collectives_total", rank17), 4411.0);
  EXPECT_EQ(FindValue(samples, "accelmon_nccl_rank_collectives_behind", rank17), 1.0);
  rank17["state"] = "ok";
  EXPECT_EQ(FindValue(samples, "accelmon_nccl_rank_state", rank17), 1.0);
  std::map<std::string, std::string> rank90 = comm;
  rank90.insert({{"rank", "90"}, {"host", "10.0.0.3"}, {"state", "unresponsive"}});
  EXPECT_EQ(FindValue(samples, "accelmon_nccl_rank_state", rank90), 1.0);
  EXPECT_EQ(CountSamples(samples, "accelmon_nccl_rank_collectives_total"), 1u)
      << "only this node's own ranks are counted; another's has no count here";
  EXPECT_EQ(CountSamples(samples, "accelmon_nccl_rank_collectives_behind"), 1u)
      << "no count, no distance: absent, never zero";
}

TEST(MetricsRenderer, LinksCarryKindPeerAndErrorType) {
  const auto samples = ParseExposition(Text(Nodes()));
  EXPECT_EQ(FindValue(samples, "accelmon_device_link_transmit_bytes_total",
                      {{"link", "nvlink0"}, {"kind", "nvlink"}, {"peer", "0000:28:00.0"}}),
            1e12);
  EXPECT_EQ(FindValue(samples, "accelmon_device_link_up", {{"link", "pcie"}, {"kind", "pcie"}}),
            0.0);
  EXPECT_EQ(FindValue(samples, "accelmon_device_link_errors_total", {{"type", "replay"}}), 4.0);
  EXPECT_EQ(FindValue(samples, "accelmon_device_throttled", {{"reason", "sw_power_cap"}}), 1.0);
  EXPECT_EQ(FindValue(samples, "accelmon_device_throttled", {{"reason", "hw_thermal"}}), 0.0);
}

TEST(MetricsRenderer, JobInfoIsOneSeriesPerHolderWithEmptyLabelsLeftOut) {
  const std::string text = Text(Nodes());
  EXPECT_NE(
      text.find(
          "accelmon_device_job_info{node=\"gpu-node-01\",device=\"0\",uuid=\"GPU-11111111-"
          "2222-3333-4444-555555555555\",kind=\"pod\",job_id=\"slurm-1234\",pod=\"trainer-0\","
          "namespace=\"ml\",container=\"pytorch\",user=\"alice\",rank=\"0\",claim=\"train-gpus\","
          "claim_namespace=\"ml\",pod_uid=\"0b7c0e8a-1f2d-4e3c-8a9b-1c2d3e4f5a6b\"} 1\n"),
      std::string::npos)
      << text;
  EXPECT_NE(
      text.find("accelmon_device_job_info{node=\"gpu-node-01\",device=\"0\",uuid=\"GPU-11111111-"
                "2222-3333-4444-555555555555\",kind=\"process\",user=\"bob\"} 1\n"),
      std::string::npos)
      << text;
  const auto samples = ParseExposition(text);
  EXPECT_EQ(CountSamples(samples, "accelmon_device_job_info"), 3u);
  EXPECT_EQ(
      FindValue(samples, "accelmon_device_job_info",
                {{"device", "1"}, {"kind", "slurm"}, {"job_id", "slurm-1234"}, {"step", "0"}}),
      1.0);
  // Never a `job` label: Prometheus would rename it exported_job.
  EXPECT_EQ(text.find("job=\""), std::string::npos) << text;
}

TEST(MetricsRenderer, ADevicesJobIsItsFirstHolderWithAJobIdOnePerDevice) {
  v1::NodeReport r = FullNode();
  auto* d = r.mutable_devices(0);
  // bob's process holder first: the device's job is still the pod's.
  d->mutable_holders()->SwapElements(0, 1);
  auto* second_job = d->add_holders();
  second_job->set_kind(v1::HOLDER_KIND_SLURM);
  second_job->set_job("slurm-9");
  const auto samples = ParseExposition(Text({{std::make_shared<const v1::NodeReport>(r), kNow}}));
  EXPECT_EQ(CountSamples(samples, "accelmon_device_job"), 2u);
  EXPECT_EQ(
      FindValue(
          samples, "accelmon_device_job",
          {{"node", "gpu-node-01"}, {"device", "0"}, {"job_id", "slurm-1234"}, {"rank", "0"}}),
      1.0);
  EXPECT_FALSE(FindValue(samples, "accelmon_device_job", {{"job_id", "slurm-9"}}));
  EXPECT_EQ(FindValue(samples, "accelmon_device_job", {{"device", "1"}, {"job_id", "slurm-1234"}}),
            1.0);
  EXPECT_EQ(CountSamples(samples, "accelmon_device_job_info"), 4u);
  // Without holders (no attribution source), no job series at all.
  for (auto& device : *r.mutable_devices()) device.clear_holders();
  const auto none = ParseExposition(Text({{std::make_shared<const v1::NodeReport>(r), kNow}}));
  for (const char* family : {"accelmon_device_job_info", "accelmon_device_job",
                             "accelmon_job_devices", "accelmon_job_nodes"}) {
    EXPECT_EQ(CountSamples(none, family), 0u) << family;
  }
}

TEST(MetricsRenderer, ProcessMemoryTheDriverAccountsAndPushedSteps) {
  const auto samples = ParseExposition(Text(Nodes()));
  EXPECT_EQ(FindValue(samples, "accelmon_device_process_memory_used_bytes",
                      {{"pid", "4242"}, {"job_id", "slurm-1234"}, {"rank", "0"}}),
            61e9);
  // A process that pushes nothing has no job_id or rank label, and only what the driver said.
  const std::map<std::string, std::string> listed{{"pid", "5150"}};
  EXPECT_EQ(FindValue(samples, "accelmon_device_process_memory_used_bytes", listed), 5e8);
  EXPECT_FALSE(FindValue(samples, "accelmon_process_memory_reserved_bytes", listed));
  EXPECT_FALSE(FindValue(samples, "accelmon_device_process_memory_used_bytes", {{"pid", "4243"}}));
  EXPECT_EQ(FindValue(samples, "accelmon_process_training_steps_total", {{"pid", "4242"}}), 1500.0);
  EXPECT_EQ(CountSamples(samples, "accelmon_process_training_steps_total"), 1u);
}

// Three nodes: job A on two of them (one device without utilization), job B on one.
std::vector<NodeEntry> JobFleet() {
  std::vector<NodeEntry> out;
  const auto node =
      [&](const std::string& name,
          std::vector<std::tuple<std::string, std::optional<double>, uint32_t>> devices,
          std::vector<StepRate> rates) {
        v1::NodeReport r;
        r.set_node(name);
        uint32_t index = 0;
        for (const auto& [job, compute, pid] : devices) {
          auto* d = r.add_devices();
          d->mutable_identity()->set_index(index++);
          if (compute) d->mutable_utilization()->set_compute_ratio(*compute);
          auto* h = d->add_holders();
          h->set_kind(v1::HOLDER_KIND_SLURM);
          h->set_job(job);
          h->add_pids(pid);
        }
        NodeEntry e{std::make_shared<const v1::NodeReport>(r), kNow};
        if (!rates.empty()) e.step_rates = std::make_shared<const std::vector<StepRate>>(rates);
        out.push_back(e);
      };
  node("n1", {{"A", 0.9, 100}, {"A", 0.5, 101}, {"B", std::nullopt, 200}},
       {{0, 100, 4.0}, {1, 101, 2.0}, {2, 200, 7.0}});
  // pid 300 drives both of n2's devices: its rate counts once.
  node("n2", {{"A", 0.1, 300}, {"A", std::nullopt, 300}}, {{0, 300, 1.0}, {1, 300, 1.0}});
  node("n3", {}, {});
  return out;
}

TEST(MetricsRenderer, JobSeriesSpanEveryNodeOfTheJob) {
  const auto samples = ParseExposition(Text(JobFleet()));
  EXPECT_EQ(FindValue(samples, "accelmon_job_devices", {{"job_id", "A"}}), 4.0);
  EXPECT_EQ(FindValue(samples, "accelmon_job_nodes", {{"job_id", "A"}}), 2.0);
  EXPECT_EQ(FindValue(samples, "accelmon_job_devices", {{"job_id", "B"}}), 1.0);
  EXPECT_EQ(FindValue(samples, "accelmon_job_nodes", {{"job_id", "B"}}), 1.0);
  // Utilization over the three devices of A that report it.
  const auto util = [&](const char* job, const char* stat) {
    return FindValue(samples, "accelmon_job_utilization_ratio", {{"job_id", job}, {"stat", stat}});
  };
  EXPECT_EQ(util("A", "min"), 0.1);
  EXPECT_EQ(util("A", "median"), 0.5);
  EXPECT_EQ(util("A", "max"), 0.9);
  EXPECT_FALSE(util("B", "median")) << "no device of B reports utilization: absent, not 0";
  // Step rates over A's processes 100, 101 and 300 (once): an even count takes the middle pair.
  const auto steps = [&](const char* job, const char* stat) {
    return FindValue(samples, "accelmon_job_step_rate", {{"job_id", job}, {"stat", stat}});
  };
  EXPECT_EQ(steps("A", "min"), 1.0);
  EXPECT_EQ(steps("A", "median"), 2.0);
  EXPECT_EQ(steps("A", "max"), 4.0);
  EXPECT_EQ(steps("B", "median"), 7.0);
  EXPECT_EQ(CountSamples(samples, "accelmon_job_step_rate"), 6u);
}

TEST(MetricsRenderer, JobMedianOfAnEvenCountIsTheMeanOfTheMiddlePair) {
  std::vector<NodeEntry> fleet = JobFleet();
  fleet.resize(1);  // n1: A on devices 0.9 and 0.5
  const auto samples = ParseExposition(Text(fleet));
  EXPECT_DOUBLE_EQ(
      *FindValue(samples, "accelmon_job_utilization_ratio", {{"job_id", "A"}, {"stat", "median"}}),
      0.7);
  EXPECT_EQ(FindValue(samples, "accelmon_job_step_rate", {{"job_id", "A"}, {"stat", "median"}}),
            3.0);
}

TEST(MetricsRenderer, ExporterSelfMetrics) {
  ExporterStats stats;
  stats.reports_applied = 10;
  stats.reports_duplicate = 2;
  stats.CountRejected("missing_node");
  stats.CountRejected("missing_node");
  TextExpositionSink sink;
  EmitExporterStats(stats, 3, sink);
  std::string text;
  sink.AppendTo(text);
  const auto samples = ParseExposition(text);
  EXPECT_EQ(ParseExposition(Serialize(RenderExporterStats(stats, 3))).size(), samples.size());
  EXPECT_EQ(FindValue(samples, "accelmon_exporter_reports_ingested_total"), 10.0);
  EXPECT_EQ(FindValue(samples, "accelmon_exporter_reports_duplicate_total"), 2.0);
  EXPECT_EQ(
      FindValue(samples, "accelmon_exporter_reports_rejected_total", {{"reason", "missing_node"}}),
      2.0);
  EXPECT_EQ(FindValue(samples, "accelmon_exporter_nodes"), 3.0);
  EXPECT_EQ(CountSamples(samples, "accelmon_build_info"), 1u);
  // The version and the git revision of this build (tests/e2e/version_test.sh checks the
  // revision against git itself).
  EXPECT_EQ(
      FindValue(samples, "accelmon_build_info", {{"version", kVersion}, {"revision", kRevision}}),
      1.0);
  EXPECT_NE(std::string(kRevision), "");
}

TEST(MetricsRenderer, DiagnosisSeriesHaveOneLabelSetWithEmptyDeviceAndLink) {
  DiagnosticsMetrics d;
  d.enabled = true;
  d.active.push_back({"link_down", "n1", "0", "nvlink0", "critical", "4711",
                      "xid_error on n1 device 0", "link_down on n1 device 0"});
  d.active.push_back({"host_oom_kill", "n2", "", "", "warning", "", "", "host_oom_kill on n2"});
  d.opened[{"link_down", "critical"}] = 3;
  d.opened[{"link_down", "warning"}] = 0;
  d.reports = 42;
  d.out_of_order = 1;
  TextExpositionSink sink;
  EmitDiagnostics(d, sink);
  std::string text;
  sink.AppendTo(text);
  EXPECT_NE(text.find("# TYPE accelmon_diagnosis_active gauge"), std::string::npos) << text;
  EXPECT_NE(text.find("# TYPE accelmon_diagnosis_findings_total counter"), std::string::npos);
  // Empty labels are written, not left out: every series has the same label names.
  EXPECT_NE(text.find("accelmon_diagnosis_active{rule=\"host_oom_kill\",node=\"n2\",device=\"\","
                      "link=\"\",severity=\"warning\",job_id=\"\",finding=\"host_oom_kill on n2\","
                      "consequence_of=\"\"} 1"),
            std::string::npos)
      << text;
  const auto samples = ParseExposition(text);
  EXPECT_EQ(FindValue(samples, "accelmon_diagnosis_active",
                      {{"rule", "link_down"},
                       {"device", "0"},
                       {"link", "nvlink0"},
                       {"job_id", "4711"},
                       {"finding", "link_down on n1 device 0"},
                       {"consequence_of", "xid_error on n1 device 0"}}),
            1.0);
  EXPECT_EQ(FindValue(samples, "accelmon_diagnosis_findings_total",
                      {{"rule", "link_down"}, {"severity", "critical"}}),
            3.0);
  EXPECT_EQ(FindValue(samples, "accelmon_diagnosis_findings_total",
                      {{"rule", "link_down"}, {"severity", "warning"}}),
            0.0);
  EXPECT_EQ(FindValue(samples, "accelmon_exporter_diagnosis_reports_total"), 42.0);
  EXPECT_EQ(FindValue(samples, "accelmon_exporter_diagnosis_out_of_order_total"), 1.0);

  // Off: no series at all.
  TextExpositionSink off;
  EmitDiagnostics(DiagnosticsMetrics{}, off);
  std::string none;
  off.AppendTo(none);
  EXPECT_EQ(none, "");
}

}  // namespace
}  // namespace metrics_renderer_test
}  // namespace accelmon
