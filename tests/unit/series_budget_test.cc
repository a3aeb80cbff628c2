// Trimming a report to the limits no hard limit covers, and to the node's series budget: the
// estimate is never below what /metrics renders, and what goes is counted by reason.
#include "daemon/exporter/series_budget.h"

#include <gtest/gtest.h>

#include <string>

#include "collectors/sim.h"
#include "daemon/exporter/metrics_renderer.h"
#include "daemon/exporter/node_store.h"

namespace accelmon {
namespace series_budget_test {
namespace {

// What /metrics renders for `report` alone: every series of the node, job-wide ones included.
size_t RenderedSeries(const v1::NodeReport& report) {
  NodeEntry entry{.report = std::make_shared<const v1::NodeReport>(report),
                  .received_at = Clock::now()};
  size_t n = 0;
  for (const auto& family : RenderNodes({entry}, Clock::now())) n += family.metric.size();
  return n;
}

// A node as rich as the schema allows: simulated devices with links, and every list and map
// filled a few times.
v1::NodeReport RichReport(int devices, int extra) {
  v1::NodeReport r;
  r.set_node("rich");
  r.set_agent_instance_id("i");
  r.set_sequence(1);
  r.mutable_timestamp()->set_seconds(1'700'000'000);
  collectors::SimCollector sim({.devices = devices, .seed = 5});
  sim.Collect(r);
  for (int i = 0; i < extra; ++i) {
    const std::string n = std::to_string(i);
    auto* c = r.add_collectors();
    c->set_name("collector" + n);
    c->set_success(true);
    (*r.mutable_agent()->mutable_push_rejected_total())["reason" + n] = 1;
    auto* t = r.mutable_host()->add_temperatures();
    t->set_sensor("t" + n);
    t->set_chip("hwmon" + n);
    t->set_celsius(40);
    auto* p = r.mutable_host()->add_power_sensors();
    p->set_sensor("p" + n);
    p->set_chip("hwmon" + n);
    p->set_watts(10);
    auto* zone = r.mutable_host()->add_buddyinfo();
    zone->set_numa_node(static_cast<uint32_t>(i));
    zone->set_zone("Normal");
    zone->set_page_size_bytes(4096);
    for (int o = 0; o < 11 + extra; ++o) zone->add_free_blocks(static_cast<uint64_t>(o));
    auto* hl = r.mutable_host()->add_links();
    hl->set_name("eth" + n);
    hl->set_up(true);
    hl->set_transmit_bytes_total(1);
    (*hl->mutable_errors_total())["type" + n] = 1;
    for (auto& d : *r.mutable_devices()) {
      (*d.mutable_thermal()->mutable_throttle_reasons())["reason" + n] = true;
      for (auto& l : *d.mutable_links()) (*l.mutable_errors_total())["type" + n] = 1;
      auto* h = d.add_holders();
      h->set_kind(v1::HOLDER_KIND_POD);
      h->set_job("job" + n);
      h->set_pod("pod" + n);
      auto* pm = d.add_processes();
      pm->set_pid(static_cast<uint32_t>(100 + i));
      pm->set_job("job" + n);
      pm->set_used_bytes(1);
      pm->set_reserved_bytes(1);
      pm->set_allocated_bytes(1);
      pm->set_ooms_total(0);
      pm->set_alloc_retries_total(0);
      pm->set_steps_total(1);
    }
  }
  return r;
}

TEST(SeriesBudget, EstimateIsNeverBelowWhatIsRendered) {
  for (const auto& [devices, extra] : {std::pair{0, 0}, {1, 1}, {8, 3}, {16, 10}}) {
    const v1::NodeReport r = RichReport(devices, extra);
    const size_t rendered = RenderedSeries(r);
    EXPECT_GE(CountSeries(r), rendered) << devices << " devices, " << extra << " of each list";
    // Not wildly above either, or the budget would drop what fits.
    EXPECT_LE(CountSeries(r), rendered * 2 + 50) << devices << " devices, " << extra;
  }
}

TEST(SeriesBudget, ListsAndMapsWithoutAHardLimitAreTrimmedAndCounted) {
  v1::NodeReport r = RichReport(2, 100);
  TrimLimits limits;
  limits.max_collectors = 10;
  limits.max_map_entries = 5;
  limits.max_sensors = 20;
  limits.max_buddy_zones = 30;
  limits.max_buddy_orders = 16;
  limits.series_per_node = 1'000'000;
  const Dropped dropped = TrimReport(r, limits);
  EXPECT_EQ(r.collectors_size(), 10);
  EXPECT_EQ(r.agent().push_rejected_total_size(), 5);
  EXPECT_EQ(r.host().temperatures_size(), 20);
  EXPECT_EQ(r.host().power_sensors_size(), 20);
  ASSERT_EQ(r.host().buddyinfo_size(), 30);
  EXPECT_EQ(r.host().buddyinfo(0).free_blocks_size(), 16);
  EXPECT_EQ(r.devices(0).thermal().throttle_reasons_size(), 5);
  EXPECT_EQ(r.devices(0).links(0).errors_total_size(), 5);
  EXPECT_EQ(r.host().links(0).errors_total_size(), 1);
  // The smallest keys stay, whatever order the map iterates in.
  EXPECT_TRUE(r.agent().push_rejected_total().contains("reason0"));
  EXPECT_TRUE(r.agent().push_rejected_total().contains("reason11"));
  EXPECT_FALSE(r.agent().push_rejected_total().contains("reason99"));
  EXPECT_EQ(dropped.at("too_many_collectors"), 90u);
  EXPECT_EQ(dropped.at("too_many_sensors"), 160u);
  EXPECT_EQ(dropped.at("too_many_buddy_zones"), 70u);
  EXPECT_EQ(dropped.at("too_many_buddy_orders"), 30u * (111 - 16));
  EXPECT_GT(dropped.at("too_many_map_entries"), 95u);
  EXPECT_EQ(dropped.count("series_budget"), 0u);
  // Within limits already: nothing goes.
  EXPECT_TRUE(TrimReport(r, limits).empty());
}

TEST(SeriesBudget, OverTheBudgetTheLeastTellingPartsGoFirstUntilItFits) {
  v1::NodeReport r = RichReport(8, 4);
  const size_t full = CountSeries(r);
  const int devices = r.devices_size();
  const int processes = r.devices(devices - 1).processes_size();
  TrimLimits limits;
  limits.series_per_node = full - 20;  // a little over: host sensors are enough
  Dropped dropped = TrimReport(r, limits);
  EXPECT_LE(CountSeries(r), limits.series_per_node);
  EXPECT_EQ(r.devices_size(), devices);
  EXPECT_EQ(r.devices(devices - 1).processes_size(), processes) << "sensors went first";
  EXPECT_GT(dropped.at("series_budget"), 0u);

  // Far over: devices lose processes, links and finally the last devices go; the first stays.
  r = RichReport(8, 4);
  limits.series_per_node = 200;
  dropped = TrimReport(r, limits);
  EXPECT_LE(CountSeries(r), 200u);
  EXPECT_LE(RenderedSeries(r), 200u);
  ASSERT_GE(r.devices_size(), 1);
  EXPECT_LT(r.devices_size(), devices);
  EXPECT_EQ(r.devices(0).identity().index(), 0u);
  EXPECT_GT(dropped.at("series_budget"), 0u);
}

}  // namespace
}  // namespace series_budget_test
}  // namespace accelmon
