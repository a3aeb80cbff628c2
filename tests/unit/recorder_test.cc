// The exporter's flight recorder: the segment writer (header first, rotation, retention, lock,
// watermark recovery) and the group-committing recorder thread, on real files in a temp dir.
#include "recording/recorder.h"

#include <fcntl.h>
#include <google/protobuf/io/coded_stream.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <stdexcept>

#include "accelmon/v1/recording.pb.h"
#include "daemon/exporter/node_store.h"
#include "recording/log_format.h"
#include "recording/log_reader.h"
#include "recording/segment_writer.h"
#include "support/temp_dir.h"
#include "support/wait.h"

namespace accelmon::recording {
namespace recorder_test {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream buf;
  buf << in.rdbuf();
  return std::move(buf).str();
}

struct Record {
  RecordKind kind{};
  std::string body;  // decompressed
};

// Every record of a segment, read strictly: damage fails the test.
std::vector<Record> ReadRecords(const std::string& path) {
  const std::string data = ReadFile(path);
  LogReader reader(data, ReadMode::kPointInTime);
  std::vector<Record> out;
  std::string_view record;
  std::string scratch, storage, error;
  SegmentDecoder decoder;  // with the header's dictionary, for the records after it
  while (reader.ReadRecord(&record, &scratch)) {
    DecodedRecord decoded;
    EXPECT_TRUE(decoder.Decode(record, &storage, &decoded, &error)) << path << ": " << error;
    out.push_back(Record{decoded.kind, std::string(decoded.body)});
  }
  EXPECT_TRUE(reader.damage().empty()) << path << ": " << reader.damage().front().reason;
  return out;
}

// The reports of a ReportBatch body as their exact wire bytes.
std::vector<std::string> BatchReports(const std::string& body) {
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(body.data()),
                                            static_cast<int>(body.size()));
  std::vector<std::string> out;
  while (const uint32_t tag = in.ReadTag()) {
    EXPECT_EQ(tag, 10u);  // field 1, length-delimited
    uint32_t length = 0;
    std::string report;
    EXPECT_TRUE(in.ReadVarint32(&length) && in.ReadString(&report, static_cast<int>(length)));
    out.push_back(std::move(report));
  }
  return out;
}

v1::SegmentHeader Header(const Record& r) {
  EXPECT_EQ(r.kind, RecordKind::kSegmentHeader);
  v1::SegmentHeader h;
  EXPECT_TRUE(h.ParseFromString(r.body));
  return h;
}

Watermarks HeaderWatermarks(const v1::SegmentHeader& h) {
  Watermarks out;
  for (const auto& w : h.watermarks()) out[w.node()] = {w.agent_instance_id(), w.sequence()};
  return out;
}

v1::NodeReport Report(const std::string& node, uint64_t sequence, size_t padding = 0,
                      const std::string& instance = "inst-1") {
  v1::NodeReport r;
  r.set_node(node);
  r.set_agent_instance_id(instance);
  r.set_sequence(sequence);
  r.mutable_timestamp()->set_seconds(static_cast<int64_t>(1'700'000'000 + sequence));
  if (padding > 0) r.set_agent_version(std::string(padding, 'v'));
  return r;
}

ReportKey KeyOf(const v1::NodeReport& r) { return {r.node(), r.agent_instance_id(), r.sequence()}; }

// Makes writes that take a file past `bytes` fail with EFBIG, as a full disk would, until
// lifted. RLIMIT_FSIZE is the process's: only while one test runs.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(uint64_t bytes) : old_handler_(std::signal(SIGXFSZ, SIG_IGN)) {
    rlimit limit{};
    ok_ = getrlimit(RLIMIT_FSIZE, &old_) == 0;
    limit = old_;
    limit.rlim_cur = bytes;
    ok_ = ok_ && setrlimit(RLIMIT_FSIZE, &limit) == 0;
  }
  ~FileSizeLimit() { Lift(); }
  FileSizeLimit(const FileSizeLimit&) = delete;
  FileSizeLimit& operator=(const FileSizeLimit&) = delete;

  bool ok() const { return ok_; }
  void Lift() {
    if (lifted_) return;
    lifted_ = true;
    setrlimit(RLIMIT_FSIZE, &old_);
    std::signal(SIGXFSZ, old_handler_);
  }

 private:
  void (*old_handler_)(int);
  rlimit old_{};
  bool ok_ = false;
  bool lifted_ = false;
};

class RecordingTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = ::accelmon::testing::MakeTempDir("accelmon-recorder-test"); }
  void TearDown() override { fs::remove_all(dir_); }

  RecordingOptions Options() const {
    RecordingOptions o;
    o.dir = dir_;
    return o;
  }

  std::vector<std::string> Segments() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir_)) {
      if (e.path().extension() == ".seg") out.push_back(e.path().string());
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  // Every report in the directory, as wire bytes, in order.
  std::vector<std::string> AllReports() const {
    std::vector<std::string> out;
    for (const auto& seg : Segments()) {
      for (const Record& r : ReadRecords(seg)) {
        if (r.kind != RecordKind::kReportBatch) continue;
        for (auto& report : BatchReports(r.body)) out.push_back(std::move(report));
      }
    }
    return out;
  }

  std::string dir_;
};

TEST_F(RecordingTest, SegmentBeginsWithHeaderThenBatches) {
  const Watermarks seed{{"node-a", {"inst-0", 41}}};
  Batch batch;
  std::vector<std::string> sent;
  for (uint64_t seq = 1; seq <= 3; ++seq) {
    const auto r = Report("node-b", seq);
    sent.push_back(r.SerializeAsString());
    batch.Add(sent.back(), KeyOf(r));
  }
  {
    SegmentWriter writer(Options(), seed);
    writer.AppendBatch(batch);
    writer.Sync();
    EXPECT_EQ(writer.stats().records_written, 1u);
    EXPECT_EQ(writer.stats().reports_written, 3u);
    EXPECT_EQ(writer.stats().segments, 1u);
    EXPECT_EQ(writer.stats().bytes, fs::file_size(Segments().at(0)));
    EXPECT_EQ(writer.stats().bytes_written, writer.stats().bytes);
    const Watermarks after{{"node-a", {"inst-0", 41}}, {"node-b", {"inst-1", 3}}};
    EXPECT_EQ(writer.watermarks(), after);
  }
  ASSERT_EQ(Segments().size(), 1u);
  EXPECT_EQ(fs::path(Segments()[0]).filename(), "00000000000000000001.seg");
  const auto records = ReadRecords(Segments()[0]);
  ASSERT_EQ(records.size(), 2u);
  const v1::SegmentHeader h = Header(records[0]);
  EXPECT_EQ(h.format_version(), kFormatVersion);
  EXPECT_EQ(h.writer(), "exporter");
  EXPECT_GT(h.created().seconds(), 1'700'000'000);
  EXPECT_EQ(HeaderWatermarks(h), seed);
  ASSERT_EQ(records[1].kind, RecordKind::kReportBatch);
  EXPECT_TRUE(BatchReports(records[1].body) == sent) << "reports are recorded byte for byte";
}

TEST_F(RecordingTest, EveryOpenBeginsANewSegment) {
  Batch batch;
  batch.Add(Report("n", 1));
  { SegmentWriter(Options(), Watermarks{}).AppendBatch(batch); }
  const auto first_size = fs::file_size(Segments().at(0));
  {
    SegmentWriter writer(Options());
    EXPECT_EQ(writer.current_segment(), dir_ + "/00000000000000000002.seg");
    EXPECT_EQ(writer.stats().segments, 2u);
  }
  ASSERT_EQ(Segments().size(), 2u);
  EXPECT_EQ(fs::file_size(Segments()[0]), first_size) << "an earlier segment is never appended to";
  // The new header carries what the first segment recorded.
  const Watermarks expected{{"n", {"inst-1", 1}}};
  EXPECT_EQ(HeaderWatermarks(Header(ReadRecords(Segments()[1]).at(0))), expected);
}

TEST_F(RecordingTest, NodesSilentLongerThanTheHorizonLeaveTheHeaders) {
  RecordingOptions o = Options();
  o.segment_bytes = 64 << 10;
  o.compression = Compression::kNone;
  o.forget_watermarks_after = 1ms;
  SegmentWriter writer(o, Watermarks{});
  Batch batch;
  batch.Add(Report("gone", 1));
  writer.AppendBatch(batch);
  // "busy" keeps reporting (40 KB each, a new segment every other one); "gone" does not.
  uint64_t seq = 0;
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        Batch b;
        b.Add(Report("busy", ++seq, 40'000));
        writer.AppendBatch(b);
        return !writer.watermarks().contains("gone");
      },
      30s));
  EXPECT_TRUE(writer.watermarks().contains("busy"));
  writer.Sync();
  const v1::SegmentHeader newest = Header(ReadRecords(Segments().back()).at(0));
  EXPECT_FALSE(HeaderWatermarks(newest).contains("gone"));
}

