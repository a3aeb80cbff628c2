#include "daemon/tools/record_commands.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <set>

#include "daemon/common/cli_validators.h"
#include "daemon/common/empty_values.h"
#include "daemon/common/exit_codes.h"
#include "daemon/common/flags.h"
#include "daemon/common/tls_flags.h"
#include "daemon/tools/progress.h"
#include "daemon/tools/recording_input.h"
#include "daemon/tools/replay.h"
#include "proto/time_format.h"
#include "recording/jsonl.h"
#include "recording/recording_reader.h"
#include "recording/segment_writer.h"

namespace accelmon {
namespace {

using recording::DamageReport;
using recording::MergedReader;
using recording::ReadSummary;
using recording::RecordingError;

std::string Plural(uint64_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

// Prints damage the reader met since the last call to stderr, as it goes.
class DamagePrinter {
 public:
  DamagePrinter(const MergedReader& reader, Progress& progress)
      : reader_(reader), progress_(progress) {}
  void Flush() {
    const auto& damage = reader_.damage();
    if (printed_ == damage.size()) return;
    progress_.Clear();
    for (; printed_ < damage.size(); ++printed_) {
      std::fprintf(stderr, "accelmon: %s\n", DescribeDamage(damage[printed_]).c_str());
    }
  }

 private:
  const MergedReader& reader_;
  Progress& progress_;
  size_t printed_ = 0;
};

// One stderr line about damaged input, for the commands that go on past it.
void WarnDamaged(const std::string& input, const ReadSummary& summary, bool listed) {
  if (summary.clean()) return;
  std::fprintf(stderr, "accelmon: %s: %s, %s lost%s; everything else was read\n", input.c_str(),
               Plural(summary.damage.size(), "damaged region", "damaged regions").c_str(),
               HumanBytes(summary.damaged_bytes()).c_str(),
               listed ? "" : (" (`accelmon record verify " + input + "` lists them)").c_str());
}

std::string FormatRange(const std::optional<int64_t>& first, const std::optional<int64_t>& last) {
  if (!first || !last) return "-";
  return FormatRfc3339(*first) + " .. " + FormatRfc3339(*last);
}

const char* FormatName(recording::InputFormat format) {
  switch (format) {
    case recording::InputFormat::kDirectory:
      return "recording directory";
    case recording::InputFormat::kSegment:
      return "segment file";
    case recording::InputFormat::kJsonLines:
      return "JSON Lines";
  }
  return "";
}

// "2 segments", or "1 file" for JSON Lines.
std::string Files(const ReadSummary& s) {
  return s.format == recording::InputFormat::kJsonLines
             ? Plural(s.segments.size(), "file", "files")
             : Plural(s.segments.size(), "segment", "segments");
}

std::string BaseName(const std::string& path) {
  return std::filesystem::path(path).filename().string();
}

// --speed: a factor, or "max" (0) for as fast as the exporter takes them.
std::optional<double> ParseSpeed(const std::string& text) {
  if (text == "max") return 0.0;
  double value = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || ptr != text.data() + text.size() || !std::isfinite(value) || value < 0) {
    return std::nullopt;
  }
  return value;
}

}  // namespace

// What inspect prints of one input: its format, files and size, and a line per segment.
void PrintInputSegments(const std::string& input, const ReadSummary& s) {
  std::printf("%s: %s, %s, %s\n", input.c_str(), FormatName(s.format), Files(s).c_str(),
              HumanBytes(s.bytes).c_str());
  std::printf("\n%-26s %10s %9s  %-24s  %-24s  %-9s %s\n", "SEGMENT", "SIZE", "REPORTS", "FIRST",
              "LAST", "WRITER", "DAMAGE");
  for (const recording::SegmentSummary& seg : s.segments) {
    std::string damage = seg.damaged_bytes > 0 ? HumanBytes(seg.damaged_bytes) + " lost" : "-";
    if (seg.torn_tail_bytes > 0) {
      damage +=
          (damage == "-" ? "" : ", ") + std::string("torn tail ") + HumanBytes(seg.torn_tail_bytes);
    }
    std::printf("%-26s %10s %9llu  %-24s  %-24s  %-9s %s\n", BaseName(seg.path).c_str(),
                HumanBytes(seg.bytes).c_str(), static_cast<unsigned long long>(seg.reports),
                seg.first_time_ns ? FormatRfc3339(*seg.first_time_ns).c_str() : "-",
                seg.last_time_ns ? FormatRfc3339(*seg.last_time_ns).c_str() : "-",
                seg.writer.empty() ? "-" : seg.writer.c_str(), damage.c_str());
  }
}

int RecordInspect(const std::vector<std::string>& inputs) {
  const std::string input = JoinInputs(inputs);
  auto reader = OpenRecordingInput(inputs);
  if (!reader) return kExitUsage;
  Progress progress("inspect", reader->bytes_total());
  // Devices by node: uuid, or index when a device has none.
  std::map<std::string, std::set<std::string>> devices_by_node;
  std::map<std::string, uint64_t> reports_by_node;
  while (const v1::NodeReport* report = reader->Next()) {
    ++reports_by_node[report->node()];
    auto& devices = devices_by_node[report->node()];
    for (const v1::DeviceTelemetry& d : report->devices()) {
      devices.insert(d.identity().uuid().empty() ? "#" + std::to_string(d.identity().index())
                                                 : d.identity().uuid());
    }
    progress.Update(reader->bytes_done(), reader->reports());
  }
  progress.Clear();

  const ReadSummary& s = reader->summary();
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (i > 0) std::printf("\n");
    PrintInputSegments(inputs[i], reader->reader(i).summary());
  }
  std::optional<int64_t> first;
  std::optional<int64_t> last;
  uint64_t report_bytes = 0;
  for (const recording::SegmentSummary& seg : s.segments) {
    if (seg.first_time_ns && (!first || *seg.first_time_ns < *first)) first = seg.first_time_ns;
    if (seg.last_time_ns && (!last || *seg.last_time_ns > *last)) last = seg.last_time_ns;
    report_bytes += seg.report_bytes;
  }

