// Writes the reports of a simulated fleet as JSON Lines on standard output: NODES nodes, each
// what `standalone --sim 8` reports (host collectors over the test fixture root, 8 simulated
// devices), one report per INTERVAL_MS from START for SECONDS, in time order. Hours of telemetry
// in seconds, for bench/recording_vs_tsdb.sh.
//   sim_jsonl [NODES=2] [SECONDS=7199] [INTERVAL_MS=1000] [START=1764676800]
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "collectors/registry.h"
#include "collectors/sim.h"
#include "recording/jsonl.h"

int main(int argc, char** argv) {
  auto arg = [&](int i, long long fallback) { return argc > i ? std::atoll(argv[i]) : fallback; };
  const int nodes = static_cast<int>(arg(1, 2));
  const long long seconds = arg(2, 7199);
  const long long interval_ms = arg(3, 1000);
  // A two-hour boundary, so the default span fills exactly one Prometheus block.
  const long long start_ms = arg(4, 1764676800) * 1000;
  if (nodes < 1 || seconds < 0 || interval_ms < 1) {
    std::fprintf(stderr, "usage: sim_jsonl [NODES] [SECONDS] [INTERVAL_MS] [START_UNIX]\n");
    return 2;
  }

  const std::string root = ACCELMON_FIXTURES_DIR "/host";
  std::vector<accelmon::collectors::CollectorSet> fleet;
  for (int n = 0; n < nodes; ++n) {
    fleet.emplace_back(accelmon::collectors::CreateCollectors(accelmon::collectors::CollectorConfig{
        .paths = accelmon::collectors::PathResolver(root + "/proc", root + "/sys"),
        .sim_devices = 8,
        .sim_seed = accelmon::collectors::SimSeedForNode("sim" + std::to_string(n))}));
  }
  accelmon::recording::JsonlWriter writer;
  std::string out;
  uint64_t sequence = 0;
  for (long long t = start_ms; t <= start_ms + seconds * 1000; t += interval_ms) {
    ++sequence;
    for (int n = 0; n < nodes; ++n) {
      accelmon::v1::NodeReport r;
      r.set_node("sim" + std::to_string(n));
      r.set_agent_instance_id("sim-jsonl-" + std::to_string(n));
      r.set_sequence(sequence);
      r.mutable_timestamp()->set_seconds(t / 1000);
      r.mutable_timestamp()->set_nanos(static_cast<int32_t>(t % 1000) * 1000000);
      r.mutable_interval()->set_seconds(interval_ms / 1000);
      r.mutable_interval()->set_nanos(static_cast<int32_t>(interval_ms % 1000) * 1000000);
      r.set_agent_version("0.1.0");
      fleet[static_cast<size_t>(n)].CollectAll(r);
      writer.Append(r, &out);
    }
    if (out.size() > (1u << 20)) {
      std::fwrite(out.data(), 1, out.size(), stdout);
      out.clear();
    }
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  return std::fflush(stdout) == 0 ? 0 : 1;
}
