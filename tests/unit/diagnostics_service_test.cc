// The diagnostics service's hand-off: ingest queues applied reports for the worker and never
// waits on it; a full queue drops (and counts) reports; scrapes read the worker's snapshot while
// the worker is busy; Watch's initial state comes from the node store without repeating the
// reports still queued.
#include "daemon/exporter/diagnostics_service.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>

#include "daemon/exporter/metrics_renderer.h"
#include "daemon/exporter/text_exposition.h"
#include "support/temp_dir.h"
#include "support/wait.h"

namespace accelmon {
namespace diagnostics_service_test {
namespace {

using namespace std::chrono_literals;
using testing::WaitFor;

DiagnosticsOptions WithQueue(size_t capacity) {
  DiagnosticsOptions options;
  options.queue_capacity = capacity;
  return options;
}

std::shared_ptr<const v1::NodeReport> Report(const std::string& node, uint64_t sequence) {
  auto r = std::make_shared<v1::NodeReport>();
  r->set_node(node);
  r->set_agent_instance_id("service-test");
  r->set_sequence(sequence);
  const auto now_s =
      std::chrono::duration_cast<std::chrono::seconds>(Clock::now().time_since_epoch()).count();
  r->mutable_timestamp()->set_seconds(now_s - 1000 + static_cast<int64_t>(sequence));
  return r;
}

// Applies `report` to the store and hands it to diagnostics, as ingest does; true when queued.
bool Ingest(NodeStore& store, DiagnosticsService& diagnostics,
            std::shared_ptr<const v1::NodeReport> report) {
  const ApplyResult result = store.Apply(report, Clock::now());
  EXPECT_EQ(result.outcome, ApplyOutcome::kApplied) << result.reason;
  return diagnostics.OnReport(std::move(report), result.index) != 0;
}

// Keeps what it is pushed: "R<seq>" for a report, "i" appended for the initial state.
class RecordingWatcher final : public Watcher {
 public:
  RecordingWatcher() : Watcher({}, /*reports=*/true) {}
  void Push(WatchItem item, bool initial) override {
    if (!item.report) return;
    std::lock_guard lock(mu_);
    events_.push_back("R" + std::to_string(item.report->sequence()) + (initial ? "i" : ""));
  }
  void Flush() override {}
  std::vector<std::string> events() {
    std::lock_guard lock(mu_);
    return events_;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> events_;
};

// Stands in for rules that take long: the first report pushed to it holds the worker until
// released.
class BlockingWatcher final : public Watcher {
 public:
  BlockingWatcher() : Watcher({}, /*reports=*/true) {}
  void Push(WatchItem, bool initial) override {
    if (initial || entered_.exchange(true)) return;
    release_.get_future().wait();
  }
  void Flush() override {}
  bool entered() const { return entered_; }
  void Release() { release_.set_value(); }