  size_t devices = 0;
  for (const auto& [node, set] : devices_by_node) devices += set.size();
  std::printf("\n");
  std::printf("Time range:    %s", FormatRange(first, last).c_str());
  if (first && last) {
    std::printf(
        " (%s)",
        FormatDuration(std::chrono::duration<double>(static_cast<double>(*last - *first) / 1e9))
            .c_str());
  }
  std::printf("\nNodes:         %zu\n", reports_by_node.size());
  // One line per node, up to a screenful.
  constexpr size_t kNodesListed = 20;
  size_t listed = 0;
  for (const auto& [node, n] : reports_by_node) {
    if (listed++ == kNodesListed) {
      std::printf("  ... and %zu more\n", reports_by_node.size() - kNodesListed);
      break;
    }
    std::printf("  %-24s %s, %s\n", node.c_str(),
                Plural(devices_by_node[node].size(), "device", "devices").c_str(),
                Plural(n, "report", "reports").c_str());
  }
  std::printf("Devices:       %zu\n", devices);
  std::printf("Reports:       %llu in %llu records\n", static_cast<unsigned long long>(s.reports),
              static_cast<unsigned long long>(s.records));
  if (inputs.size() > 1) {
    std::printf("Duplicates:    %s held by two recordings, counted once above per node\n",
                Plural(reader->duplicates(), "report", "reports").c_str());
  }
  if (s.reports > 0) {
    std::printf("Bytes/report:  %.0f",
                static_cast<double>(s.bytes) / static_cast<double>(s.reports));
    if (s.format != recording::InputFormat::kJsonLines && report_bytes > 0 && s.bytes > 0) {
      std::printf(" (%.0f uncompressed; compression %.1fx)",
                  static_cast<double>(report_bytes) / static_cast<double>(s.reports),
                  static_cast<double>(report_bytes) / static_cast<double>(s.bytes));
    }
    std::printf("\n");
  }
  if (s.clean()) {
    std::printf("Damage:        none\n");
  } else {
    std::printf("Damage:        %s, %s lost (`accelmon record verify %s` lists them)\n",
                Plural(s.damage.size(), "region", "regions").c_str(),
                HumanBytes(s.damaged_bytes()).c_str(), input.c_str());
  }
  if (!s.torn_tails.empty()) {
    std::printf("Torn tails:    %zu (an interrupted last write: normal after a crash)\n",
                s.torn_tails.size());
  }
  return kExitOk;
}

