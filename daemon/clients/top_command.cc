#include "daemon/clients/top_command.h"

#include <fmt/format.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "accelmon/v1/diagnostics.grpc.pb.h"
#include "daemon/agent/agent_command.h"
#include "daemon/clients/top_screen.h"
#include "daemon/clients/top_view.h"
#include "daemon/common/cli_validators.h"
#include "daemon/common/empty_values.h"
#include "daemon/common/exit_codes.h"
#include "daemon/common/flags.h"
#include "daemon/common/tls.h"
#include "daemon/common/tls_flags.h"
#include "daemon/common/version.h"
#include "proto/time_format.h"

namespace accelmon {
namespace {

// What the command line said; filled in by CLI11 while parsing.
struct TopCommand {
  std::vector<std::string> exporter_addresses{"127.0.0.1:9478"};
  GrpcClientTls tls;
  std::string refresh = "2s";
  bool once = false;
  std::string sort = "node";
  std::string filter;
  bool local = false;
  CollectorFlags collectors;  // --local: the subset of the agent's flags added below
};

// Nodes' reports of a large fleet in one GetNodes answer: well past gRPC's 4 MiB default.
constexpr int kMaxAnswerBytes = 512 * 1024 * 1024;

std::string CodeName(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::PERMISSION_DENIED:
      return "permission denied";
    case grpc::StatusCode::UNAUTHENTICATED:
      return "unauthenticated";
    case grpc::StatusCode::UNIMPLEMENTED:
      return "no Query API there";
    default:
      return fmt::format("gRPC code {}", static_cast<int>(code));
  }
}

// One exporter's Query API: GetSummary, one call per fetch (an exporter older than it: GetNodes
// and GetFindings).
class ExporterSource {
 public:
  ExporterSource(std::string address, const GrpcClientTls& tls) : address_(std::move(address)) {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(kMaxAnswerBytes);
    auto credentials = MakeChannelCredentials(tls, args);
    stub_ = v1::Query::NewStub(grpc::CreateCustomChannel(address_, credentials, args));
  }

  top::Snapshot Fetch(std::chrono::milliseconds timeout) {
    top::Snapshot snapshot;
    if (summary_) {
      v1::GetSummaryResponse summary;
      const grpc::Status status = Call(timeout, [&](grpc::ClientContext* context) {
        return stub_->GetSummary(context, v1::GetSummaryRequest(), &summary);
      });
      if (status.ok()) {
        snapshot.reports.assign(std::make_move_iterator(summary.mutable_nodes()->begin()),
                                std::make_move_iterator(summary.mutable_nodes()->end()));
        snapshot.findings.assign(std::make_move_iterator(summary.mutable_findings()->begin()),
                                 std::make_move_iterator(summary.mutable_findings()->end()));
        return snapshot;
      }
      if (status.error_code() != grpc::StatusCode::UNIMPLEMENTED) {
        snapshot.error = Describe(status);
        return snapshot;
      }
      summary_ = false;  // an older exporter: whole reports from now on
    }
    v1::GetNodesResponse nodes;
    grpc::Status status = Call(timeout, [&](grpc::ClientContext* context) {
      return stub_->GetNodes(context, v1::GetNodesRequest(), &nodes);
    });
    v1::GetFindingsResponse findings;
    if (status.ok()) {
      status = Call(timeout, [&](grpc::ClientContext* context) {
        return stub_->GetFindings(context, v1::GetFindingsRequest(), &findings);
      });
    }
    if (!status.ok()) {
      snapshot.error = Describe(status);
      return snapshot;
    }
    snapshot.reports.assign(std::make_move_iterator(nodes.mutable_reports()->begin()),
                            std::make_move_iterator(nodes.mutable_reports()->end()));
    snapshot.findings.assign(std::make_move_iterator(findings.mutable_findings()->begin()),
                             std::make_move_iterator(findings.mutable_findings()->end()));
    return snapshot;
  }

  // Ends a call in flight, and every later one, at once.
  void Cancel() {
    std::lock_guard lock(mu_);
    cancelled_ = true;
    if (current_ != nullptr) current_->TryCancel();
  }

 private:
  template <typename F>
  grpc::Status Call(std::chrono::milliseconds timeout, F&& call) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + timeout);
    {
      std::lock_guard lock(mu_);
      if (cancelled_) return grpc::Status(grpc::StatusCode::CANCELLED, "stopping");
      current_ = &context;
    }
    grpc::Status status = call(&context);
    std::lock_guard lock(mu_);
    current_ = nullptr;
    return status;
  }

  std::string Describe(const grpc::Status& status) const {
    if (status.error_code() == grpc::StatusCode::UNAVAILABLE ||
        status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
      return fmt::format("exporter {} unreachable: {}", address_, status.error_message());
    }
    return fmt::format("exporter {} refused the query ({}): {}", address_,
                       CodeName(status.error_code()), status.error_message());
  }

  const std::string address_;
  std::unique_ptr<v1::Query::Stub> stub_;
  bool summary_ = true;  // the exporter answers GetSummary (until it says it does not)
  std::mutex mu_;
  bool cancelled_ = false;
  grpc::ClientContext* current_ = nullptr;
};