TEST_F(RecordingTest, RotatesBySizeWithCurrentWatermarksInEachHeader) {
  RecordingOptions o = Options();
  o.segment_bytes = 64 << 10;
  o.max_bytes = 0;
  o.compression = Compression::kNone;
  std::vector<Watermarks> expected_headers{{}};
  {
    SegmentWriter writer(o, Watermarks{});
    for (uint64_t seq = 1; seq <= 40; ++seq) {
      Batch batch;
      batch.Add(Report("node-" + std::to_string(seq % 3), seq, 5000));
      const std::string before = writer.current_segment();
      const Watermarks marks_before = writer.watermarks();
      writer.AppendBatch(batch);
      if (writer.current_segment() != before) expected_headers.push_back(marks_before);
    }
    EXPECT_EQ(writer.stats().segments, expected_headers.size());
  }
  const auto segments = Segments();
  ASSERT_GE(segments.size(), 3u);
  ASSERT_EQ(segments.size(), expected_headers.size());
  uint64_t reports = 0;
  for (size_t i = 0; i < segments.size(); ++i) {
    EXPECT_LE(fs::file_size(segments[i]), o.segment_bytes) << segments[i];
    const auto records = ReadRecords(segments[i]);
    ASSERT_GE(records.size(), 2u) << segments[i];
    EXPECT_EQ(HeaderWatermarks(Header(records[0])), expected_headers[i]) << segments[i];
    for (size_t j = 1; j < records.size(); ++j) {
      EXPECT_EQ(records[j].kind, RecordKind::kReportBatch);
      reports += BatchReports(records[j].body).size();
    }
  }
  EXPECT_EQ(reports, 40u);
}