int RecordVerify(const std::vector<std::string>& inputs) {
  const std::string input = JoinInputs(inputs);
  auto reader = OpenRecordingInput(inputs);
  if (!reader) return kExitUsage;
  Progress progress("verify", reader->bytes_total());
  while (reader->Next() != nullptr) progress.Update(reader->bytes_done(), reader->reports());
  progress.Clear();

  const ReadSummary& s = reader->summary();
  const std::string what =
      Files(s) + ", " + Plural(s.reports, "report", "reports") + ", " + HumanBytes(s.bytes);
  if (s.clean()) {
    std::printf("OK: %s: %s, no damage%s\n", input.c_str(), what.c_str(),
                s.torn_tails.empty() ? "" : " (see the note on torn tails)");
  } else {
    std::printf("DAMAGED: %s: %s; %s, %s lost:\n", input.c_str(), what.c_str(),
                Plural(s.damage.size(), "damaged region", "damaged regions").c_str(),
                HumanBytes(s.damaged_bytes()).c_str());
    for (const DamageReport& d : s.damage) std::printf("  %s\n", DescribeDamage(d).c_str());
  }
  for (const recording::TornTail& t : s.torn_tails) {
    std::printf(
        "note: %s offset %llu: torn tail of %llu bytes (a write cut short, as by a crash; not "
        "damage)\n",
        t.file.c_str(), static_cast<unsigned long long>(t.offset),
        static_cast<unsigned long long>(t.bytes));
  }
  return s.clean() ? kExitOk : kExitFailure;
}

int RecordExportJsonl(const std::vector<std::string>& inputs, const std::string& output) {
  const std::string input = JoinInputs(inputs);
  auto reader = OpenRecordingInput(inputs);
  if (!reader) return kExitUsage;
  const bool to_stdout = output == "-";
  std::FILE* out = to_stdout ? stdout : std::fopen(output.c_str(), "wb");
  if (out == nullptr) {
    std::fprintf(stderr, "accelmon: %s: %s\n", output.c_str(), std::strerror(errno));
    return kExitUsage;
  }
  Progress progress("export", reader->bytes_total());
  if (to_stdout && ::isatty(STDOUT_FILENO) == 1) progress.Disable();  // the lines are the display
  DamagePrinter damage(*reader, progress);
  recording::JsonlWriter writer;
  std::string buffer;
  constexpr size_t kFlushAt = size_t{1} << 20;
  bool write_failed = false;
  while (const v1::NodeReport* report = reader->Next()) {
    writer.Append(*report, &buffer);
    if (buffer.size() >= kFlushAt) {
      write_failed |= std::fwrite(buffer.data(), 1, buffer.size(), out) != buffer.size();
      buffer.clear();
    }
    damage.Flush();
    progress.Update(reader->bytes_done(), reader->reports());
    if (write_failed) break;
  }
  damage.Flush();
  progress.Clear();
  if (!write_failed)
    write_failed = std::fwrite(buffer.data(), 1, buffer.size(), out) != buffer.size();
  write_failed |= std::fflush(out) != 0;
  const int saved_errno = errno;
  if (!to_stdout) write_failed |= std::fclose(out) != 0;
  if (write_failed) {
    std::fprintf(stderr, "accelmon: %s: write failed: %s\n", to_stdout ? "stdout" : output.c_str(),
                 std::strerror(saved_errno));
    return kExitFailure;
  }
  const ReadSummary& s = reader->summary();
  WarnDamaged(input, s, true);
  if (!to_stdout) {
    std::fprintf(stderr, "accelmon: exported %s from %s to %s\n",
                 Plural(s.reports, "report", "reports").c_str(), input.c_str(), output.c_str());
  }
  return s.clean() ? kExitOk : kExitFailure;
}

