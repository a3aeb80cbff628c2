#include "daemon/clients/loadgen.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>
#include <grpcpp/client_context.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/security/credentials.h>
#include <sys/resource.h>

#include <array>
#include <atomic>
#include <bit>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <queue>
#include <random>
#include <thread>

#include "accelmon/v1/ingest.grpc.pb.h"
#include "collectors/sim.h"
#include "daemon/agent/agent.h"
#include "daemon/agent/ingest_stream.h"
#include "daemon/common/grpc_status.h"
#include "daemon/common/version.h"
#include "proto/time_format.h"

namespace accelmon {
namespace {

using SteadyClock = std::chrono::steady_clock;
using google::protobuf::internal::WireFormatLite;
using google::protobuf::io::CodedOutputStream;

// Simulated reports per node, sent in turn: enough that consecutive reports differ.
constexpr int kVariantsPerNode = 3;
// The sequence and timestamp fields take at most this many bytes.
constexpr size_t kMaxTailBytes = 48;

double CpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  const auto seconds = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6;
  };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

// A NodeReport's sequence and timestamp fields, encoded as protobuf would. Appended to a report
// serialised without them, the bytes parse as the whole report (fields may come in any order),
// so a send costs a few bytes of encoding instead of serialising every device again.
size_t EncodeSequenceAndTimestamp(uint64_t sequence, int64_t unix_ns, uint8_t* out) {
  std::array<uint8_t, 24> timestamp{};
  uint8_t* t = timestamp.data();
  t = CodedOutputStream::WriteTagToArray(
      WireFormatLite::MakeTag(google::protobuf::Timestamp::kSecondsFieldNumber,
                              WireFormatLite::WIRETYPE_VARINT),
      t);
  t = CodedOutputStream::WriteVarint64ToArray(static_cast<uint64_t>(unix_ns / 1'000'000'000), t);
  t = CodedOutputStream::WriteTagToArray(
      WireFormatLite::MakeTag(google::protobuf::Timestamp::kNanosFieldNumber,
                              WireFormatLite::WIRETYPE_VARINT),
      t);
  t = CodedOutputStream::WriteVarint32ToArray(static_cast<uint32_t>(unix_ns % 1'000'000'000), t);
  const auto timestamp_bytes = static_cast<uint32_t>(t - timestamp.data());

  uint8_t* p = out;
  p = CodedOutputStream::WriteTagToArray(
      WireFormatLite::MakeTag(v1::NodeReport::kSequenceFieldNumber,
                              WireFormatLite::WIRETYPE_VARINT),
      p);
  p = CodedOutputStream::WriteVarint64ToArray(sequence, p);
  p = CodedOutputStream::WriteTagToArray(
      WireFormatLite::MakeTag(v1::NodeReport::kTimestampFieldNumber,
                              WireFormatLite::WIRETYPE_LENGTH_DELIMITED),
      p);
  p = CodedOutputStream::WriteVarint32ToArray(timestamp_bytes, p);
  std::memcpy(p, timestamp.data(), timestamp_bytes);
  return static_cast<size_t>(p - out) + timestamp_bytes;
}

// Gives every device `links` links: extra NVLinks copied from its first link, or the last ones
// dropped.
void SetLinksPerDevice(v1::NodeReport& report, int links) {
  if (links <= 0) return;
  for (v1::DeviceTelemetry& device : *report.mutable_devices()) {
    while (device.links_size() > links) device.mutable_links()->RemoveLast();
    for (int i = device.links_size(); i < links && device.links_size() > 0; ++i) {
      v1::Link extra = device.links(0);
      extra.set_name("nvlink" + std::to_string(i));
      extra.set_index(static_cast<uint32_t>(i));
      *device.add_links() = std::move(extra);
    }
  }
}

}  // namespace

std::vector<std::string> LoadgenReportBodies(const std::string& node, const LoadgenOptions& options,
                                             int64_t start_ns) {
  collectors::SimCollector sim(
      collectors::SimOptions{.devices = options.devices,
                             .seed = collectors::SimSeedForNode(node),
                             .node = node,
                             // A job per node, as a fleet of many small jobs: one job across
                             // thousands of generated nodes would be a load no fleet has.
                             .job = "loadgen-" + node});
  // A new instance each run, as an agent restart has: its sequences start again at 1.
  const std::string instance = NewAgentInstanceId();
  const int64_t step_ns =
      std::chrono::nanoseconds(std::max(options.interval, std::chrono::milliseconds(1000))).count();
  std::vector<std::string> bodies;
  for (int k = 0; k < kVariantsPerNode; ++k) {
    v1::NodeReport report;
    const int64_t ns = start_ns + k * step_ns;
    *report.mutable_timestamp() = TimestampFromNanos(ns);
    sim.Collect(report);
    SetLinksPerDevice(report, options.links_per_device);
    report.set_node(node);
    report.set_agent_instance_id(instance);
    report.set_agent_version(kVersion);
    *report.mutable_interval() = DurationFromNanos(step_ns);
    report.clear_sequence();
    report.clear_timestamp();
    bodies.push_back(report.SerializeAsString());
  }
  return bodies;
}

namespace {

// Ack latencies, shared by every stream without a lock: exact below 64 µs, then 32 buckets per
// power of two (at most 3% wide).
class LatencyHistogram {
 public:
  void Record(SteadyClock::duration latency) {
    const auto us = static_cast<uint64_t>(std::max<int64_t>(
        0, std::chrono::duration_cast<std::chrono::microseconds>(latency).count()));
    buckets_[Index(us)].fetch_add(1, std::memory_order_relaxed);
    count_.fetch_add(1, std::memory_order_relaxed);
    uint64_t max = max_us_.load(std::memory_order_relaxed);
    while (us > max && !max_us_.compare_exchange_weak(max, us, std::memory_order_relaxed)) {
    }
  }

  LatencySummary Summarise() const {
    LatencySummary s;
    s.count = count_.load();
    s.max_ms = static_cast<double>(max_us_.load()) / 1000;
    // A bucket's middle may lie above the largest latency it holds.
    s.p50_ms = std::min(s.max_ms, Quantile(0.50, s.count) / 1000);
    s.p90_ms = std::min(s.max_ms, Quantile(0.90, s.count) / 1000);
    s.p99_ms = std::min(s.max_ms, Quantile(0.99, s.count) / 1000);
    return s;
  }

 private:
  static constexpr size_t kLinear = 64;
  static constexpr int kSubBucketBits = 5;
  static constexpr size_t kSubBuckets = size_t{1} << kSubBucketBits;
  static constexpr size_t kBuckets = kLinear + (64 - 6) * kSubBuckets;

  static size_t Index(uint64_t us) {
    if (us < kLinear) return us;
    const int exponent = std::bit_width(us) - 1;  // 6 or more
    const uint64_t mantissa = (us >> (exponent - kSubBucketBits)) & (kSubBuckets - 1);
    return kLinear + static_cast<size_t>(exponent - 6) * kSubBuckets + mantissa;
  }

  // The middle of bucket `i`, in µs.
  static double Midpoint(size_t i) {
    if (i < kLinear) return static_cast<double>(i);
    const int exponent = static_cast<int>((i - kLinear) / kSubBuckets) + 6;
    const double width = std::ldexp(1.0, exponent - kSubBucketBits);
    const double low =
        std::ldexp(1.0, exponent) + static_cast<double>((i - kLinear) % kSubBuckets) * width;
    return low + width / 2;
  }

  double Quantile(double q, uint64_t count) const {
    if (count == 0) return 0;
    const auto rank = static_cast<uint64_t>(std::ceil(q * static_cast<double>(count)));
    uint64_t seen = 0;
    for (size_t i = 0; i < kBuckets; ++i) {
      seen += buckets_[i].load(std::memory_order_relaxed);
      if (seen >= rank) return Midpoint(i);
    }
    return static_cast<double>(max_us_.load());
  }

  std::array<std::atomic<uint64_t>, kBuckets> buckets_{};
  std::atomic<uint64_t> count_{0};
  std::atomic<uint64_t> max_us_{0};
};

// What every stream shares.
struct Shared {
  LatencyHistogram latency;
  SteadyClock::time_point window_end;
  std::mutex mu;
  std::condition_variable cv;
  size_t streams_done = 0;

  void StreamDone() {
    std::lock_guard lock(mu);
    ++streams_done;
    cv.notify_all();
  }
};

// One simulated agent's stream (an IngestStream, which matches each ack to the oldest
// unacknowledged report). The scheduling thread calls Due() / Fill() / Close(); the reactions
// run on gRPC's threads.
class LoadStream final : public IngestStreamObserver {
 public:
  LoadStream(Shared& shared, const std::vector<std::string>& bodies, bool saturate,
             size_t max_in_flight)
      : shared_(shared), bodies_(bodies), saturate_(saturate), max_in_flight_(max_in_flight) {}

  void Start(grpc::GenericStub& stub) {
    stream_.emplace(stub, this, IngestStream::Options{.max_unacknowledged = max_in_flight_});
  }

  // At an interval: the next report is due now.
  void Due() {
    if (stream_->TrySendNumbered() == IngestStream::SendResult::kFull) ++skipped_;
  }

  // Saturation: tops the stream up to `max_in_flight` unacknowledged reports.
  void Fill() {
    if (!saturate_) return;
    while (stream_->TrySendNumbered() == IngestStream::SendResult::kQueued) {
    }
  }

  // No more reports: half-closes once the queued ones are written. The server ends the stream
  // after its last ack.
  void Close() { stream_->Close(); }

  void Cancel() { stream_->Cancel(); }

  // After OnDone().
  IngestAckCounts counts() const { return stream_->counts(); }
  uint64_t skipped() const { return skipped_; }
  uint64_t acked_in_window() const { return acked_in_window_.load(); }
  grpc::Status status() { return stream_->Wait(); }
  uint64_t unacknowledged() const { return stream_->unacknowledged(); }

  void OnAck(const v1::Ack& /*ack*/, const IngestSent& report) override {
    const auto now = SteadyClock::now();
    if (report.sent_at != SteadyClock::time_point{}) shared_.latency.Record(now - report.sent_at);
    if (now <= shared_.window_end) acked_in_window_.fetch_add(1, std::memory_order_relaxed);
    Fill();
  }

  // Stamped now, as it goes out: the body serialised ahead of time plus sequence and timestamp.
  grpc::ByteBuffer EncodeAtWrite(uint64_t sequence) override {
    const std::string& body = bodies_[sequence % bodies_.size()];
    std::array<uint8_t, kMaxTailBytes> tail{};
    const size_t tail_bytes =
        EncodeSequenceAndTimestamp(sequence, WallClockNowNanos(), tail.data());
    // The body outlives the stream: no copy of it.
    const std::array<grpc::Slice, 2> slices{
        grpc::Slice(body.data(), body.size(), grpc::Slice::STATIC_SLICE),
        grpc::Slice(tail.data(), tail_bytes)};
    return grpc::ByteBuffer(slices.data(), slices.size());
  }

  void OnDone(const grpc::Status& /*status*/) override { shared_.StreamDone(); }

 private:
  Shared& shared_;
  const std::vector<std::string>& bodies_;
  const bool saturate_;
  const size_t max_in_flight_;
  uint64_t skipped_ = 0;  // the scheduling thread's
  std::atomic<uint64_t> acked_in_window_{0};
  std::optional<IngestStream> stream_;  // last: ended before the rest goes
};

std::string NodeName(const std::string& prefix, int index) {
  char digits[16];
  std::snprintf(digits, sizeof digits, "%05d", index);
  return prefix + digits;
}

// Fires Due() on every stream once per interval, the fleet spread evenly over the interval.
void RunAtInterval(const LoadgenOptions& options, std::vector<std::unique_ptr<LoadStream>>& streams,
                   SteadyClock::time_point start, SteadyClock::time_point end) {
  using Entry = std::pair<SteadyClock::time_point, size_t>;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> schedule;
  std::mt19937_64 rng(std::random_device{}());
  const auto interval = std::chrono::duration_cast<SteadyClock::duration>(options.interval);
  std::uniform_int_distribution<int64_t> offset(0, interval.count() - 1);
  for (size_t i = 0; i < streams.size(); ++i) {
    schedule.emplace(start + SteadyClock::duration(offset(rng)), i);
  }
  while (!schedule.empty() && schedule.top().first < end) {
    std::this_thread::sleep_until(schedule.top().first);
    // Everything due by now, in one wake-up.
    const auto now = SteadyClock::now();
    while (!schedule.empty() && schedule.top().first <= now && schedule.top().first < end) {
      const auto [due, index] = schedule.top();
      schedule.pop();
      streams[index]->Due();
      schedule.emplace(due + interval, index);
    }
  }
  std::this_thread::sleep_until(end);
}

}  // namespace

LoadgenResult RunLoadgen(const LoadgenOptions& options) {
  LoadgenResult result;
  result.nodes = options.nodes;
  const bool saturate = options.interval.count() == 0;

  std::vector<std::vector<std::string>> bodies;
  bodies.reserve(static_cast<size_t>(options.nodes));
  const int64_t start_ns = WallClockNowNanos();
  for (int i = 0; i < options.nodes; ++i) {
    bodies.push_back(LoadgenReportBodies(NodeName(options.node_prefix, i), options, start_ns));
  }
  if (!bodies.empty()) {
    std::array<uint8_t, kMaxTailBytes> tail{};
    result.report_bytes =
        bodies[0][0].size() + EncodeSequenceAndTimestamp(1, start_ns, tail.data());
    v1::NodeReport first;
    first.ParseFromString(bodies[0][0]);
    result.links_per_device = first.devices_size() > 0 ? first.devices(0).links_size() : 0;
  }

  // Each channel its own TCP connection: gRPC would otherwise share one between equal channels.
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  std::vector<std::unique_ptr<grpc::GenericStub>> stubs;
  const int channels = std::max(1, std::min(options.channels, options.nodes));
  for (int c = 0; c < channels; ++c) {
    auto channel = grpc::CreateCustomChannel(options.exporter_address,
                                             grpc::InsecureChannelCredentials(), args);
    if (!channel->WaitForConnected(std::chrono::system_clock::now() + options.connect_timeout)) {
      result.errors.push_back("cannot connect to " + options.exporter_address + " within " +
                              std::to_string(options.connect_timeout.count()) + "ms");
      return result;
    }
    stubs.push_back(std::make_unique<grpc::GenericStub>(std::move(channel)));
  }

  Shared shared;
  const auto start = SteadyClock::now();
  const auto end = start + options.duration;
  shared.window_end = end;
  const double cpu_before = CpuSeconds();

  std::vector<std::unique_ptr<LoadStream>> streams;  // deleted before the stubs
  streams.reserve(bodies.size());
  for (size_t i = 0; i < bodies.size(); ++i) {
    streams.push_back(
        std::make_unique<LoadStream>(shared, bodies[i], saturate, options.max_in_flight));
    streams.back()->Start(*stubs[i % stubs.size()]);
  }
  if (saturate) {
    for (auto& s : streams) s->Fill();
    std::this_thread::sleep_until(end);
  } else {
    RunAtInterval(options, streams, start, end);
  }
  result.cpu_seconds = CpuSeconds() - cpu_before;
  result.window_seconds = std::chrono::duration<double>(options.duration).count();

  // Wait for the acks still due; streams that do not end in time are cancelled.
  for (auto& s : streams) s->Close();
  const auto all_done = [&] { return shared.streams_done == streams.size(); };
  {
    std::unique_lock lock(shared.mu);
    if (!shared.cv.wait_for(lock, options.drain_timeout, all_done)) {
      lock.unlock();
      result.errors.push_back("streams still open after the drain timeout were cancelled");
      for (auto& s : streams) s->Cancel();
      lock.lock();
      shared.cv.wait(lock, all_done);
    }
  }

  std::map<std::string, size_t> failures;  // one line per distinct error, not per stream
  uint64_t unacknowledged = 0;
  for (const auto& s : streams) {
    const IngestAckCounts c = s->counts();
    result.sent += c.sent;
    result.skipped += s->skipped();
    result.applied += c.applied;
    result.duplicate += c.duplicate;
    result.rejected += c.rejected;
    result.acked_in_window += s->acked_in_window();
    for (const auto& [reason, n] : c.rejected_reasons) result.rejected_reasons[reason] += n;
    unacknowledged += s->unacknowledged();
    if (const grpc::Status status = s->status(); !status.ok()) ++failures[DescribeStatus(status)];
  }
  for (const auto& [text, n] : failures) {
    result.errors.push_back(std::to_string(n) + " stream(s) ended with " + text);
  }
  if (unacknowledged > 0) {
    result.errors.push_back(std::to_string(unacknowledged) + " report(s) unacknowledged");
  }
  result.reports_per_second = static_cast<double>(result.acked_in_window) / result.window_seconds;
  result.device_samples_per_second = result.reports_per_second * options.devices;
  result.ack_latency = shared.latency.Summarise();
  return result;
}

std::string FormatLoadgenResult(const LoadgenOptions& options, const LoadgenResult& r) {
  std::string mode =
      options.interval.count() == 0
          ? "saturation (" + std::to_string(options.max_in_flight) + " in flight per stream)"
          : "every " + std::to_string(options.interval.count()) + "ms";
  std::string out;
  char line[512];
  std::snprintf(line, sizeof line,
                "loadgen: %d nodes x %d devices x %d links, %zu-byte reports, %s, %d channel(s) "
                "to %s, %.1f s\n",
                r.nodes, options.devices, r.links_per_device, r.report_bytes, mode.c_str(),
                std::max(1, std::min(options.channels, options.nodes)),
                options.exporter_address.c_str(), r.window_seconds);
  out += line;
  std::snprintf(
      line, sizeof line,
      "reports: %llu sent, %llu acknowledged: %llu applied, %llu duplicate, %llu "
      "rejected; %llu skipped\n",
      static_cast<unsigned long long>(r.sent), static_cast<unsigned long long>(r.acknowledged()),
      static_cast<unsigned long long>(r.applied), static_cast<unsigned long long>(r.duplicate),
      static_cast<unsigned long long>(r.rejected), static_cast<unsigned long long>(r.skipped));
  out += line;
  for (const auto& [reason, n] : r.rejected_reasons) {
    out += "rejected: " + reason + " " + std::to_string(n) + "\n";
  }
  std::snprintf(line, sizeof line, "rate: %.0f reports/s, %.0f device-samples/s\n",
                r.reports_per_second, r.device_samples_per_second);
  out += line;
  std::snprintf(line, sizeof line,
                "ack latency: p50 %.3f ms, p90 %.3f ms, p99 %.3f ms, max %.3f ms (%llu acks)\n",
                r.ack_latency.p50_ms, r.ack_latency.p90_ms, r.ack_latency.p99_ms,
                r.ack_latency.max_ms, static_cast<unsigned long long>(r.ack_latency.count));
  out += line;
  std::snprintf(line, sizeof line, "loadgen cpu: %.3f cores (%.2f s)\n",
                r.window_seconds > 0 ? r.cpu_seconds / r.window_seconds : 0.0, r.cpu_seconds);
  out += line;
  for (const auto& e : r.errors) out += "error: " + e + "\n";
  return out;
}

}  // namespace accelmon