 private:
  std::atomic<bool> entered_{false};
  std::promise<void> release_;
};

// A report with an XID on device 0, which opens an xid_error finding.
std::shared_ptr<const v1::NodeReport> XidReport(const std::string& node, uint64_t sequence) {
  auto r = std::make_shared<v1::NodeReport>(*Report(node, sequence));
  v1::DeviceTelemetry* d = r->add_devices();
  d->mutable_identity()->set_index(0);
  d->mutable_identity()->set_uuid("GPU-service-test-0");
  v1::Event* e = r->add_events();
  e->set_kind(v1::EVENT_KIND_XID);
  e->set_code(79);
  e->set_device_index(0);
  return r;
}

// What the state file holds now: the rules of its findings.
std::vector<std::string> SavedRules(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  v1::DiagnosticsState state;
  std::vector<std::string> rules;
  if (!in || !state.ParseFromIstream(&in)) return rules;
  for (const v1::SavedFinding& s : state.findings()) rules.push_back(s.finding().rule());
  return rules;
}

// Findings are durable before their report is acknowledged: a report's ticket is settled (and
// ingest acks it) only once the state file holds what the report opened.
TEST(DiagnosticsService, AReportIsSettledOnlyOnceTheFindingItOpenedIsSaved) {
  const std::string dir = testing::MakeTempDir("diagnostics-saved");
  NodeStore store(10min);
  DiagnosticsOptions options;
  options.state_file = dir + "/findings.state";
  DiagnosticsService diagnostics(options, store);
  ASSERT_TRUE(diagnostics.saves_findings());
  const auto report = XidReport("n1", 1);
  const uint64_t ticket = diagnostics.OnReport(report, store.Apply(report, Clock::now()).index);
  ASSERT_NE(ticket, 0u);
  std::promise<std::pair<bool, std::vector<std::string>>> seen;
  // Not started: nothing is settled yet, so the callback waits.
  ASSERT_EQ(diagnostics.CallWhenSettled(ticket,
                                        [&](bool saved) {
                                          seen.set_value({saved, SavedRules(options.state_file)});
                                        }),
            DiagnosticsService::Settle::kWaiting);
  diagnostics.Start();
  auto future = seen.get_future();
  ASSERT_EQ(future.wait_for(10s), std::future_status::ready);
  const auto [saved, rules] = future.get();
  EXPECT_TRUE(saved);
  EXPECT_EQ(rules, std::vector<std::string>{"xid_error"}) << "settled before the save";
  EXPECT_GE(diagnostics.settled(), ticket);
  EXPECT_EQ(
      diagnostics.CallWhenSettled(ticket, [](bool) { FAIL() << "called for a settled ticket"; }),
      DiagnosticsService::Settle::kSettled);
  std::filesystem::remove_all(dir);
}

// A state file that cannot be written holds every later ticket unsettled (and so the acks) until
// a save works; at Stop the callbacks still waiting hear that their findings were not saved.
TEST(DiagnosticsService, TicketsWaitWhileTheStateCannotBeSavedAndHearFalseAtStop) {
  const std::string dir = testing::MakeTempDir("diagnostics-unsaved");
  NodeStore store(10min);
  DiagnosticsOptions options;
  options.state_file = dir + "/missing/findings.state";  // its directory does not exist yet
  std::atomic<int> saved{0};
  std::atomic<int> unsaved{0};
  const auto count = [&](bool ok) { ++(ok ? saved : unsaved); };
  DiagnosticsService diagnostics(options, store);
  diagnostics.Start();
  const auto first = XidReport("n1", 1);
  const uint64_t t1 = diagnostics.OnReport(first, store.Apply(first, Clock::now()).index);
  // processed() counts a report once its batch was saved, or found unsaveable.
  ASSERT_TRUE(WaitFor([&] { return diagnostics.processed() == 1; }, 10s));
  EXPECT_LT(diagnostics.settled(), t1) << "settled with its finding unsaved";
  ASSERT_EQ(diagnostics.CallWhenSettled(t1, count), DiagnosticsService::Settle::kWaiting);
  // A later report that changes nothing waits behind the unsaved change too.
  const auto second = Report("n1", 2);
  const uint64_t t2 = diagnostics.OnReport(second, store.Apply(second, Clock::now()).index);
  ASSERT_TRUE(WaitFor([&] { return diagnostics.processed() == 2; }, 10s));
  EXPECT_LT(diagnostics.settled(), t1);
  // The directory appears: the next try (within a second) saves, and both are settled.
  std::filesystem::create_directory(dir + "/missing");
  ASSERT_TRUE(WaitFor([&] { return saved == 1 && diagnostics.settled() >= t2; }, 10s));
  EXPECT_EQ(SavedRules(options.state_file), std::vector<std::string>{"xid_error"});

  std::filesystem::remove_all(dir + "/missing");
  const auto third = XidReport("n2", 1);
  const uint64_t t3 = diagnostics.OnReport(third, store.Apply(third, Clock::now()).index);
  ASSERT_TRUE(WaitFor([&] { return diagnostics.processed() == 3; }, 10s));
  ASSERT_EQ(diagnostics.CallWhenSettled(t3, count), DiagnosticsService::Settle::kWaiting);
  diagnostics.Stop();
  EXPECT_EQ(saved, 1);
  EXPECT_EQ(unsaved, 1) << "Stop must tell the waiting callback its finding was not saved";
  EXPECT_EQ(diagnostics.CallWhenSettled(t3, count), DiagnosticsService::Settle::kNeverSaved);
  std::filesystem::remove_all(dir);
}

TEST(DiagnosticsService, FullQueueDropsReportsAndCountsThem) {
  NodeStore store(10min);
  DiagnosticsService diagnostics(WithQueue(4), store);
  // Not started yet: the queue fills and stays full.
  int queued = 0;
  for (uint64_t seq = 1; seq <= 10; ++seq) queued += Ingest(store, diagnostics, Report("n1", seq));
  EXPECT_EQ(queued, 4);
  EXPECT_EQ(diagnostics.dropped(), 6u);
  EXPECT_EQ(diagnostics.Metrics().dropped, 6u);
  EXPECT_EQ(diagnostics.Metrics().reports, 0u);
  EXPECT_EQ(store.Snapshot(Clock::now()).at(0).report->sequence(), 10u)
      << "the store applied every report; only diagnostics dropped some";

  diagnostics.Start();
  ASSERT_TRUE(WaitFor([&] { return diagnostics.processed() == 4; }, 10s));
  const DiagnosticsMetrics m = diagnostics.Metrics();
  EXPECT_EQ(m.reports, 4u);
  EXPECT_EQ(m.dropped, 6u);

  TextExpositionSink sink;
  EmitDiagnostics(m, sink);
  std::string text;
  sink.AppendTo(text);
  EXPECT_NE(text.find("# TYPE accelmon_exporter_diagnosis_dropped_reports_total counter\n"
                      "accelmon_exporter_diagnosis_dropped_reports_total 6\n"),
            std::string::npos)
      << text;
}

TEST(DiagnosticsService, IngestAndScrapesGoOnWhileTheWorkerIsStuck) {
  NodeStore store(10min);
  DiagnosticsService diagnostics(WithQueue(8), store);
  diagnostics.Start();
  auto stuck = std::make_shared<BlockingWatcher>();
  diagnostics.Subscribe(stuck, /*initial_state=*/false);

  ASSERT_TRUE(Ingest(store, diagnostics, Report("n1", 1)));
  ASSERT_TRUE(WaitFor([&] { return stuck->entered(); }, 10s));
  // The worker holds its lock inside the watcher: 8 more fit in the queue, 5 are dropped.
  int queued = 0;
  for (uint64_t seq = 2; seq <= 14; ++seq) queued += Ingest(store, diagnostics, Report("n1", seq));
  EXPECT_EQ(queued, 8);
  EXPECT_EQ(diagnostics.dropped(), 5u);

  auto scrape = std::async(std::launch::async, [&] { return diagnostics.Metrics(); });
  const bool answered =
      WaitFor([&] { return scrape.wait_for(0s) == std::future_status::ready; }, 10s);
  stuck->Release();
  EXPECT_TRUE(answered) << "a scrape waited for the worker";
  EXPECT_EQ(scrape.get().dropped, 5u);

  ASSERT_TRUE(WaitFor([&] { return diagnostics.processed() == 9; }, 10s));
  EXPECT_EQ(diagnostics.Metrics().reports, 9u);
  diagnostics.Unsubscribe(stuck.get());
}

TEST(DiagnosticsService, WatchInitialStateComesFromTheStoreAndQueuedReportsAreNotRepeated) {
  NodeStore store(10min);
  DiagnosticsService diagnostics(DiagnosticsOptions{}, store);
  ASSERT_TRUE(Ingest(store, diagnostics, Report("n1", 1)));
  ASSERT_TRUE(Ingest(store, diagnostics, Report("n1", 2)));
  ASSERT_TRUE(Ingest(store, diagnostics, Report("n2", 1)));
  // The store has n1's report 2 and n2's report 1; all three still wait for the worker.
  auto watcher = std::make_shared<RecordingWatcher>();
  diagnostics.Subscribe(watcher, /*initial_state=*/true);
  EXPECT_EQ(watcher->events(), (std::vector<std::string>{"R2i", "R1i"}));

  diagnostics.Start();
  ASSERT_TRUE(WaitFor([&] { return diagnostics.processed() == 3; }, 10s));
  ASSERT_TRUE(Ingest(store, diagnostics, Report("n1", 3)));
  ASSERT_TRUE(WaitFor([&] { return diagnostics.processed() == 4; }, 10s));
  EXPECT_EQ(watcher->events(), (std::vector<std::string>{"R2i", "R1i", "R3"}));
  EXPECT_EQ(diagnostics.Metrics().reports, 4u) << "the rules saw every report";
  diagnostics.Unsubscribe(watcher.get());
}

}  // namespace
}  // namespace diagnostics_service_test
}  // namespace accelmon