int RecordImportJsonl(const std::string& jsonl, const std::string& dir, uint64_t segment_bytes,
                      bool zstd) {
  std::error_code ec;
  if (std::filesystem::is_directory(dir, ec)) {
    const size_t existing = recording::ListSegments(dir).size();
    if (existing > 0) {
      std::fprintf(stderr,
                   "accelmon: %s already holds a recording (%s); import into a new or empty "
                   "directory\n",
                   dir.c_str(), Plural(existing, "segment", "segments").c_str());
      return kExitUsage;
    }
  }
  auto reader = OpenRecordingInput({jsonl}, {.json_lines = true});
  if (!reader) return kExitUsage;
  if (reader->format() != recording::InputFormat::kJsonLines) {
    std::fprintf(stderr, "accelmon: %s: a directory; --jsonl takes a JSON Lines file or -\n",
                 jsonl.c_str());
    return kExitUsage;
  }
  std::optional<recording::SegmentWriter> writer;
  try {
    writer.emplace(recording::RecordingOptions{
        .dir = dir,
        .writer = "import",
        .segment_bytes = segment_bytes,
        .max_bytes = 0,  // an import keeps everything it was given
        .retention = std::chrono::milliseconds(0),
        .compression = zstd ? recording::Compression::kZstd : recording::Compression::kNone});
  } catch (const std::exception& e) {
    std::fprintf(stderr, "accelmon: %s\n", e.what());
    return kExitUsage;
  }
  Progress progress("import", reader->bytes_total());
  DamagePrinter damage(*reader, progress);
  // Batches about the size of an exporter's group commit: big enough to compress well.
  constexpr size_t kBatchReports = 512;
  constexpr size_t kBatchBytes = size_t{1} << 20;
  recording::Batch batch;
  try {
    while (const v1::NodeReport* report = reader->Next()) {
      batch.Add(*report);
      if (batch.keys.size() >= kBatchReports || batch.body.size() >= kBatchBytes) {
        writer->AppendBatch(batch);
        batch.Clear();
      }
      damage.Flush();
      progress.Update(reader->bytes_done(), reader->reports());
    }
    damage.Flush();
    writer->AppendBatch(batch);
    writer->Sync();
  } catch (const std::exception& e) {
    progress.Clear();
    std::fprintf(stderr, "accelmon: %s\n", e.what());
    return kExitFailure;
  }
  progress.Clear();
  const ReadSummary& s = reader->summary();
  const recording::SegmentWriterStats& stats = writer->stats();
  std::printf("imported %s into %s (%s, %s)", Plural(s.reports, "report", "reports").c_str(),
              dir.c_str(), Plural(stats.segments, "segment", "segments").c_str(),
              HumanBytes(stats.bytes).c_str());
  if (!s.clean()) {
    std::printf("; %s skipped", Plural(s.damage.size(), "bad line", "bad lines").c_str());
  }
  std::printf("\n");
  return s.clean() ? kExitOk : kExitFailure;
}

