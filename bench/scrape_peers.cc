// The same simulated fleet behind two HTTP servers, for bench/scrape_encodings.sh to scrape with
// curl: accelmon's exporter (its /metrics: plain, gzip, zstd) and prometheus-cpp's Exposer over a
// Registry of gauges with the same names, labels and values (its gzip'd /metrics is the peer's).
//   scrape_peers SERIES   prints "accelmon PORT" and "prometheus-cpp PORT", serves until stdin
//                         closes
#include <prometheus/exposer.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <iostream>
#include <string>

#include "bench/sim_fleet.h"
#include "daemon/exporter/exporter.h"
#include "proto/time_format.h"

int main(int argc, char** argv) {
  const size_t target = argc > 1 ? std::stoul(argv[1]) : 100'000;
  spdlog::set_level(spdlog::level::warn);  // stdout carries the ports
  const accelmon::bench::Fleet& fleet = accelmon::bench::FleetOf(target);

  accelmon::ExporterOptions options;
  options.web_listen_address = "127.0.0.1:0";
  options.grpc_listen_address = "127.0.0.1:0";
  options.diagnostics.reset();
  accelmon::Exporter exporter(options);
  exporter.Start();
  const auto now = accelmon::Clock::now();
  for (const accelmon::NodeEntry& n : fleet.nodes) {
    auto report = std::make_shared<accelmon::v1::NodeReport>(*n.report);
    *report->mutable_timestamp() = accelmon::TimestampFromTimePoint(now);  // not too old to apply
    exporter.store().Apply(report, now);
  }

  auto registry = std::make_shared<prometheus::Registry>();
  for (const auto& f : accelmon::RenderNodes(fleet.nodes, accelmon::bench::kNow)) {
    auto& family = prometheus::BuildGauge().Name(f.name).Help(f.help).Register(*registry);
    for (const auto& m : f.metric) {
      prometheus::Labels labels;
      for (const auto& l : m.label) labels.emplace(l.name, l.value);
      family.Add(labels).Set(f.type == prometheus::MetricType::Counter ? m.counter.value
                                                                       : m.gauge.value);
    }
  }
  prometheus::Exposer exposer("127.0.0.1:0");
  exposer.RegisterCollectable(registry);

  std::printf("series %zu\naccelmon %d\nprometheus-cpp %d\n", fleet.series, exporter.web_port(),
              exposer.GetListeningPorts().at(0));
  std::fflush(stdout);
  std::string line;
  while (std::getline(std::cin, line)) {
  }
  exporter.Stop();
  return 0;
}
