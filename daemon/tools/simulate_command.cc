#include "daemon/tools/simulate_command.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <vector>

#include "collectors/sim.h"
#include "daemon/common/cli_validators.h"
#include "daemon/common/empty_values.h"
#include "daemon/common/exit_codes.h"
#include "daemon/common/flags.h"
#include "daemon/common/version.h"
#include "proto/time_format.h"
#include "recording/jsonl.h"
#include "recording/recording_reader.h"
#include "recording/segment_writer.h"

namespace accelmon {
namespace {

// Where the reports go: JSON Lines or a recording directory. Throws std::runtime_error when a
// write fails.
class Sink {
 public:
  virtual ~Sink() = default;
  virtual void Add(const v1::NodeReport& report) = 0;
  virtual void Finish() = 0;
};

class JsonlSink final : public Sink {
 public:
  explicit JsonlSink(const std::string& path) : path_(path) {
    if (path == "-") {
      file_ = stdout;
    } else {
      file_ = std::fopen(path.c_str(), "w");
      if (file_ == nullptr) Fail();
    }
  }
  ~JsonlSink() override {
    if (file_ != nullptr && file_ != stdout) std::fclose(file_);
  }
  void Add(const v1::NodeReport& report) override {
    writer_.Append(report, &buffer_);
    if (buffer_.size() >= (size_t{1} << 20)) Flush();
  }
  void Finish() override {
    Flush();
    if (std::fflush(file_) != 0) Fail();
    if (file_ != stdout) {
      FILE* f = file_;
      file_ = nullptr;
      if (std::fclose(f) != 0) Fail();
    }
  }

 private:
  void Flush() {
    if (!buffer_.empty() &&
        std::fwrite(buffer_.data(), 1, buffer_.size(), file_) != buffer_.size()) {
      Fail();
    }
    buffer_.clear();
  }
  [[noreturn]] void Fail() const {
    throw std::runtime_error((path_ == "-" ? std::string("stdout") : path_) + ": " +
                             std::strerror(errno));
  }

  std::string path_;
  FILE* file_ = nullptr;
  recording::JsonlWriter writer_;
  std::string buffer_;
};

class RecordingSink final : public Sink {
 public:
  explicit RecordingSink(const std::string& dir)
      : writer_(recording::RecordingOptions{.dir = dir,
                                            .writer = "simulate",
                                            .max_bytes = 0,  // keep everything generated
                                            .retention = std::chrono::milliseconds(0)}) {}
  void Add(const v1::NodeReport& report) override {
    batch_.Add(report);
    // Batches about the size of an exporter's group commit, as `record import` writes.
    if (batch_.keys.size() >= 512 || batch_.body.size() >= (size_t{1} << 20)) {
      writer_.AppendBatch(batch_);
      batch_.Clear();
    }
  }
  void Finish() override {
    writer_.AppendBatch(batch_);
    batch_.Clear();
    writer_.Sync();
  }