TEST_F(RecordingTest, RetentionBySizeDeletesOldestButNeverTheCurrentSegment) {
  RecordingOptions o = Options();
  o.max_bytes = 512 << 10;  // segments of a quarter of it
  o.compression = Compression::kNone;
  SegmentWriter writer(o, Watermarks{});
  for (uint64_t seq = 1; seq <= 200; ++seq) {
    Batch batch;
    batch.Add(Report("n", seq, 10'000));
    writer.AppendBatch(batch);
    uint64_t total = 0;
    for (const auto& s : Segments()) total += fs::file_size(s);
    EXPECT_EQ(total, writer.stats().bytes);
    // Deleting happens on rotation: between, the segment being written may grow to its limit.
    EXPECT_LE(total, o.max_bytes + o.max_bytes / 4) << "after report " << seq;
  }
  EXPECT_GT(writer.stats().segments_deleted, 0u);
  EXPECT_EQ(writer.stats().segments, Segments().size());
  EXPECT_EQ(Segments().back(), writer.current_segment());
  // What is left is readable and ends with the newest report.
  const auto reports = AllReports();
  ASSERT_FALSE(reports.empty());
  EXPECT_EQ(reports.back(), Report("n", 200, 10'000).SerializeAsString());
  EXPECT_LT(reports.size(), 200u);
}

TEST_F(RecordingTest, RetentionByAgeGoesByTheNewestRecord) {
  Batch batch;
  batch.Add(Report("n", 1));
  for (int i = 0; i < 3; ++i) SegmentWriter(Options(), Watermarks{}).AppendBatch(batch);
  auto segments = Segments();
  ASSERT_EQ(segments.size(), 3u);
  // The two oldest were last written 8 and 6 days ago.
  const auto set_age = [](const std::string& path, std::chrono::hours age) {
    const auto when = std::chrono::system_clock::now() - age;
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(when.time_since_epoch());
    timespec times[2];
    times[0].tv_sec = times[1].tv_sec = static_cast<time_t>(ns.count() / 1'000'000'000);
    times[0].tv_nsec = times[1].tv_nsec = static_cast<long>(ns.count() % 1'000'000'000);
    ASSERT_EQ(utimensat(AT_FDCWD, path.c_str(), times, 0), 0);
  };
  set_age(segments[0], std::chrono::hours(24 * 8));
  set_age(segments[1], std::chrono::hours(24 * 6));
  RecordingOptions o = Options();
  o.retention = std::chrono::hours(24 * 7);
  {
    SegmentWriter writer(o);
    EXPECT_EQ(writer.stats().segments_deleted, 1u);
    EXPECT_EQ(writer.stats().segments, 3u);
  }
  auto left = Segments();
  ASSERT_EQ(left.size(), 3u);
  EXPECT_EQ(left[0], segments[1]);
  // Retention 0 keeps everything, however old.
  set_age(left[0], std::chrono::hours(24 * 400));
  o.retention = {};
  SegmentWriter writer(o);
  EXPECT_EQ(writer.stats().segments_deleted, 0u);
  EXPECT_EQ(Segments().size(), 4u);
}

TEST_F(RecordingTest, SecondWriterOnTheSameDirectoryIsRefused) {
  SegmentWriter first(Options());
  try {
    SegmentWriter second(Options());
    FAIL() << "two writers share " << dir_;
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(dir_), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("in use"), std::string::npos) << e.what();
  }
  EXPECT_EQ(Segments().size(), 1u) << "the refused writer created nothing";
}

TEST_F(RecordingTest, UncreatableDirectoryNamesPathAndReason) {
  const std::string file = dir_ + "/not-a-dir";
  std::ofstream(file) << "x";
  RecordingOptions o = Options();
  o.dir = file + "/recording";
  try {
    SegmentWriter writer(o);
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(o.dir), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("Not a directory"), std::string::npos) << e.what();
  }
}

TEST_F(RecordingTest, RecoversWatermarksFromTheNewestSegment) {
  EXPECT_TRUE(RecoverWatermarks(dir_).watermarks.empty());
  EXPECT_TRUE(RecoverWatermarks(dir_ + "/missing").watermarks.empty());
  RecordingOptions o = Options();
  o.segment_bytes = 64 << 10;
  o.max_bytes = 0;
  o.compression = Compression::kNone;
  {
    SegmentWriter writer(o, Watermarks{{"gone", {"old", 9}}});
    for (uint64_t seq = 1; seq <= 30; ++seq) {
      Batch batch;
      batch.Add(Report("a", seq, 4000));
      batch.Add(Report("b", seq * 2, 4000));
      writer.AppendBatch(batch);
    }
    Batch restarted;  // node b's agent restarted: a new instance, sequences from 1
    restarted.Add(Report("b", 1, 0, "inst-2"));
    restarted.Add(Report("a", 7));  // a late duplicate does not lower a's watermark
    writer.AppendBatch(restarted);
    EXPECT_GT(writer.stats().segments, 2u);
  }
  const Watermarks expected{{"gone", {"old", 9}}, {"a", {"inst-1", 30}}, {"b", {"inst-2", 1}}};
  const RecoveredWatermarks recovered = RecoverWatermarks(dir_);
  EXPECT_EQ(recovered.watermarks, expected);
  EXPECT_EQ(recovered.segment, Segments().back());
  EXPECT_TRUE(recovered.damage.empty());
  // A writer opened without watermarks recovers the same, and carries them on.
  {
    SegmentWriter writer(o);
    EXPECT_EQ(writer.recovered().watermarks, expected);
    EXPECT_EQ(writer.watermarks(), expected);
  }
  EXPECT_EQ(RecoverWatermarks(dir_).watermarks, expected);
}

TEST_F(RecordingTest, RecoveryFallsBackWhenTheNewestSegmentIsTorn) {
  {
    SegmentWriter writer(Options(), Watermarks{});
    Batch batch;
    batch.Add(Report("a", 5));
    writer.AppendBatch(batch);
  }
  // A second run recorded a report, then its segment lost everything but a few bytes of the
  // header (a crash as the file was created, or a torn write).
  {
    SegmentWriter writer(Options());
    Batch batch;
    batch.Add(Report("c", 3));
    writer.AppendBatch(batch);
  }
  const std::string newest = Segments().back();
  fs::resize_file(newest, 5);
  Watermarks expected{{"a", {"inst-1", 5}}};
  RecoveredWatermarks recovered = RecoverWatermarks(dir_);
  EXPECT_EQ(recovered.watermarks, expected);
  EXPECT_EQ(recovered.segment, Segments().front());

  // An empty newest segment falls back the same way.
  fs::resize_file(newest, 0);
  EXPECT_EQ(RecoverWatermarks(dir_).watermarks, expected);

  // A torn last batch is not counted: the report it held is not recorded.
  {
    SegmentWriter writer(Options());
    Batch batch;
    batch.Add(Report("a", 6));
    writer.AppendBatch(batch);
    batch.Clear();
    batch.Add(Report("a", 7, 2000));
    writer.AppendBatch(batch);
  }
  const std::string last = Segments().back();
  fs::resize_file(last, fs::file_size(last) - 10);
  expected["a"].sequence = 6;
  recovered = RecoverWatermarks(dir_);
  EXPECT_EQ(recovered.watermarks, expected);
  EXPECT_EQ(recovered.segment, last);
  EXPECT_EQ(recovered.damaged_bytes, 0u) << "a torn tail is not damage";
}

TEST_F(RecordingTest, RecoveryReadsPastDamageInTheNewestSegment) {
  RecordingOptions o = Options();
  o.compression = Compression::kNone;
  {
    SegmentWriter writer(o, Watermarks{});
    for (uint64_t seq = 1; seq <= 20; ++seq) {
      Batch batch;
      batch.Add(Report("a", seq, 6000));  // several blocks
      writer.AppendBatch(batch);
    }
  }
  // Zero the second block: the reports in it are lost, the later ones still count.
  const std::string seg = Segments().back();
  {
    std::fstream f(seg, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(kBlockSize);
    f << std::string(kBlockSize, '\0');
  }
  const RecoveredWatermarks recovered = RecoverWatermarks(dir_);
  EXPECT_EQ(recovered.watermarks.at("a").sequence, 20u);
  EXPECT_GT(recovered.damaged_bytes, 0u);
  EXPECT_FALSE(recovered.damage.empty());
  EXPECT_NE(recovered.damage.front().find(seg), std::string::npos) << recovered.damage.front();
}

// ---- the recorder thread ----

class RecorderTest : public RecordingTest {
 protected:
  RecorderOptions Options(std::chrono::milliseconds sync_interval = 100ms) const {
    RecorderOptions o;
    o.recording.dir = dir_;
    o.sync_interval = sync_interval;
    return o;
  }

  // Whether the wire bytes `report` are in one of the directory's ReportBatch records.
  bool Recorded(const std::string& report) const {
    for (const auto& seg : Segments()) {
      // A strict read of a file being appended to: stops at its end like a torn tail.
      const std::string data = ReadFile(seg);
      LogReader reader(data, ReadMode::kPointInTime);
      std::string_view record;
      std::string scratch, storage, error;
      SegmentDecoder decoder;
      while (reader.ReadRecord(&record, &scratch)) {
        DecodedRecord decoded;
        if (!decoder.Decode(record, &storage, &decoded, &error)) return false;
        if (decoded.kind != RecordKind::kReportBatch) continue;
        for (const auto& r : BatchReports(std::string(decoded.body))) {
          if (r == report) return true;
        }
      }
    }
    return false;
  }

  RecorderStats stats_;
};

TEST_F(RecorderTest, CallbacksRunOnlyOnceTheReportIsInTheFile) {
  Recorder recorder(Options(20ms), stats_);
  constexpr int kReports = 60;
  std::atomic<int> called{0};
  std::atomic<int> found{0};
  std::vector<std::string> sent;
  for (int i = 1; i <= kReports; ++i) {
    const auto r = Report("node-" + std::to_string(i % 4), static_cast<uint64_t>(i), 100);
    sent.push_back(r.SerializeAsString());
  }
  for (int i = 0; i < kReports; ++i) {
    const auto r = Report("node-" + std::to_string((i + 1) % 4), static_cast<uint64_t>(i + 1), 100);
    recorder.Append(sent[static_cast<size_t>(i)], KeyOf(r), [&, i](bool) {
      // In order, and with the report already readable from the segment.
      EXPECT_EQ(called.load(), i);
      if (Recorded(sent[static_cast<size_t>(i)])) ++found;
      ++called;
    });
    // Spread over several commits: each ten wait until the ten before are called back.
    if (i % 10 == 9) {
      ASSERT_TRUE(testing::WaitFor([&] { return called.load() == i + 1; }, 30s));
    }
  }
  ASSERT_TRUE(testing::WaitFor([&] { return called.load() == kReports; }, 30s));
  EXPECT_EQ(found.load(), kReports);
  EXPECT_EQ(stats_.reports.load(), static_cast<uint64_t>(kReports));
  EXPECT_EQ(stats_.errors.load(), 0u);
  recorder.Stop();
  EXPECT_TRUE(AllReports() == sent);
  EXPECT_EQ(stats_.segment_bytes.load(), fs::file_size(Segments().at(0)));
  EXPECT_EQ(stats_.segments.load(), 1u);
  EXPECT_EQ(stats_.bytes.load(), fs::file_size(Segments().at(0)));
}

TEST_F(RecorderTest, GroupCommitPutsManyReportsInOneRecord) {
  // A long interval: after the first commit, everything appended meanwhile waits for the next.
  Recorder recorder(Options(2s), stats_);
  std::atomic<int> called{0};
  constexpr int kReports = 1000;
  for (int i = 1; i <= kReports; ++i) {
    const auto r = Report("n", static_cast<uint64_t>(i));
    recorder.Append(r.SerializeAsString(), KeyOf(r), [&](bool) { ++called; });
  }
  ASSERT_TRUE(testing::WaitFor([&] { return called.load() == kReports; }, 30s));
  recorder.Stop();
  size_t batches = 0;
  for (const Record& r : ReadRecords(Segments().at(0)))
    batches += r.kind == RecordKind::kReportBatch;
  EXPECT_LE(batches, 3u) << "1000 reports appended at once are a few records, not 1000";
  EXPECT_EQ(AllReports().size(), static_cast<size_t>(kReports));
}

TEST_F(RecorderTest, SplitsLargeCommitsIntoRecordsOfBoundedSize) {
  RecorderOptions o = Options(2s);
  o.max_record_bytes = 16 << 10;
  Recorder recorder(o, stats_);
  std::atomic<int> called{0};
  for (int i = 1; i <= 100; ++i) {
    const auto r = Report("n", static_cast<uint64_t>(i), 1000);
    recorder.Append(r.SerializeAsString(), KeyOf(r), [&](bool) { ++called; });
  }
  ASSERT_TRUE(testing::WaitFor([&] { return called.load() == 100; }, 30s));
  recorder.Stop();
  size_t batches = 0;
  for (const Record& r : ReadRecords(Segments().at(0))) {
    if (r.kind != RecordKind::kReportBatch) continue;
    ++batches;
    EXPECT_LE(r.body.size(), o.max_record_bytes);
  }
  EXPECT_GE(batches, 100 * 1000 / o.max_record_bytes);
  EXPECT_EQ(AllReports().size(), 100u);
}

TEST_F(RecorderTest, StopWritesWhatIsQueuedAndLaterAppendsAreNotRecorded) {
  auto recorder = std::make_unique<Recorder>(Options(5s), stats_);
  int called = 0;
  for (int i = 1; i <= 10; ++i) {
    const auto r = Report("n", static_cast<uint64_t>(i));
    recorder->Append(r.SerializeAsString(), KeyOf(r), [&](bool) { ++called; });
  }
  recorder->Stop();
  EXPECT_EQ(called, 10);
  EXPECT_EQ(AllReports().size(), 10u);
  const auto r = Report("n", 11);
  recorder->Append(r.SerializeAsString(), KeyOf(r), [&](bool) { ++called; });
  EXPECT_EQ(called, 11) << "runs at once";
  recorder.reset();
  EXPECT_EQ(AllReports().size(), 10u);
  // The directory is unlocked: the next recorder recovers what this one wrote.
  Recorder next(Options(), stats_);
  EXPECT_EQ(next.recovered().watermarks.at("n").sequence, 10u);
}

TEST_F(RecorderTest, AFailedWriteHoldsItsCallbackUntilTheReportIsWrittenOnARetry) {
  RecorderOptions o = Options(0ms);
  o.recording.compression = Compression::kNone;  // the write's size is the report's
  o.retry_interval = 50ms;
  Recorder recorder(o, stats_);
  std::atomic<int> recorded{0};
  std::atomic<int> unrecorded{0};
  std::vector<int> order;
  std::mutex order_mu;
  const auto append = [&](uint64_t seq, size_t padding) {
    const auto r = Report("n", seq, padding);
    recorder.Append(r.SerializeAsString(), KeyOf(r), [&, seq](bool ok) {
      ++(ok ? recorded : unrecorded);
      std::lock_guard lock(order_mu);
      order.push_back(static_cast<int>(seq));
    });
  };
  append(1, 0);
  ASSERT_TRUE(testing::WaitFor([&] { return recorded.load() == 1; }, 30s));
  // The file size limit makes the next, larger write fail with EFBIG, as a full disk would.
  FileSizeLimit full(fs::file_size(Segments().at(0)) + 100);
  ASSERT_TRUE(full.ok());
  append(2, 50'000);
  append(3, 0);
  int duplicate_acked = 0;
  recorder.AfterRecorded([&](bool ok) { duplicate_acked += ok; });
  // Failing: several tries, no callback, and the recorder says why.
  const bool failing = testing::WaitFor([&] { return stats_.errors.load() >= 3; }, 30s);
  const std::string why = recorder.failure();
  const uint64_t failing_gauge = stats_.failing.load();
  const int recorded_while_failing = recorded.load();
  full.Lift();
  ASSERT_TRUE(failing);
  EXPECT_EQ(recorded_while_failing, 1) << "a report that is not on disk must not be called back";
  EXPECT_EQ(failing_gauge, 1u);
  EXPECT_NE(why.find("cannot write the recording"), std::string::npos) << why;
  // Space is back: the held reports are written, in order, and called back once each.
  ASSERT_TRUE(testing::WaitFor([&] { return recorded.load() == 3; }, 30s));
  EXPECT_TRUE(testing::WaitFor([&] { return duplicate_acked == 1; }, 30s));
  EXPECT_EQ(stats_.failing.load(), 0u);
  EXPECT_EQ(recorder.failure(), "");
  recorder.Stop();
  EXPECT_EQ(unrecorded.load(), 0);
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
  const std::vector<std::string> expected{Report("n", 1).SerializeAsString(),
                                          Report("n", 2, 50'000).SerializeAsString(),
                                          Report("n", 3).SerializeAsString()};
  EXPECT_TRUE(AllReports() == expected) << "each report exactly once";
}

TEST_F(RecorderTest, StoppingWhileWritesFailCallsBackUnrecorded) {
  RecorderOptions o = Options(0ms);
  o.recording.compression = Compression::kNone;
  o.retry_interval = 50ms;
  auto recorder = std::make_unique<Recorder>(o, stats_);
  std::atomic<int> recorded{0};
  std::atomic<int> unrecorded{0};
  const auto append = [&](uint64_t seq, size_t padding) {
    const auto r = Report("n", seq, padding);
    recorder->Append(r.SerializeAsString(), KeyOf(r),
                     [&](bool ok) { ++(ok ? recorded : unrecorded); });
  };
  append(1, 0);
  ASSERT_TRUE(testing::WaitFor([&] { return recorded.load() == 1; }, 30s));
  FileSizeLimit full(fs::file_size(Segments().at(0)) + 100);
  ASSERT_TRUE(full.ok());
  append(2, 50'000);
  const bool failing = testing::WaitFor([&] { return stats_.errors.load() >= 1; }, 30s);
  recorder->Stop();
  full.Lift();
  ASSERT_TRUE(failing);
  EXPECT_EQ(recorded.load(), 1);
  EXPECT_EQ(unrecorded.load(), 1) << "its ack must not be sent: the agent sends it again";
}

// ---- seeding the exporter's dedup from recovered watermarks ----

TEST(NodeStoreSeedTest, SeededNodesDeduplicateButStayOutOfSnapshots) {
  NodeStore store(std::chrono::minutes(10));
  const Clock::time_point now(std::chrono::seconds(1'700'001'000));  // after the reports' times
  store.Seed("a", "inst-1", 5, now);
  EXPECT_EQ(store.size(), 0u);
  EXPECT_TRUE(store.Snapshot(now).empty()) << "a seeded node has no series";
  auto report = [&](uint64_t seq, const std::string& instance) {
    return std::make_shared<const v1::NodeReport>(Report("a", seq, 0, instance));
  };
  EXPECT_EQ(store.Apply(report(5, "inst-1"), now).outcome, ApplyOutcome::kDuplicate);
  EXPECT_EQ(store.Apply(report(3, "inst-1"), now).outcome, ApplyOutcome::kDuplicate);
  EXPECT_TRUE(store.Snapshot(now).empty());
  EXPECT_EQ(store.Apply(report(6, "inst-1"), now).outcome, ApplyOutcome::kApplied);
  EXPECT_EQ(store.size(), 1u);
  ASSERT_EQ(store.Snapshot(now).size(), 1u);
  // Seeding never overrides a node that already reported.
  store.Seed("a", "inst-1", 100, now);
  EXPECT_EQ(store.Apply(report(7, "inst-1"), now).outcome, ApplyOutcome::kApplied);
  // A new agent instance starts over.
  store.Seed("b", "inst-1", 5, now);
  EXPECT_EQ(store.size(), 1u);
  // Seeded nodes are forgotten like silent ones.
  EXPECT_EQ(store.Snapshot(now + std::chrono::minutes(11)).size(), 0u);
}

}  // namespace
}  // namespace recorder_test
}  // namespace accelmon::recording
