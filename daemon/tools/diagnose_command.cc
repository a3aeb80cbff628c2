#include "daemon/tools/diagnose_command.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <set>

#include "daemon/common/empty_values.h"
#include "daemon/common/exit_codes.h"
#include "daemon/tools/progress.h"
#include "daemon/tools/recording_input.h"
#include "diagnostics/config.h"
#include "diagnostics/engine.h"
#include "diagnostics/score.h"
#include "diagnostics/series.h"
#include "diagnostics/timeline.h"
#include "recording/recording_reader.h"

namespace accelmon {
namespace {

using recording::RecordingError;

// The rules --rules names, in the documented order; unknown ids are an error listing the known.
std::optional<std::vector<diagnostics::RuleDefinition>> SelectRules(
    const std::vector<std::string>& ids) {
  const auto all = diagnostics::AllRules();
  std::vector<diagnostics::RuleDefinition> selected;
  for (const std::string& id : ids) {
    bool known = false;
    for (const auto& rule : all) known = known || rule.id == id;
    if (!known) {
      std::string list;
      for (const auto& rule : all) list += (list.empty() ? "" : ", ") + std::string(rule.id);
      std::fprintf(stderr, "accelmon: --rules: unknown rule \"%s\" (known: %s)\n", id.c_str(),
                   list.c_str());
      return std::nullopt;
    }
  }
  for (const auto& rule : all) {
    for (const std::string& id : ids) {
      if (rule.id == id) {
        selected.push_back(rule);
        break;
      }
    }
  }
  return selected;
}

// Reads the input again for the plots around the findings (html).
std::vector<std::vector<diagnostics::SeriesPoint>> CollectSeries(
    const std::vector<std::string>& inputs, const std::vector<v1::Finding>& findings) {
  diagnostics::SeriesCollector collector(findings);
  auto reader = OpenRecordingInput(inputs);
  if (reader) {
    Progress progress("plots", reader->bytes_total());
    while (const v1::NodeReport* report = reader->Next()) {
      collector.Add(*report);
      progress.Update(reader->bytes_done(), reader->reports());
    }
  }
  std::vector<std::vector<diagnostics::SeriesPoint>> series;
  series.reserve(collector.size());
  for (size_t i = 0; i < collector.size(); ++i) series.push_back(collector.points(i));
  return series;
}

// Flag combinations that cannot work, said before anything is read: the exit code, or nothing.
std::optional<int> RefuseOptions(const DiagnoseOptions& o) {
  const bool stdin_input = std::find(o.inputs.begin(), o.inputs.end(), "-") != o.inputs.end();
  if (o.format == "html" && stdin_input) {
    std::fprintf(stderr,
                 "accelmon: --format html reads the input twice (once more for the plots) and "
                 "cannot from standard input; save it to a file first\n");
    return kExitUsage;
  }
  if (!o.score.empty() && o.format == "html") {
    std::fprintf(stderr, "accelmon: --score prints text or json, not html\n");
    return kExitUsage;
  }
  return std::nullopt;
}

// What the run needs from files, read before the (possibly long) run so that a bad one fails at
// once: the expectations of --score, the thresholds and the rules.
struct RunSetup {
  std::optional<diagnostics::Expectations> expectations;
  diagnostics::Config config;
  std::vector<diagnostics::RuleDefinition> rules;
};

std::optional<RunSetup> LoadSetup(const DiagnoseOptions& o) {
  RunSetup setup;
  try {
    if (!o.score.empty()) setup.expectations = diagnostics::LoadExpectations(o.score);
    if (!o.config.empty()) setup.config = diagnostics::LoadConfig(o.config);
  } catch (const diagnostics::ScoreError& e) {
    std::fprintf(stderr, "accelmon: %s\n", e.what());
    return std::nullopt;
  } catch (const diagnostics::ConfigError& e) {
    std::fprintf(stderr, "accelmon: %s\n", e.what());
    return std::nullopt;
  }
  setup.rules.assign(diagnostics::AllRules().begin(), diagnostics::AllRules().end());
  if (!o.rules.empty()) {
    auto selected = SelectRules(o.rules);
    if (!selected) return std::nullopt;
    setup.rules = std::move(*selected);
  }
  return setup;
}

// Says which of the rules --rules names the config disables.
void NoteDisabledRules(const DiagnoseOptions& o, const diagnostics::Engine& engine) {
  const std::vector<std::string> running = engine.rule_ids();
  for (const std::string& id : o.rules) {
    if (std::find(running.begin(), running.end(), id) == running.end()) {
      std::fprintf(stderr, "accelmon: note: rule %s is disabled in %s\n", id.c_str(),
                   o.config.empty() ? "the defaults" : o.config.c_str());
    }
  }
}

// What the input held, as the output's summary says it: nodes, time range, and the job's nodes
// and devices with --job.
class InputTally {
 public:
  explicit InputTally(std::string job) : job_(std::move(job)) {}

