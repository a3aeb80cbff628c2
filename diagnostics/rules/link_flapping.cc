// link_flapping: a link whose up/down state changed `changes` times within the trailing window.
// Changes are counted between consecutive known values (an absent `up` is skipped, not a change).
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "diagnostics/rules/rule_state.h"
#include "diagnostics/rules/rules.h"

namespace accelmon::diagnostics {
namespace {

class LinkFlappingRule final : public Rule {
 public:
  explicit LinkFlappingRule(const LinkFlappingConfig& config) : config_(config) {}

  // After a restart: changes are counted over the window.
  double SettleSeconds() const override { return config_.window_seconds; }

  void Observe(const v1::NodeReport& report, RuleContext& context) override {
    links_.ForEachLink(report,
                       [&](LinkState& s, const v1::DeviceTelemetry* device, const v1::Link& link) {
                         ObserveLink(s, device, link, context);
                       });
  }

 private:
  struct LinkState {
    bool known = false;
    bool up = false;
    // Within the window, oldest first. A vector: an empty std::deque already holds ~600 bytes,
    // and a link that never flaps (nearly all of them) keeps its state for as long as it lives.
    std::vector<int64_t> changes_ns;
  };

  void ObserveLink(LinkState& s, const v1::DeviceTelemetry* device, const v1::Link& link,
                   RuleContext& context) {
    const int64_t now = context.now_ns();
    const int64_t window_ns = static_cast<int64_t>(config_.window_seconds * 1e9);
    if (link.has_up()) {
      if (s.known && s.up != link.up()) s.changes_ns.push_back(now);
      s.known = true;
      s.up = link.up();
    }
    const auto in_window = std::find_if(s.changes_ns.begin(), s.changes_ns.end(),
                                        [&](int64_t t) { return t > now - window_ns; });
    s.changes_ns.erase(s.changes_ns.begin(), in_window);
    if (config_.changes == 0 || s.changes_ns.size() < config_.changes) return;

    Raised raised;
    raised.plot = "link_up";
    raised.start_ns = s.changes_ns.front();
    raised.window_start_ns = now - window_ns;
    raised.summary = "link " + link.name() + LinkPlace(device) +
                     " flapping: " + std::to_string(s.changes_ns.size()) + " up/down changes in " +
                     std::to_string(static_cast<int64_t>(config_.window_seconds)) + " s";
    raised.evidence.push_back(
        NumberEvidence("changes", static_cast<double>(s.changes_ns.size()), "count"));
    raised.evidence.push_back(NumberEvidence("window", config_.window_seconds, "seconds"));
    raised.evidence.push_back(NumberEvidence("link_up", s.up ? 1 : 0, "bool"));
    context.Raise(LinkSubject(device, link), std::move(raised));
  }

  const LinkFlappingConfig& config_;  // the engine's: a reload changes it
  NodeLinkStates<LinkState> links_;
};

}  // namespace

std::unique_ptr<Rule> MakeLinkFlappingRule(const Config& config) {
  return std::make_unique<LinkFlappingRule>(config.link_flapping);
}

}  // namespace accelmon::diagnostics
