#include "daemon/exporter/report_validator.h"

#include <google/protobuf/descriptor.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>

namespace accelmon {
namespace report_validator_test {
namespace {

using std::chrono::minutes;
using std::chrono::seconds;

const Clock::time_point kNow = Clock::time_point(seconds(1'700'000'000));

// Every field of the data model set to a plausible value.
v1::NodeReport FullReport() {
  v1::NodeReport r;
  r.set_node("gpu-node-01");
  r.set_agent_instance_id("0123456789abcdef");
  r.set_sequence(7);
  r.mutable_timestamp()->set_seconds(1'700'000'000);
  r.mutable_timestamp()->set_nanos(5);
  r.mutable_interval()->set_seconds(1);
  r.mutable_interval()->set_nanos(1);
  r.set_agent_version("0.1.0");
  r.mutable_agent()->set_dropped_reports_total(1);
  r.mutable_agent()->set_spool_reports(2);
  r.mutable_agent()->set_resent_reports_total(1);
  (*r.mutable_agent()->mutable_push_rejected_total())["unknown_device"] = 3;

  auto* c = r.add_collectors();
  c->set_name("nvml");
  c->set_success(true);
  c->set_duration_seconds(0.01);
  c->set_error("ok, but slow: température");

  auto link = [](v1::Link* l, const char* name) {
    l->set_kind(v1::LINK_KIND_NVLINK);
    l->set_name(name);
    l->set_index(3);
    l->set_peer("00000000:18:00.0");
    l->set_up(true);
    l->set_transmit_bytes_total(1);
    l->set_receive_bytes_total(2);
    l->set_transmit_packets_total(3);
    l->set_receive_packets_total(4);
    l->set_max_bandwidth_bytes_per_second(25e9);
    (*l->mutable_errors_total())["crc"] = 1;
    l->set_pcie_generation(5);
    l->set_pcie_width(16);
    l->set_mtu_bytes(4096);
    l->set_degraded(false);
  };

  auto* d = r.add_devices();
  auto* id = d->mutable_identity();
  id->set_vendor("nvidia");
  id->set_model("NVIDIA H200");
  id->set_uuid("GPU-5f3c0000-0000-0000-0000-000000000000");
  id->set_index(1);
  id->set_pci_bus_id("00000000:17:00.0");
  id->set_firmware_version("96.00.5E.00.01");
  id->set_driver_version("550.54.15");
  id->set_serial("1650923000001");
  // Every field once, though a real GPU has no MIG identity (its MIG devices do).
  id->mutable_mig()->set_parent_uuid("GPU-5f3c0000-0000-0000-0000-000000000001");
  id->mutable_mig()->set_parent_index(2);
  id->mutable_mig()->set_gpu_instance_id(1);
  id->mutable_mig()->set_compute_instance_id(0);
  id->mutable_mig()->set_profile("1g.18gb");
  d->set_up(true);
  auto* m = d->mutable_memory();
  m->set_total_bytes(10);
  m->set_used_bytes(4);
  m->set_free_bytes(6);
  m->set_reserved_bytes(1);
  m->set_largest_free_block_bytes(5);
  m->set_fragmentation_ratio(1.0 / 6);
  auto* t = d->mutable_thermal();
  t->set_core_celsius(-273.15);  // the edges of the ranges are valid
  t->set_memory_celsius(1000);
  t->set_slowdown_threshold_celsius(87);
  t->set_shutdown_threshold_celsius(92);
  (*t->mutable_throttle_reasons())["sw_thermal"] = false;
  t->set_fan_speed_ratio(1.1);  // NVML's percent may exceed 100
  auto* p = d->mutable_power();
  p->set_usage_watts(0);
  p->set_limit_watts(700);
  p->set_energy_joules_total(1e12);
  auto* u = d->mutable_utilization();
  u->set_compute_ratio(0);
  u->set_memory_bandwidth_ratio(1);
  d->mutable_clocks()->set_compute_hz(1.98e9);
  d->mutable_clocks()->set_memory_hz(2.6e9);
  d->mutable_clocks()->set_power_violation_seconds_total(1.5);
  d->mutable_clocks()->set_thermal_violation_seconds_total(0);
  d->mutable_clocks()->set_sync_boost_violation_seconds_total(0);
  d->mutable_clocks()->set_board_limit_violation_seconds_total(0);
  d->mutable_clocks()->set_low_utilization_violation_seconds_total(42);
  d->mutable_clocks()->set_reliability_violation_seconds_total(0);
  d->mutable_state()->set_performance_state(15);
  auto* a = d->mutable_activity();
  for (auto set :
       {&v1::DeviceActivity::set_graphics_engine_ratio, &v1::DeviceActivity::set_sm_ratio,
        &v1::DeviceActivity::set_sm_occupancy_ratio, &v1::DeviceActivity::set_tensor_ratio,
        &v1::DeviceActivity::set_tensor_dfma_ratio, &v1::DeviceActivity::set_tensor_hmma_ratio,
        &v1::DeviceActivity::set_tensor_imma_ratio, &v1::DeviceActivity::set_fp64_ratio,
        &v1::DeviceActivity::set_fp32_ratio, &v1::DeviceActivity::set_fp16_ratio,
        &v1::DeviceActivity::set_integer_ratio, &v1::DeviceActivity::set_dram_bandwidth_ratio,
        &v1::DeviceActivity::set_vector_ratio}) {
    (a->*set)(0.5);
  }
  a->set_pcie_transmit_bytes_per_second(1e9);
  a->set_pcie_receive_bytes_per_second(0);
  a->set_nvlink_transmit_bytes_per_second(4e11);
  a->set_nvlink_receive_bytes_per_second(4e11);
  a->add_compute_die_ratios(0.25);
  d->mutable_state()->set_persistence_mode(true);
  d->mutable_state()->set_mig_enabled(true);
  auto* e = d->mutable_errors();
  e->set_ecc_corrected_total(1);
  e->set_ecc_uncorrected_total(0);
  e->set_remapped_rows_correctable(1);
  e->set_remapped_rows_uncorrectable(1);
  e->set_remapped_rows_pending(true);
  e->set_remapped_rows_failure(false);
  e->set_ecc_corrected_lifetime_total(9);
  e->set_ecc_uncorrected_lifetime_total(0);
  e->set_retired_pages_single_bit(2);
  e->set_retired_pages_double_bit(0);
  e->set_retired_pages_pending(false);
  auto* dram = e->add_ecc_by_location();
  dram->set_location(v1::MEMORY_LOCATION_DRAM);
  dram->set_corrected_total(1);
  dram->set_uncorrected_total(2);
  dram->set_corrected_lifetime_total(3);
  dram->set_uncorrected_lifetime_total(4);
  link(d->add_links(), "nvlink3");
  auto* pm = d->add_processes();
  pm->set_pid(4242);
  pm->set_job("slurm-1234 ジョブ");
  pm->set_rank("7");
  pm->set_reserved_bytes(8);
  pm->set_allocated_bytes(5);
  pm->set_active_bytes(6);
  pm->set_inactive_split_bytes(1);
  pm->set_largest_free_block_bytes(2);
  pm->set_segments(3);
  pm->set_alloc_retries_total(1);
  pm->set_ooms_total(1);
  pm->set_used_bytes(9);
  pm->set_steps_total(1200);
  pm->set_world_size(8);
  pm->set_command("python3");
  pm->set_user("alice");
  auto* holder = d->add_holders();
  holder->set_kind(v1::HOLDER_KIND_POD);
  holder->set_job("slurm-1234 ジョブ");
  holder->set_pod("trainer-7");
  holder->set_namespace_("ml");
  holder->set_container("pytorch");
  holder->set_step("0");
  holder->set_user("alice");
  holder->add_pids(4242);
  holder->set_rank("7");
  holder->set_world_size(8);
  holder->set_memory_used_bytes(9);
  holder->set_command("python3");
  holder->set_claim("train-gpus");
  holder->set_claim_namespace("ml");
  holder->set_pod_uid("0b7c0e8a-1f2d-4e3c-8a9b-1c2d3e4f5a6b");

  auto* h = r.mutable_host();
  auto* hm = h->mutable_memory();
  for (auto setter :
       {&v1::HostMemory::set_total_bytes, &v1::HostMemory::set_free_bytes,
        &v1::HostMemory::set_available_bytes, &v1::HostMemory::set_buffers_bytes,
        &v1::HostMemory::set_cached_bytes, &v1::HostMemory::set_swap_total_bytes,
        &v1::HostMemory::set_swap_free_bytes, &v1::HostMemory::set_shmem_bytes,
        &v1::HostMemory::set_slab_reclaimable_bytes, &v1::HostMemory::set_slab_unreclaimable_bytes,
        &v1::HostMemory::set_hugepages_total, &v1::HostMemory::set_hugepages_free,
        &v1::HostMemory::set_hugepage_size_bytes, &v1::HostMemory::set_dirty_bytes,
        &v1::HostMemory::set_writeback_bytes}) {
    (hm->*setter)(4096);
  }
  auto* z = h->add_buddyinfo();
  z->set_numa_node(1);
  z->set_zone("Normal");
  z->add_free_blocks(3);
  z->set_page_size_bytes(4096);
  h->mutable_vmstat()->set_oom_kill_total(1);
  h->mutable_memory_pressure()->set_some_total_us(1);
  h->mutable_memory_pressure()->set_full_total_us(1);
  link(h->add_links(), "eth0");
  auto* ts = h->add_temperatures();
  ts->set_sensor("coretemp Package id 0");
  ts->set_celsius(45);
  ts->set_chip("hwmon3");
  auto* ps = h->add_power_sensors();
  ps->set_sensor("amdgpu PPT");
  ps->set_watts(120);
  ps->set_chip("hwmon4");

  auto* ev = r.add_events();
  ev->set_kind(v1::EVENT_KIND_XID);
  ev->mutable_time()->set_seconds(1'699'999'999);
  ev->mutable_time()->set_nanos(1);
  ev->set_device_index(1);
  ev->set_device_uuid("GPU-5f3c0000-0000-0000-0000-000000000000");
  ev->set_link("nvlink3");
  ev->set_code(79);
  ev->set_message("GPU has fallen off the bus");
  auto* comm = r.add_communicators();
  comm->set_hash("0x9e17999afaa87dbb");
  comm->set_size(4);
  comm->set_ranks_reporting(3);
  comm->set_missing_ranks(1);
  comm->set_collectives_max(1533);
  comm->set_source("localhost:28028");
  comm->set_nccl_version("2.29.2");
  comm->set_partial(true);
  auto* rank = comm->add_ranks();
  rank->set_rank(2);
  rank->set_local(true);
  rank->set_device(0);
  rank->set_pid(2001);
  rank->set_host("10.0.0.2");
  rank->set_state(v1::RANK_STATE_ERROR);
  rank->set_collectives(1532);
  (*rank->mutable_collectives_by_kind())["AllReduce"] = 1520;
  rank->set_error("async error 6 (remote error)");
  return r;
}

// Fails for every field of `m` (recursively) left at its default: when the data model grows,
// this test and the validator are extended with it.
void ExpectEveryFieldSet(const google::protobuf::Message& m, const std::string& path) {
  const auto* reflection = m.GetReflection();
  const auto* descriptor = m.GetDescriptor();
  for (int i = 0; i < descriptor->field_count(); ++i) {
    const auto* field = descriptor->field(i);
    const std::string name = path + "." + field->name();
    if (field->is_repeated()) {
      ASSERT_GT(reflection->FieldSize(m, field), 0) << name;
      if (field->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE &&
          !field->is_map()) {
        ExpectEveryFieldSet(reflection->GetRepeatedMessage(m, field, 0), name);
      }
      continue;
    }
    // proto3 scalars without presence read as unset when zero; those that may be zero are fine.
    const bool may_be_zero = name.ends_with(".success") || name.ends_with(".usage_watts") ||
                             name.ends_with(".compute_ratio") ||
                             name.ends_with(".ecc_uncorrected_total") ||
                             name.ends_with(".remapped_rows_failure") ||
                             // Set by the diagnostics engine only; an agent leaves it false.
                             name.ends_with(".last_known");
    if (!may_be_zero) {
      EXPECT_TRUE(reflection->HasField(m, field)) << name;
    }
    if (field->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE) {
      ExpectEveryFieldSet(reflection->GetMessage(m, field), name);
    }
  }
}

std::string Validate(const v1::NodeReport& r, const ValidationLimits& limits = {}) {
  return ValidateReport(r, limits, kNow);
}

std::string With(const std::function<void(v1::NodeReport&)>& change) {
  v1::NodeReport r = FullReport();
  change(r);
  return Validate(r);
}

TEST(ReportValidator, AReportWithEveryFieldSetPasses) {
  const v1::NodeReport r = FullReport();
  ExpectEveryFieldSet(r, "NodeReport");
  EXPECT_EQ(Validate(r), "");
}

TEST(ReportValidator, AReportWithoutNodeInstanceSequenceOrTimestampIsRejected) {
  EXPECT_EQ(With([](auto& r) { r.clear_node(); }), "missing_node");
  EXPECT_EQ(With([](auto& r) { r.clear_agent_instance_id(); }), "missing_instance");
  EXPECT_EQ(With([](auto& r) { r.clear_sequence(); }), "missing_sequence");
  EXPECT_EQ(With([](auto& r) { r.clear_timestamp(); }), "missing_timestamp");
}

TEST(ReportValidator, TimestampsBeyondMaxFutureAreRejectedAndThePastIsAccepted) {
  v1::NodeReport r = FullReport();
  r.mutable_timestamp()->set_seconds(1'700'000'000 + 300);
  r.mutable_timestamp()->set_nanos(0);
  EXPECT_EQ(Validate(r), "") << "exactly max_future ahead is allowed";
  r.mutable_timestamp()->set_nanos(1);
  EXPECT_EQ(Validate(r), "timestamp_in_future");
  r.mutable_timestamp()->set_seconds(std::numeric_limits<int64_t>::max());
  EXPECT_EQ(Validate(r), "timestamp_in_future");
  // The past is fine: a node may re-send an hour of spooled reports.
  r.mutable_timestamp()->set_seconds(1'700'000'000 - 86'400);
  EXPECT_EQ(Validate(r), "");
  // The limit is configurable.
  r.mutable_timestamp()->set_seconds(1'700'000'000 + 10);
  EXPECT_EQ(Validate(r, {.max_future = seconds(5)}), "timestamp_in_future");
}

TEST(ReportValidator, EveryLabelOver128BytesIsRejected) {
  const std::string ok(128, 'x');
  const std::string too_long(129, 'x');
  EXPECT_EQ(With([&](auto& r) { r.set_node(ok); }), "");
  EXPECT_EQ(With([&](auto& r) { r.set_node(too_long); }), "label_too_long");
  // Every label-bearing string is checked.
  const std::vector<std::pair<const char*, std::function<void(v1::NodeReport&)>>> labels = {
      {"instance", [&](auto& r) { r.set_agent_instance_id(too_long); }},
      {"vendor", [&](auto& r) { r.mutable_devices(0)->mutable_identity()->set_vendor(too_long); }},
      {"model", [&](auto& r) { r.mutable_devices(0)->mutable_identity()->set_model(too_long); }},
      {"uuid", [&](auto& r) { r.mutable_devices(0)->mutable_identity()->set_uuid(too_long); }},
      {"pci", [&](auto& r) { r.mutable_devices(0)->mutable_identity()->set_pci_bus_id(too_long); }},
      {"firmware",
       [&](auto& r) { r.mutable_devices(0)->mutable_identity()->set_firmware_version(too_long); }},
      {"driver",
       [&](auto& r) { r.mutable_devices(0)->mutable_identity()->set_driver_version(too_long); }},
      {"throttle reason",
       [&](auto& r) {
         (*r.mutable_devices(0)->mutable_thermal()->mutable_throttle_reasons())[too_long] = true;
       }},
      {"device link", [&](auto& r) { r.mutable_devices(0)->mutable_links(0)->set_name(too_long); }},
      {"peer", [&](auto& r) { r.mutable_devices(0)->mutable_links(0)->set_peer(too_long); }},
      {"error type",
       [&](auto& r) {
         (*r.mutable_host()->mutable_links(0)->mutable_errors_total())[too_long] = 1;
       }},
      {"host link", [&](auto& r) { r.mutable_host()->mutable_links(0)->set_name(too_long); }},
      {"collector", [&](auto& r) { r.mutable_collectors(0)->set_name(too_long); }},
      {"zone", [&](auto& r) { r.mutable_host()->mutable_buddyinfo(0)->set_zone(too_long); }},
      {"sensor", [&](auto& r) { r.mutable_host()->mutable_temperatures(0)->set_sensor(too_long); }},
      {"chip", [&](auto& r) { r.mutable_host()->mutable_power_sensors(0)->set_chip(too_long); }},
      {"job", [&](auto& r) { r.mutable_devices(0)->mutable_processes(0)->set_job(too_long); }},
      {"rank", [&](auto& r) { r.mutable_devices(0)->mutable_processes(0)->set_rank(too_long); }},
      {"process user",
       [&](auto& r) { r.mutable_devices(0)->mutable_processes(0)->set_user(too_long); }},
      {"process command",
       [&](auto& r) { r.mutable_devices(0)->mutable_processes(0)->set_command(too_long); }},
      {"holder job", [&](auto& r) { r.mutable_devices(0)->mutable_holders(0)->set_job(too_long); }},
      {"holder namespace",
       [&](auto& r) { r.mutable_devices(0)->mutable_holders(0)->set_namespace_(too_long); }},
      {"holder container",
       [&](auto& r) { r.mutable_devices(0)->mutable_holders(0)->set_container(too_long); }},
      {"holder step",
       [&](auto& r) { r.mutable_devices(0)->mutable_holders(0)->set_step(too_long); }},
      {"holder user",
       [&](auto& r) { r.mutable_devices(0)->mutable_holders(0)->set_user(too_long); }},
      {"holder rank",
       [&](auto& r) { r.mutable_devices(0)->mutable_holders(0)->set_rank(too_long); }},
      {"holder command",
       [&](auto& r) { r.mutable_devices(0)->mutable_holders(0)->set_command(too_long); }},
      {"holder claim namespace",
       [&](auto& r) { r.mutable_devices(0)->mutable_holders(0)->set_claim_namespace(too_long); }},
      {"holder pod uid",
       [&](auto& r) { r.mutable_devices(0)->mutable_holders(0)->set_pod_uid(too_long); }},
      {"push rejection reason",
       [&](auto& r) { (*r.mutable_agent()->mutable_push_rejected_total())[too_long] = 1; }},
  };
  for (const auto& [what, change] : labels) EXPECT_EQ(With(change), "label_too_long") << what;
  // Free text is not a label.
  EXPECT_EQ(With([&](auto& r) { r.mutable_events(0)->set_message(std::string(4096, 'm')); }), "");
}

// Kubernetes pod and ResourceClaim names are DNS subdomains: up to 253 bytes, so they get a limit
// of their own.
TEST(ReportValidator, PodAndClaimNamesUpTo253BytesPassAndLongerAreRejected) {
  EXPECT_EQ(With([](auto& r) {
              r.mutable_devices(0)->mutable_holders(0)->set_pod(std::string(253, 'p'));
            }),
            "");
  EXPECT_EQ(With([](auto& r) {
              r.mutable_devices(0)->mutable_holders(0)->set_pod(std::string(254, 'p'));
            }),
            "label_too_long");
  v1::NodeReport r = FullReport();
  r.mutable_devices(0)->mutable_holders(0)->set_pod(std::string(100, 'p'));
  EXPECT_EQ(Validate(r, {.max_pod_bytes = 99}), "label_too_long");
  // A ResourceClaim's name is a DNS subdomain too.
  EXPECT_EQ(With([](auto& report) {
              report.mutable_devices(0)->mutable_holders(0)->set_claim(std::string(253, 'c'));
            }),
            "");
  EXPECT_EQ(With([](auto& report) {
              report.mutable_devices(0)->mutable_holders(0)->set_claim(std::string(254, 'c'));
            }),
            "label_too_long");
}

TEST(ReportValidator, InvalidUtf8InAnyStringIsRejected) {
  EXPECT_EQ(With([](auto& r) { r.set_node("gpu\xff"); }), "invalid_utf8");
  EXPECT_EQ(
      With([](auto& r) { r.mutable_host()->mutable_temperatures(0)->set_sensor("\xc0\xaf"); }),
      "invalid_utf8");
  EXPECT_EQ(With([](auto& r) { r.mutable_collectors(0)->set_error("half \xe2\x82"); }),
            "invalid_utf8");
  EXPECT_EQ(With([](auto& r) { r.set_node("gpu-ノード-01"); }), "");
  EXPECT_EQ(With([](auto& r) { r.mutable_devices(0)->mutable_processes(0)->set_job("j\xff"); }),
            "invalid_utf8");
  EXPECT_EQ(With([](auto& r) { r.mutable_devices(0)->mutable_processes(0)->set_rank("\xc3"); }),
            "invalid_utf8");
  EXPECT_EQ(With([](auto& r) { r.mutable_devices(0)->mutable_processes(0)->set_user("\xff"); }),
            "invalid_utf8");
  EXPECT_EQ(With([](auto& r) { r.mutable_devices(0)->mutable_holders(0)->set_pod("p\xff"); }),
            "invalid_utf8");
  EXPECT_EQ(With([](auto& r) { r.mutable_devices(0)->mutable_holders(0)->set_namespace_("\xc3"); }),
            "invalid_utf8");
  EXPECT_EQ(With([](auto& r) { r.mutable_devices(0)->mutable_holders(0)->set_command("\xff"); }),
            "invalid_utf8");
}

TEST(ReportValidator, Utf8CheckRefusesOverlongSurrogateAndTruncatedSequences) {
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("ascii"));
  EXPECT_TRUE(IsValidUtf8("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80"));  // é € 😀
  EXPECT_TRUE(IsValidUtf8("\xf4\x8f\xbf\xbf"));                      // U+10FFFF
  EXPECT_FALSE(IsValidUtf8("\x80"));                                 // lone continuation
  EXPECT_FALSE(IsValidUtf8("\xc3"));                                 // truncated
  EXPECT_FALSE(IsValidUtf8("\xc1\xbf"));                             // overlong
  EXPECT_FALSE(IsValidUtf8("\xe0\x80\xaf"));                         // overlong
  EXPECT_FALSE(IsValidUtf8("\xed\xa0\x80"));                         // surrogate
  EXPECT_FALSE(IsValidUtf8("\xf4\x90\x80\x80"));                     // > U+10FFFF
  EXPECT_FALSE(IsValidUtf8("\xff"));
}

// What protobuf 3.21 does with invalid UTF-8 in a proto3 `string`: serializing only logs, but
// parsing fails. So over gRPC such a report never reaches the validator: the exporter cannot
// deserialize it (see the integration test); the check above guards reports built in-process.
TEST(ReportValidator, Proto3ParsingRefusesInvalidUtf8) {
  v1::NodeReport r = FullReport();
  r.set_node("gpu\xff");
  std::string wire;
  ASSERT_TRUE(r.SerializeToString(&wire));
  v1::NodeReport parsed;
  EXPECT_FALSE(parsed.ParseFromString(wire));
}

// The exporter parses reports itself to tell these apart and still answer with the sequence.
TEST(ReportValidator, ParseReportSaysWhyItCannotParse) {
  v1::NodeReport r = FullReport();
  std::string wire;
  ASSERT_TRUE(r.SerializeToString(&wire));
  v1::NodeReport parsed;
  EXPECT_EQ(ParseReport(wire, &parsed), "");
  EXPECT_EQ(parsed.SerializeAsString(), wire);

  (*r.mutable_devices(0)->mutable_thermal()->mutable_throttle_reasons())["\xff"] = true;
  ASSERT_TRUE(r.SerializeToString(&wire));
  EXPECT_EQ(ParseReport(wire, &parsed), "invalid_utf8");
  EXPECT_EQ(parsed.sequence(), 7u);

  EXPECT_EQ(ParseReport("\x08", &parsed), "malformed_report");  // truncated varint
  EXPECT_EQ(ParseReport(std::string("\x00\x01", 2), &parsed), "malformed_report");  // field 0
  EXPECT_EQ(ParseReport("", &parsed), "") << "an empty report parses (and fails validation)";
}

TEST(ReportValidator, TooManyDevicesLinksProcessesHoldersPidsEvents) {
  v1::NodeReport r = FullReport();
  while (r.devices_size() < 64) *r.add_devices() = r.devices(0);
  EXPECT_EQ(Validate(r), "");
  *r.add_devices() = r.devices(0);
  EXPECT_EQ(Validate(r), "too_many_devices");
  EXPECT_EQ(Validate(r, {.max_devices = 65}), "");

  r = FullReport();  // 1 device link + 1 host link
  while (r.host().links_size() < 511) *r.mutable_host()->add_links() = r.host().links(0);
  EXPECT_EQ(Validate(r), "");
  *r.mutable_devices(0)->add_links() = r.devices(0).links(0);
  EXPECT_EQ(Validate(r), "too_many_links") << "device and host links count together";
  EXPECT_EQ(Validate(r, {.max_links = 513}), "");

  r = FullReport();
  auto* d = r.mutable_devices(0);
  while (d->processes_size() < 256) *d->add_processes() = d->processes(0);
  EXPECT_EQ(Validate(r), "");
  *d->add_processes() = d->processes(0);
  EXPECT_EQ(Validate(r), "too_many_processes") << "at most 256 processes per device";
  EXPECT_EQ(Validate(r, {.max_processes_per_device = 257}), "");

  r = FullReport();
  d = r.mutable_devices(0);
  while (d->holders_size() < 64) *d->add_holders() = d->holders(0);
  EXPECT_EQ(Validate(r), "");
  *d->add_holders() = d->holders(0);
  EXPECT_EQ(Validate(r), "too_many_holders") << "at most 64 holders per device";
  EXPECT_EQ(Validate(r, {.max_holders_per_device = 65}), "");

  r = FullReport();
  auto* activity = r.mutable_devices(0)->mutable_activity();
  while (activity->compute_die_ratios_size() < 64) activity->add_compute_die_ratios(0.5);
  EXPECT_EQ(Validate(r), "");
  activity->add_compute_die_ratios(0.5);
  EXPECT_EQ(Validate(r), "too_many_compute_dies") << "8 partitions of 8 XCDs at most";

  r = FullReport();
  auto* errors = r.mutable_devices(0)->mutable_errors();
  errors->add_ecc_by_location()->set_location(v1::MEMORY_LOCATION_SRAM);
  EXPECT_EQ(Validate(r), "") << "DRAM and SRAM, each once";
  errors->add_ecc_by_location()->set_location(v1::MEMORY_LOCATION_SRAM);
  EXPECT_EQ(Validate(r), "invalid_memory_location") << "SRAM twice: one series twice";
  errors->mutable_ecc_by_location(2)->set_location(v1::MEMORY_LOCATION_UNSPECIFIED);
  EXPECT_EQ(Validate(r), "invalid_memory_location") << "no location";
  errors->mutable_ecc_by_location(2)->set_location(static_cast<v1::MemoryLocation>(77));
  EXPECT_EQ(Validate(r), "invalid_memory_location") << "a location this exporter does not know";

  r = FullReport();
  auto* holder = r.mutable_devices(0)->mutable_holders(0);
  while (holder->pids_size() < 256) holder->add_pids(static_cast<uint32_t>(holder->pids_size()));
  EXPECT_EQ(Validate(r), "");
  holder->add_pids(100'000);
  EXPECT_EQ(Validate(r), "too_many_holder_pids") << "at most 256 pids per holder";
  EXPECT_EQ(Validate(r, {.max_pids_per_holder = 257}), "");

  r = FullReport();
  while (r.events_size() < 1024) *r.add_events() = r.events(0);
  EXPECT_EQ(Validate(r), "");
  *r.add_events() = r.events(0);
  EXPECT_EQ(Validate(r), "too_many_events");
}

TEST(ReportValidator, NanOrInfinityInAnyValueIsRejected) {
  const double nan = std::nan("");
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(With([&](auto& r) { r.mutable_devices(0)->mutable_power()->set_usage_watts(nan); }),
            "non_finite_value");
  EXPECT_EQ(With([&](auto& r) { r.mutable_devices(0)->mutable_thermal()->set_core_celsius(-inf); }),
            "non_finite_value");
  EXPECT_EQ(With([&](auto& r) { r.mutable_devices(0)->mutable_clocks()->set_memory_hz(inf); }),
            "non_finite_value");
  EXPECT_EQ(With([&](auto& r) { r.mutable_collectors(0)->set_duration_seconds(nan); }),
            "non_finite_value");
  EXPECT_EQ(With([&](auto& r) {
              r.mutable_host()->mutable_links(0)->set_max_bandwidth_bytes_per_second(inf);
            }),
            "non_finite_value");
  EXPECT_EQ(With([&](auto& r) { r.mutable_host()->mutable_temperatures(0)->set_celsius(nan); }),
            "non_finite_value");
}

TEST(ReportValidator, PhysicallyImpossibleValuesAreRejected) {
  const std::vector<std::pair<const char*, std::function<void(v1::NodeReport&)>>> cases = {
      {"ratio > 1",
       [](auto& r) { r.mutable_devices(0)->mutable_utilization()->set_compute_ratio(1.01); }},
      {"ratio < 0",
       [](auto& r) { r.mutable_devices(0)->mutable_memory()->set_fragmentation_ratio(-0.1); }},
      {"below absolute zero",
       [](auto& r) { r.mutable_devices(0)->mutable_thermal()->set_memory_celsius(-274); }},
      {"too hot", [](auto& r) { r.mutable_host()->mutable_temperatures(0)->set_celsius(1000.5); }},
      {"negative watts",
       [](auto& r) { r.mutable_host()->mutable_power_sensors(0)->set_watts(-1); }},
      {"negative joules",
       [](auto& r) { r.mutable_devices(0)->mutable_power()->set_energy_joules_total(-1); }},
      {"negative hertz",
       [](auto& r) { r.mutable_devices(0)->mutable_clocks()->set_compute_hz(-1); }},
      {"negative violation time",
       [](auto& r) {
         r.mutable_devices(0)->mutable_clocks()->set_thermal_violation_seconds_total(-1);
       }},
      {"negative fan speed",
       [](auto& r) { r.mutable_devices(0)->mutable_thermal()->set_fan_speed_ratio(-0.1); }},
      {"activity over 1",
       [](auto& r) { r.mutable_devices(0)->mutable_activity()->set_tensor_ratio(1.5); }},
      {"compute die over 1",
       [](auto& r) { r.mutable_devices(0)->mutable_activity()->add_compute_die_ratios(1.01); }},
      {"negative bus traffic",
       [](auto& r) {
         r.mutable_devices(0)->mutable_activity()->set_nvlink_receive_bytes_per_second(-1);
       }},
      {"no performance state P16",
       [](auto& r) { r.mutable_devices(0)->mutable_state()->set_performance_state(16); }},
      {"negative bandwidth",
       [](auto& r) {
         r.mutable_devices(0)->mutable_links(0)->set_max_bandwidth_bytes_per_second(-1);
       }},
      {"negative duration", [](auto& r) { r.mutable_collectors(0)->set_duration_seconds(-1); }},
      {"negative interval", [](auto& r) { r.mutable_interval()->set_seconds(-1); }},
      {"bad nanos", [](auto& r) { r.mutable_timestamp()->set_nanos(1'000'000'000); }},
  };
  for (const auto& [what, change] : cases) EXPECT_EQ(With(change), "value_out_of_range") << what;
}

}  // namespace
}  // namespace report_validator_test
}  // namespace accelmon