  void Add(const v1::NodeReport& report) {
    nodes_.insert(report.node());
    if (!job_.empty()) {
      for (const v1::DeviceTelemetry& d : report.devices()) {
        if (diagnostics::DeviceJob(d) != job_) continue;
        job_nodes_.insert(report.node());
        job_devices_.emplace(report.node(), diagnostics::DeviceKey(d));
      }
    }
    const int64_t t = ToNanos(report.timestamp());
    if (!first_ns_ || t < *first_ns_) first_ns_ = t;
    if (!last_ns_ || t > *last_ns_) last_ns_ = t;
  }

  void Fill(diagnostics::InputSummary& summary) const {
    summary.nodes = nodes_.size();
    summary.first_ns = first_ns_;
    summary.last_ns = last_ns_;
    if (!job_.empty()) {
      summary.job = job_;
      summary.job_nodes.assign(job_nodes_.begin(), job_nodes_.end());
      summary.job_devices = job_devices_.size();
    }
  }

 private:
  const std::string job_;
  std::set<std::string, std::less<>> nodes_;
  std::set<std::string, std::less<>> job_nodes_;
  std::set<std::pair<std::string, std::string>> job_devices_;  // node, device key
  std::optional<int64_t> first_ns_, last_ns_;
};

// Runs every report of `reader` through `engine`, printing damage as the reader meets it: the
// findings (closed ones as they close, then those still open) and the summary of the input.
std::vector<v1::Finding> RunEngine(const DiagnoseOptions& o, recording::MergedReader& reader,
                                   diagnostics::Engine& engine,
                                   diagnostics::InputSummary& summary) {
  std::vector<v1::Finding> findings;
  engine.set_listener([&findings](diagnostics::Change change, const v1::Finding& f) {
    if (change == diagnostics::Change::kClosed) findings.push_back(f);
  });
  Progress progress("diagnose", reader.bytes_total());
  InputTally tally(o.job);
  size_t damage_printed = 0;
  const auto print_damage = [&](const std::vector<recording::DamageReport>& damage) {
    for (; damage_printed < damage.size(); ++damage_printed) {
      std::fprintf(stderr, "accelmon: %s\n", DescribeDamage(damage[damage_printed]).c_str());
    }
  };
  while (const v1::NodeReport* report = reader.Next()) {
    engine.Process(*report);
    tally.Add(*report);
    if (damage_printed < reader.damage().size()) {
      progress.Clear();
      print_damage(reader.damage());
    }
    progress.Update(reader.bytes_done(), reader.reports());
  }
  progress.Clear();
  const recording::ReadSummary& read = reader.summary();
  print_damage(read.damage);

  for (v1::Finding& f : engine.OpenFindings()) findings.push_back(std::move(f));
  tally.Fill(summary);
  if (!o.job.empty()) {
    std::erase_if(findings, [&](const v1::Finding& f) { return f.job() != o.job; });
    if (summary.job_nodes.empty()) {
      std::fprintf(stderr, "accelmon: note: no device in %s was held by job %s\n",
                   summary.input.c_str(), o.job.c_str());
    }
  }
  diagnostics::SortFindings(findings);
  summary.reports = read.reports;
  summary.duplicates = reader.duplicates();
  summary.damaged_regions = read.damage.size();
  summary.damaged_bytes = read.damaged_bytes();
  summary.out_of_order = engine.stats().out_of_order;
  return findings;
}

// The findings, or their score against the expectations, in the format asked for.
void WriteOutput(std::ostream& out, const DiagnoseOptions& o, const RunSetup& setup,
                 const std::vector<v1::Finding>& findings,
                 const diagnostics::InputSummary& summary) {
  if (setup.expectations) {
    const diagnostics::Score score =
        diagnostics::ComputeScore(*setup.expectations, findings, summary.first_ns.value_or(0));
    if (o.format == "json") {
      diagnostics::WriteScoreJson(out, score, summary.input);
    } else {
      diagnostics::WriteScoreText(out, score, summary.input);
    }
  } else if (o.format == "json") {
    diagnostics::WriteJson(out, findings, summary);
  } else if (o.format == "html") {
    const auto series = CollectSeries(o.inputs, findings);
    diagnostics::WriteHtml(out, findings, summary, series);
  } else {
    diagnostics::WriteText(out, findings, summary);
  }
}

}  // namespace

int Diagnose(const DiagnoseOptions& o) {
  if (auto refused = RefuseOptions(o)) return *refused;
  auto setup = LoadSetup(o);
  if (!setup) return kExitUsage;
  // The engine keeps pointers into `setup->rules`: it lives as long.
  diagnostics::Engine engine(setup->config, setup->rules);
  NoteDisabledRules(o, engine);

  const bool stdin_input = std::find(o.inputs.begin(), o.inputs.end(), "-") != o.inputs.end();
  if (stdin_input && o.inputs.size() > 1) {
    std::fprintf(stderr, "accelmon: standard input (\"-\") can only be read alone\n");
    return kExitUsage;
  }
  auto reader = OpenRecordingInput(o.inputs);
  if (!reader) return kExitUsage;

  // Opened before the (possibly long) run, so a bad path fails at once.
  std::ofstream file;
  if (o.output != "-") {
    file.open(o.output, std::ios::binary | std::ios::trunc);
    if (!file) {
      std::fprintf(stderr, "accelmon: %s: %s\n", o.output.c_str(), std::strerror(errno));
      return kExitUsage;
    }
  }

  diagnostics::InputSummary summary{.input = JoinInputs(o.inputs), .recordings = o.inputs.size()};
  const std::vector<v1::Finding> findings = RunEngine(o, *reader, engine, summary);
  reader.reset();  // the summary has what is still needed

  std::ostream& out = o.output == "-" ? std::cout : file;
  WriteOutput(out, o, *setup, findings, summary);
  out.flush();
  if (!out) {
    std::fprintf(stderr, "accelmon: %s: write failed\n",
                 o.output == "-" ? "stdout" : o.output.c_str());
    return kExitFailure;
  }

  if (summary.out_of_order > 0) {
    std::fprintf(stderr,
                 "accelmon: %llu reports skipped: not newer than their node's previous report "
                 "(the rules need each node's reports in time order)\n",
                 static_cast<unsigned long long>(summary.out_of_order));
  }
  if (summary.damaged_regions > 0) {
    std::fprintf(stderr,
                 "accelmon: %s: %llu damaged region(s), %s lost; the findings cover everything "
                 "else\n",
                 summary.input.c_str(), static_cast<unsigned long long>(summary.damaged_regions),
                 HumanBytes(summary.damaged_bytes).c_str());
    return kExitFailure;
  }
  return kExitOk;
}

void AddDiagnoseCommand(CLI::App& app, DiagnoseCommand& c) {
  c.app = app.add_subcommand(
      "diagnose",
      "Run the diagnostics rules over a recording or JSON Lines and print what they find: an "
      "incident timeline, JSON, or one HTML page with a plot around each finding");
  c.app
      ->add_option("INPUT", c.options.inputs,
                   "Recording directory, segment file (.seg), JSON Lines file, or \"-\" for JSON "
                   "Lines on standard input (not with --format html). Several (one per exporter of "
                   "a fleet) are read as one: merged by report time, a report two of them hold "
                   "(a node that moved between exporters) read once")
      ->required();
  c.app->add_option("--diagnostics.config", c.options.config,
                    "Diagnostics thresholds (YAML, as diagnostics/defaults.yaml; default: the "
                    "built-in ones)");
  c.app->add_option("--format", c.options.format, "What to print")
      ->check(CLI::IsMember({"text", "json", "html"}))
      ->capture_default_str();
  c.app->add_option("-o,--output", c.options.output, "File to write (\"-\": standard output)")
      ->check(kNotEmpty)
      ->capture_default_str();
  c.app
      ->add_option("--rules", c.options.rules,
                   "Run only these rules (comma-separated ids, e.g. link_down,job_stall)")
      ->delimiter(',')
      ->check(kNotEmpty);
  c.app
      ->add_option("--job", c.options.job,
                   "Only this job's findings: its timeline across nodes (the job id of the "
                   "devices' holders: Slurm job id, or the pushed job id)")
      ->check(kNotEmpty);
  c.app
      ->add_option(
          "--score", c.options.score,
          "Instead of the findings, print how they compare with the expected ones in this "
          "file (a scenario's expect: list): per rule found, missed, false findings, onset "
          "error (text, or json with --format json; exit code 0 whatever the score)")
      ->check(kNotEmpty);
}

std::optional<int> RunDiagnoseCommand(DiagnoseCommand& c) {
  if (c.app == nullptr || !c.app->parsed()) return std::nullopt;
  try {
    return Diagnose(c.options);
  } catch (const RecordingError& e) {
    std::fprintf(stderr, "accelmon: %s\n", e.what());
    return kExitUsage;
  }
}

SubcommandRunner RegisterDiagnoseCommand(CLI::App& app) {
  auto command = std::make_shared<DiagnoseCommand>();
  AddDiagnoseCommand(app, *command);
  return [command] { return RunDiagnoseCommand(*command); };
}

}  // namespace accelmon