namespace {

int Replay(RecordingCommands& c) {
  const bool to_exporter = !c.exporter_address.empty();
  if (to_exporter == !c.openmetrics_dir.empty()) {
    std::fprintf(stderr,
                 "accelmon: replay: give either --exporter.address HOST:PORT or --openmetrics "
                 "OUT_DIR (see --help)\n");
    return kExitUsage;
  }
  const auto speed = ParseSpeed(c.speed);
  if (!speed) {
    std::fprintf(stderr, "accelmon: --speed: \"%s\" is not a factor (examples: 1, 10, 0.5, max)\n",
                 c.speed.c_str());
    return kExitUsage;
  }
  if (to_exporter) {
    ImplyClientTls(c.tls);
    if (auto error = CheckClientTls(c.tls)) {
      std::fprintf(stderr, "accelmon: %s\n", error->c_str());
      return kExitUsage;
    }
  }
  const std::string input = JoinInputs(c.inputs);
  if (c.inputs.size() > 1 && std::find(c.inputs.begin(), c.inputs.end(), "-") != c.inputs.end()) {
    std::fprintf(stderr, "accelmon: standard input (\"-\") can only be read alone\n");
    return kExitUsage;
  }
  auto reader = OpenRecordingInput(c.inputs);
  if (!reader) return kExitUsage;
  Progress progress("replay", reader->bytes_total());

  if (!to_exporter) {
    OpenMetricsWriter::Summary summary;
    try {
      summary = ReplayToOpenMetrics(*reader, c.openmetrics_dir, &progress);
    } catch (const std::exception& e) {
      progress.Clear();
      std::fprintf(stderr, "accelmon: %s\n", e.what());
      return kExitFailure;
    }
    WarnDamaged(input, reader->summary(), false);
    std::optional<int64_t> first;
    std::optional<int64_t> last;
    if (summary.first_timestamp_ms) first = *summary.first_timestamp_ms * 1'000'000;
    if (summary.last_timestamp_ms) last = *summary.last_timestamp_ms * 1'000'000;
    std::printf("wrote %s to %s: %s, %s in %s, %s\n",
                Plural(summary.files.size(), "OpenMetrics file", "OpenMetrics files").c_str(),
                c.openmetrics_dir.c_str(), Plural(summary.reports, "report", "reports").c_str(),
                Plural(summary.samples, "sample", "samples").c_str(),
                Plural(summary.series, "series", "series").c_str(),
                FormatRange(first, last).c_str());
    if (reader->duplicates() > 0) {
      std::printf("%s held by two recordings written once\n",
                  Plural(reader->duplicates(), "report", "reports").c_str());
    }
    if (summary.reports_without_timestamp > 0) {
      std::printf("skipped %s without a timestamp\n",
                  Plural(summary.reports_without_timestamp, "report", "reports").c_str());
    }
    if (!summary.files.empty()) {
      std::printf(
          "next, into a Prometheus data directory (one block per two-hour file):\n"
          "  for f in %s/*.om; do promtool tsdb create-blocks-from openmetrics \"$f\" "
          "PROMETHEUS_DATA_DIR; done\n",
          c.openmetrics_dir.c_str());
    }
    return reader->summary().clean() ? kExitOk : kExitFailure;
  }

  const ReplayResult r = ReplayToExporter(*reader,
                                          ReplayOptions{.exporter_address = c.exporter_address,
                                                        .tls = c.tls,
                                                        .speed = *speed,
                                                        .shift_to_now = c.shift_to_now},
                                          &progress);
  for (const std::string& error : r.errors) std::fprintf(stderr, "accelmon: %s\n", error.c_str());
  if (r.nodes == 0 && !r.errors.empty()) return kExitFailure;  // never connected
  WarnDamaged(input, reader->summary(), false);
  std::printf("replayed %s of %s to %s in %s: %llu applied, %llu duplicate, %llu rejected",
              Plural(r.sent, "report", "reports").c_str(), Plural(r.nodes, "node", "nodes").c_str(),
              c.exporter_address.c_str(), FormatDuration(r.elapsed).c_str(),
              static_cast<unsigned long long>(r.applied),
              static_cast<unsigned long long>(r.duplicate),
              static_cast<unsigned long long>(r.rejected));
  if (!r.rejected_reasons.empty()) {
    std::string reasons;
    for (const auto& [reason, n] : r.rejected_reasons) {
      reasons += (reasons.empty() ? "" : ", ") + reason + " " + std::to_string(n);
    }
    std::printf(" (%s)", reasons.c_str());
  }
  std::printf("\n");
  if (reader->duplicates() > 0) {
    std::printf("%s held by two recordings sent once\n",
                Plural(reader->duplicates(), "report", "reports").c_str());
  }
  if (r.duplicate > 0 && r.applied == 0) {
    std::printf(
        "note: every report was a duplicate: this exporter has applied them before (a replay "
        "keeps the reports' agent instance and sequence)\n");
  }
  const bool all_acknowledged = r.errors.empty() && r.acknowledged() == r.read;
  return all_acknowledged && r.rejected == 0 && reader->summary().clean() ? kExitOk : kExitFailure;
}

const CLI::Validator kReplaySpeed(
    [](std::string& value) -> std::string {
      return ParseSpeed(value) ? std::string()
                               : "\"" + value + "\" is not a factor (examples: 1, 10, 0.5, max)";
    },
    "X|max");

}  // namespace

