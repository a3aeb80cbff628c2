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

}  // namespace

int Diagnose(const DiagnoseOptions& o) {
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
  // Read before the (possibly long) run, so a bad file fails at once.
  std::optional<diagnostics::Expectations> expectations;
  if (!o.score.empty()) {
    try {
      expectations = diagnostics::LoadExpectations(o.score);
    } catch (const diagnostics::ScoreError& e) {
      std::fprintf(stderr, "accelmon: %s\n", e.what());
      return kExitUsage;
    }
  }
  diagnostics::Config config;
  if (!o.config.empty()) {
    try {
      config = diagnostics::LoadConfig(o.config);
    } catch (const diagnostics::ConfigError& e) {
      std::fprintf(stderr, "accelmon: %s\n", e.what());
      return kExitUsage;
    }
  }
  std::vector<diagnostics::RuleDefinition> rules(diagnostics::AllRules().begin(),
                                                 diagnostics::AllRules().end());
  if (!o.rules.empty()) {
    auto selected = SelectRules(o.rules);
    if (!selected) return kExitUsage;
    rules = std::move(*selected);
  }
  // The engine keeps pointers into `rules`: it lives as long.
  diagnostics::Engine engine(config, rules);
  const std::vector<std::string> running = engine.rule_ids();
  for (const std::string& id : o.rules) {
    if (std::find(running.begin(), running.end(), id) == running.end()) {
      std::fprintf(stderr, "accelmon: note: rule %s is disabled in %s\n", id.c_str(),
                   o.config.empty() ? "the defaults" : o.config.c_str());
    }
  }

  if (stdin_input && o.inputs.size() > 1) {
    std::fprintf(stderr, "accelmon: standard input (\"-\") can only be read alone\n");
    return kExitUsage;
  }
  const std::string input_name = JoinInputs(o.inputs);
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

  std::vector<v1::Finding> findings;
  engine.set_listener([&findings](diagnostics::Change change, const v1::Finding& f) {
    if (change == diagnostics::Change::kClosed) findings.push_back(f);
  });

  Progress progress("diagnose", reader->bytes_total());
  diagnostics::InputSummary summary{.input = input_name, .recordings = o.inputs.size()};
  std::set<std::string, std::less<>> nodes;
  std::set<std::string, std::less<>> job_nodes;
  std::set<std::pair<std::string, std::string>> job_devices;  // node, device key
  size_t damage_printed = 0;
  while (const v1::NodeReport* report = reader->Next()) {
    engine.Process(*report);
    if (nodes.find(report->node()) == nodes.end()) nodes.insert(report->node());
    if (!o.job.empty()) {
      for (const v1::DeviceTelemetry& d : report->devices()) {
        if (diagnostics::DeviceJob(d) != o.job) continue;
        if (job_nodes.find(report->node()) == job_nodes.end()) job_nodes.insert(report->node());
        job_devices.emplace(report->node(), diagnostics::DeviceKey(d));
      }
    }
    const int64_t t = ToNanos(report->timestamp());
    if (!summary.first_ns || t < *summary.first_ns) summary.first_ns = t;
    if (!summary.last_ns || t > *summary.last_ns) summary.last_ns = t;
    const auto& damage = reader->damage();
    if (damage_printed < damage.size()) {
      progress.Clear();
      for (; damage_printed < damage.size(); ++damage_printed) {
        std::fprintf(stderr, "accelmon: %s\n", DescribeDamage(damage[damage_printed]).c_str());
      }
    }
    progress.Update(reader->bytes_done(), reader->reports());
  }
  progress.Clear();
  const recording::ReadSummary& read = reader->summary();
  for (; damage_printed < read.damage.size(); ++damage_printed) {
    std::fprintf(stderr, "accelmon: %s\n", DescribeDamage(read.damage[damage_printed]).c_str());
  }

  for (v1::Finding& f : engine.OpenFindings()) findings.push_back(std::move(f));
  if (!o.job.empty()) {
    std::erase_if(findings, [&](const v1::Finding& f) { return f.job() != o.job; });
    summary.job = o.job;
    summary.job_nodes.assign(job_nodes.begin(), job_nodes.end());
    summary.job_devices = job_devices.size();
    if (job_nodes.empty()) {
      std::fprintf(stderr, "accelmon: note: no device in %s was held by job %s\n",
                   input_name.c_str(), o.job.c_str());
    }
  }
  diagnostics::SortFindings(findings);
  summary.reports = read.reports;
  summary.duplicates = reader->duplicates();
  summary.nodes = nodes.size();
  summary.damaged_regions = read.damage.size();
  summary.damaged_bytes = read.damaged_bytes();
  summary.out_of_order = engine.stats().out_of_order;
  reader.reset();  // `read` goes with it; `summary` has what is still needed

  std::ostream& out = o.output == "-" ? std::cout : file;
  if (expectations) {
    const diagnostics::Score score =
        diagnostics::ComputeScore(*expectations, findings, summary.first_ns.value_or(0));
    if (o.format == "json") {
      diagnostics::WriteScoreJson(out, score, input_name);
    } else {
      diagnostics::WriteScoreText(out, score, input_name);
    }
  } else if (o.format == "json") {
    diagnostics::WriteJson(out, findings, summary);
  } else if (o.format == "html") {
    const auto series = CollectSeries(o.inputs, findings);
    diagnostics::WriteHtml(out, findings, summary, series);
  } else {
    diagnostics::WriteText(out, findings, summary);
  }
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
                 input_name.c_str(), static_cast<unsigned long long>(summary.damaged_regions),
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