// Several exporters (a fleet spread over them by rendezvous hashing) as one: fetched at once, a
// node on two of them (it moved, and the one it left still serves its last report) shown from
// the one with its newest report, with that exporter's findings for it.
class FleetSource {
 public:
  FleetSource(const std::vector<std::string>& addresses, const GrpcClientTls& tls) {
    for (const std::string& address : addresses) {
      exporters_.push_back(std::make_unique<ExporterSource>(address, tls));
    }
  }

  top::Snapshot Fetch(std::chrono::milliseconds timeout) {
    std::vector<top::Snapshot> parts(exporters_.size());
    if (exporters_.size() == 1) return exporters_.front()->Fetch(timeout);
    {
      std::vector<std::jthread> calls;
      for (size_t i = 0; i < exporters_.size(); ++i) {
        calls.emplace_back(
            [this, &parts, i, timeout] { parts[i] = exporters_[i]->Fetch(timeout); });
      }
    }
    // Per node, the exporter with its newest report.
    std::map<std::string, std::pair<size_t, int64_t>> home;
    for (size_t i = 0; i < parts.size(); ++i) {
      for (const v1::NodeReport& r : parts[i].reports) {
        const int64_t t = ToNanos(r.timestamp());
        auto [it, inserted] = home.try_emplace(r.node(), i, t);
        if (!inserted && t > it->second.second) it->second = {i, t};
      }
    }
    top::Snapshot merged;
    size_t failed = 0;
    for (size_t i = 0; i < parts.size(); ++i) {
      top::Snapshot& part = parts[i];
      if (!part.error.empty()) {
        ++failed;
        merged.error += (merged.error.empty() ? "" : "; ") + part.error;
        continue;
      }
      for (v1::NodeReport& r : part.reports) {
        if (home.at(r.node()).first == i) merged.reports.push_back(std::move(r));
      }
      for (v1::Finding& f : part.findings) {
        const auto it = home.find(f.node());
        if (it == home.end() || it->second.first == i) merged.findings.push_back(std::move(f));
      }
    }
    merged.partial = !merged.error.empty() && failed < parts.size();
    return merged;
  }

  void Cancel() {
    for (auto& e : exporters_) e->Cancel();
  }

 private:
  std::vector<std::unique_ptr<ExporterSource>> exporters_;
};

// --local: the agent's collectors on this host, one collection per fetch, no exporter (and so
// no findings: the diagnostics rules run in the exporter).
class LocalSource {
 public:
  LocalSource(const CollectorFlags& flags, std::shared_ptr<const collectors::Scenario> scenario,
              std::chrono::milliseconds interval)
      : node_(flags.node_name),
        interval_(interval),
        instance_(NewAgentInstanceId()),
        collectors_(MakeCollectors(flags, nullptr, std::move(scenario))) {}

  top::Snapshot Fetch() {
    v1::NodeReport report;
    report.set_node(node_);
    report.set_agent_instance_id(instance_);
    report.set_sequence(++sequence_);
    report.set_agent_version(kVersion);
    *report.mutable_timestamp() = TimestampFromTimePoint(std::chrono::system_clock::now());
    *report.mutable_interval() = DurationFromNanos(std::chrono::nanoseconds(interval_).count());
    collectors_.CollectAll(report);
    top::Snapshot snapshot;
    snapshot.reports.push_back(std::move(report));
    return snapshot;
  }

 private:
  const std::string node_;
  const std::chrono::milliseconds interval_;
  const std::string instance_;
  collectors::CollectorSet collectors_;
  uint64_t sequence_ = 0;
};

void AddLocalFlags(CLI::App& cmd, CollectorFlags& f) {
  const std::string group = "Local (--local)";
  cmd.add_option("--node.name", f.node_name, "With --local: the name shown for this host")
      ->check(kNotEmpty)
      ->default_str("hostname: " + f.node_name)
      ->group(group);
  cmd.add_option("--path.procfs", f.procfs, "With --local: procfs mount point")
      ->check(cli::kDirectory)
      ->capture_default_str()
      ->group(group);
  cmd.add_option("--path.sysfs", f.sysfs, "With --local: sysfs mount point")
      ->check(cli::kDirectory)
      ->capture_default_str()
      ->group(group);
  cmd.add_option("--sim", f.sim_devices,
                 "With --local: add N simulated accelerators (demos, tests)")
      ->check(CLI::Range(0, 64))
      ->capture_default_str()
      ->group(group);
  cmd.add_option("--sim.seed", f.sim_seed,
                 "With --local: seed of the simulated devices (default: derived from the node "
                 "name)")
      ->group(group);
  cmd.add_option("--sim.scenario", f.sim_scenario,
                 "With --local: YAML file of faults to inject into the simulated devices")
      ->group(group);
  cmd.add_option("--nvml.library", f.nvml_library, "With --local: NVIDIA NVML library to load")
      ->check(kNotEmpty)
      ->capture_default_str()
      ->group(group);
  cmd.add_option("--dcmi.library", f.dcmi_library,
                 "With --local: Huawei Ascend DCMI library to load")
      ->check(kNotEmpty)
      ->capture_default_str()
      ->group(group);
  cmd.add_option("--collect.device-timeout", f.device_timeout,
                 "With --local: give up on a device collector's tick after this long")
      ->check(cli::kDuration)
      ->capture_default_str()
      ->group(group);
}