 private:
  recording::SegmentWriter writer_;
  recording::Batch batch_;
};

}  // namespace

void AddSimulateCommand(CLI::App& app, SimulateCommand& c) {
  c.app = app.add_subcommand(
      "simulate",
      "Generate a simulated fleet's reports as fast as the CPU allows, with simulated timestamps "
      "(optionally playing a fault scenario), into JSON Lines or a recording directory");
  c.app->add_option("--nodes", c.nodes, "Simulated nodes, named sim-0 … sim-N-1")
      ->check(CLI::Range(1, 10'000))
      ->capture_default_str();
  c.app->add_option("--sim", c.devices, "Simulated devices per node")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  c.app->add_option("--scenario", c.scenario, "YAML file of faults to inject (docs/simulation.md)");
  c.app->add_option("--duration", c.duration, "Simulated time to generate")
      ->check(cli::kDuration)
      ->capture_default_str();
  c.app->add_option("--interval", c.interval, "Simulated time between a node's reports")
      ->check(cli::kDuration)
      ->capture_default_str();
  c.app
      ->add_option("--start", c.start,
                   "Timestamp of the first reports, RFC 3339 (default: now minus --duration, so "
                   "the data ends now)")
      ->check(kNotEmpty);
  c.app->add_option("--output", c.output, "Write JSON Lines to this file (-: stdout)")
      ->check(kNotEmpty);
  c.app->add_option("--record.dir", c.record_dir,
                    "Write a recording directory (new or empty), as `record import` does");
}

std::optional<int> RunSimulateCommand(SimulateCommand& c) {
  if (c.app == nullptr || !c.app->parsed()) return std::nullopt;
  if (c.output.empty() == c.record_dir.empty()) {
    std::fprintf(stderr,
                 "accelmon: simulate: give either --output FILE.jsonl or --record.dir DIR (see "
                 "--help)\n");
    return kExitUsage;
  }
  const int64_t duration_ms = ParseDuration(c.duration)->count();
  const int64_t interval_ms = ParseDuration(c.interval)->count();
  int64_t start_ms = 0;
  if (c.start.empty()) {
    const auto now = std::chrono::duration_cast<std::chrono::seconds>(
        std::chrono::system_clock::now().time_since_epoch());
    start_ms = now.count() * 1000 - duration_ms;
  } else if (auto parsed = ParseRfc3339Millis(c.start)) {
    start_ms = *parsed;
  } else {
    std::fprintf(stderr,
                 "accelmon: simulate: --start \"%s\" is not an RFC 3339 time (e.g. "
                 "2026-12-01T08:00:00Z)\n",
                 c.start.c_str());
    return kExitUsage;
  }

  std::shared_ptr<const collectors::Scenario> scenario;
  std::vector<std::string> names;
  std::vector<std::unique_ptr<collectors::SimCollector>> fleet;
  try {
    if (!c.scenario.empty()) {
      scenario = std::make_shared<const collectors::Scenario>(collectors::LoadScenario(c.scenario));
    }
    for (int n = 0; n < c.nodes; ++n) {
      names.push_back("sim-" + std::to_string(n));
      fleet.push_back(std::make_unique<collectors::SimCollector>(
          collectors::SimOptions{.devices = c.devices,
                                 .seed = collectors::SimSeedForNode(names.back()),
                                 .scenario = scenario,
                                 .node = names.back(),
                                 .node_index = n,
                                 .nodes = c.nodes}));
    }
  } catch (const collectors::ScenarioError& e) {
    std::fprintf(stderr, "accelmon: %s\n", e.what());
    return kExitUsage;
  }

  std::unique_ptr<Sink> sink;
  try {
    if (!c.record_dir.empty()) {
      std::error_code ec;
      if (std::filesystem::is_directory(c.record_dir, ec) &&
          !recording::ListSegments(c.record_dir).empty()) {
        std::fprintf(stderr,
                     "accelmon: %s already holds a recording; simulate into a new or empty "
                     "directory\n",
                     c.record_dir.c_str());
        return kExitUsage;
      }
      sink = std::make_unique<RecordingSink>(c.record_dir);
    } else {
      sink = std::make_unique<JsonlSink>(c.output);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "accelmon: %s\n", e.what());
    return kExitFailure;
  }

  const auto began = std::chrono::steady_clock::now();
  const int64_t ticks = std::max<int64_t>(1, duration_ms / interval_ms);
  try {
    v1::NodeReport report;
    for (int64_t tick = 0; tick < ticks; ++tick) {
      const int64_t at_ms = start_ms + tick * interval_ms;
      for (size_t n = 0; n < fleet.size(); ++n) {
        report.Clear();
        report.set_node(names[n]);
        report.set_agent_instance_id("simulate-" + names[n]);
        report.set_sequence(static_cast<uint64_t>(tick + 1));
        *report.mutable_timestamp() = TimestampFromMillis(at_ms);
        *report.mutable_interval() = DurationFromNanos(interval_ms * 1'000'000);
        report.set_agent_version(kVersion);
        fleet[n]->Collect(report);
        // As an agent's CollectorSet reports it; no wall time, so that output is reproducible.
        auto& status = *report.add_collectors();
        status.set_name("sim");
        status.set_success(true);
        sink->Add(report);
      }
    }
    sink->Finish();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "accelmon: simulate: %s\n", e.what());
    return kExitFailure;
  }
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  std::fprintf(
      stderr, "simulate: %d node%s x %lld reports (%s at %s) -> %s in %.1f s\n", c.nodes,
      c.nodes == 1 ? "" : "s", static_cast<long long>(ticks), c.duration.c_str(),
      c.interval.c_str(),
      c.record_dir.empty() ? (c.output == "-" ? "stdout" : c.output.c_str()) : c.record_dir.c_str(),
      took);
  return kExitOk;
}

SubcommandRunner RegisterSimulateCommand(CLI::App& app) {
  auto command = std::make_shared<SimulateCommand>();
  AddSimulateCommand(app, *command);
  return [command] { return RunSimulateCommand(*command); };
}

}  // namespace accelmon