void AddRecordingCommands(CLI::App& app, RecordingCommands& c) {
  CLI::App* record = app.add_subcommand(
      "record", "Look into, check, export and import flight recordings (--record.dir)");
  record->require_subcommand(1);
  const std::string input_help =
      "Recording directory, segment file (.seg) or JSON Lines file (one NodeReport per line); "
      "several (one per exporter of a fleet) are read as one, merged by report time, a report "
      "two of them hold read once";

  c.inspect = record->add_subcommand(
      "inspect", "Segments, time range, nodes, devices, reports and bytes per report");
  c.inspect->add_option("INPUT", c.inputs, input_help)->required();

  c.verify = record->add_subcommand(
      "verify",
      "Read everything; exit 0 with a one-line summary, or 1 listing every damaged region");
  c.verify->add_option("INPUT", c.inputs, input_help)->required();

  c.export_jsonl = record->add_subcommand(
      "export", "Write a recording as JSON Lines (protobuf JSON of one NodeReport per line)");
  c.export_jsonl->add_flag("--jsonl", c.jsonl, "JSON Lines (the only format so far)")->required();
  c.export_jsonl->add_option("-o,--output", c.output, "File to write (\"-\": standard output)")
      ->check(kNotEmpty)
      ->capture_default_str();
  c.export_jsonl->add_option("INPUT", c.inputs, input_help)->required();

  c.import_jsonl = record->add_subcommand(
      "import", "Write JSON Lines into a new recording directory; bad lines are skipped");
  c.import_jsonl->add_option("--jsonl", c.import_from, "JSON Lines file to read (\"-\": stdin)")
      ->required();
  c.import_jsonl->add_option("--record.segment-size", c.segment_size, "Size of each segment")
      ->check(cli::kSegmentSize)
      ->capture_default_str();
  c.import_jsonl->add_option("--record.compression", c.compression, "Compression of each record")
      ->check(CLI::IsMember({"zstd", "none"}))
      ->capture_default_str();
  c.import_jsonl->add_option("DIR", c.import_dir, "Recording directory to create")->required();

  c.replay = app.add_subcommand(
      "replay",
      "Feed a recording to an exporter as if its nodes were live, or write OpenMetrics files "
      "for Prometheus backfill");
  c.replay->add_option("INPUT", c.inputs, input_help + "; \"-\": JSON Lines on stdin")->required();
  CLI::Option* address =
      c.replay
          ->add_option("--exporter.address", c.exporter_address,
                       "Exporter to stream to (one stream per node, over its agents' gRPC port)")
          ->check(cli::kConnectAddress);
  CLI::Option* speed =
      c.replay
          ->add_option("--speed", c.speed,
                       "Replay this many times faster than recorded; \"max\" (or 0): as fast as "
                       "the exporter acknowledges")
          ->check(kReplaySpeed)
          ->capture_default_str();
  CLI::Option* shift =
      c.replay->add_flag("--shift-to-now", c.shift_to_now,
                         "Stamp the first report now and the rest at the replay's pace, so "
                         "dashboards show the replay as current");
  AddGrpcClientTlsFlags(*c.replay, c.tls);
  CLI::Option* openmetrics = c.replay->add_option(
      "--openmetrics", c.openmetrics_dir,
      "Write OpenMetrics files (one per two-hour window) into this directory instead, for "
      "promtool tsdb create-blocks-from openmetrics");
  openmetrics->check(kNotEmpty);
  openmetrics->excludes(address)->excludes(speed)->excludes(shift);
}

std::optional<int> RunRecordingCommand(RecordingCommands& c) {
  try {
    if (c.inspect->parsed()) return RecordInspect(c.inputs);
    if (c.verify->parsed()) return RecordVerify(c.inputs);
    if (c.export_jsonl->parsed()) return RecordExportJsonl(c.inputs, c.output);
    if (c.import_jsonl->parsed()) {
      return RecordImportJsonl(c.import_from, c.import_dir, *ParseByteSize(c.segment_size),
                               c.compression == "zstd");
    }
    if (c.replay->parsed()) return Replay(c);
  } catch (const RecordingError& e) {
    std::fprintf(stderr, "accelmon: %s\n", e.what());
    return kExitUsage;
  }
  return std::nullopt;
}

SubcommandRunner RegisterRecordingCommands(CLI::App& app) {
  auto command = std::make_shared<RecordingCommands>();
  AddRecordingCommands(app, *command);
  return [command] { return RunRecordingCommand(*command); };
}

}  // namespace accelmon