int RunTop(TopCommand& c) {
  if (auto error = CheckClientTls(c.tls)) {
    std::fprintf(stderr, "accelmon: %s\n", error->c_str());
    return kExitUsage;
  }
  const std::chrono::milliseconds refresh = *ParseDuration(c.refresh);
  top::ViewOptions view{.sort = top::ParseSortKey(c.sort).value_or(top::SortKey::kNode),
                        .filter = c.filter};

  std::unique_ptr<FleetSource> exporter;
  std::unique_ptr<LocalSource> local;
  std::string source;
  if (c.local) {
    // No push socket and no sd_notify: an agent may be running beside it.
    c.collectors.push.socket.clear();
    std::shared_ptr<const collectors::Scenario> scenario;
    if (!LoadSimScenario(c.collectors, scenario)) return kExitUsage;
    local = std::make_unique<LocalSource>(c.collectors, std::move(scenario), refresh);
    source = "local node " + c.collectors.node_name;
  } else {
    exporter = std::make_unique<FleetSource>(c.exporter_addresses, c.tls);
    source = c.exporter_addresses.size() == 1 ? "exporter " : "exporters ";
    for (size_t i = 0; i < c.exporter_addresses.size(); ++i) {
      source += (i == 0 ? "" : ",") + c.exporter_addresses[i];
    }
  }
  // A call may take the whole refresh, but not less than a second (a loaded exporter's answer
  // for a large fleet) and not more than ten (then it says so).
  const auto timeout =
      std::clamp(refresh, std::chrono::milliseconds(1000), std::chrono::milliseconds(10'000));
  auto fetch = [&]() -> top::Snapshot {
    return local ? local->Fetch()
                 : exporter->Fetch(c.once ? std::chrono::milliseconds(5000) : timeout);
  };

  if (c.once) {
    const auto now = std::chrono::system_clock::now();
    const top::Snapshot snapshot = fetch();
    if (!snapshot.error.empty()) {
      std::fprintf(stderr, "accelmon: %s%s\n", snapshot.error.c_str(),
                   snapshot.partial ? "; the others are shown" : "");
      if (!snapshot.partial) return kExitFailure;
    }
    const top::View v = top::BuildView(snapshot.reports, snapshot.findings, now, view);
    const std::string at = FormatRfc3339(
        std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count());
    std::fputs(top::FormatText(v, source + " at " + at).c_str(), stdout);
    std::fflush(stdout);
    return snapshot.error.empty() ? kExitOk : kExitFailure;
  }

  const char* no_color = std::getenv("NO_COLOR");
  return top::RunScreen(
      fetch,
      [&] {
        if (exporter) exporter->Cancel();
      },
      top::ScreenOptions{.source = source,
                         .refresh = refresh,
                         .view = view,
                         .color = no_color == nullptr || *no_color == '\0'});
}

}  // namespace

SubcommandRunner RegisterTopCommand(CLI::App& app) {
  auto c = std::make_shared<TopCommand>();
  c->collectors.node_name = HostName();
  CLI::App* cmd = app.add_subcommand(
      "top",
      "The fleet live in the terminal (nodes, devices, open findings) from an exporter's Query "
      "API, or this host's collectors with --local; --once prints it as text");
  cmd->add_option("--exporter.address", c->exporter_addresses,
                  "Exporter whose Query API (its gRPC port) to read; several (comma-separated or "
                  "repeated, as the agents' list): the fleet over all of them, a node on two "
                  "shown from the one with its newest report")
      ->delimiter(',')
      ->check(cli::kConnectAddress)
      ->capture_default_str();
  AddGrpcClientTlsFlags(*cmd, c->tls);
  cmd->add_option("--refresh", c->refresh, "How often to read the nodes and findings again")
      ->check(cli::kDuration)
      ->capture_default_str();
  cmd->add_flag("--once", c->once,
                "Print the summary, nodes, devices and open findings as text tables and exit");
  cmd->add_option("--sort", c->sort, "Sort nodes (and devices) by this; `s` cycles it")
      ->check(CLI::IsMember({"node", "util", "memory", "temp", "findings"}))
      ->capture_default_str();
  cmd->add_option("--filter", c->filter,
                  "Show only nodes whose name, or a job on one of their devices, contains this "
                  "(any case); `/` changes it");
  cmd->add_flag("--local", c->local,
                "Run the agent's collectors on this host and show it alone; no exporter");
  AddLocalFlags(*cmd, c->collectors);
  return [c, cmd]() -> std::optional<int> {
    if (!cmd->parsed()) return std::nullopt;
    ImplyClientTls(c->tls);
    return RunTop(*c);
  };
}

}  // namespace accelmon
