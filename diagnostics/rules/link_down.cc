// link_down: a link that has been seen up now reports down. A link never seen up (an unused NIC
// that is down from the start) is not a finding; an absent `up` changes nothing.
#include <string>
#include <utility>

#include "diagnostics/rules/rule_state.h"
#include "diagnostics/rules/rules.h"

namespace accelmon::diagnostics {
namespace {

std::string_view KindName(v1::LinkKind kind) {
  switch (kind) {
    case v1::LINK_KIND_NVLINK:
      return "NVLink";
    case v1::LINK_KIND_HCCS:
      return "HCCS";
    case v1::LINK_KIND_XGMI:
      return "xGMI";
    case v1::LINK_KIND_PCIE:
      return "PCIe";
    case v1::LINK_KIND_INFINIBAND:
      return "InfiniBand";
    case v1::LINK_KIND_ROCE:
      return "RoCE";
    case v1::LINK_KIND_ETHERNET:
      return "Ethernet";
    case v1::LINK_KIND_NVLINK_FABRIC:
      return "NVLink fabric";
    default:
      return "link";
  }
}

class LinkDownRule final : public Rule {
 public:
  void Observe(const v1::NodeReport& report, RuleContext& context) override {
    links_.ForEachLink(report,
                       [&](LinkState& s, const v1::DeviceTelemetry* device, const v1::Link& link) {
                         ObserveLink(s, device, link, context);
                       });
  }

  // Down since the finding's start, and known to have been up before: raised again while the
  // link stays down.
  bool Restore(const v1::Finding& finding, std::string_view) override {
    LinkState& s = links_.ForFinding(finding);
    s.seen_up = true;
    s.down = true;
    s.down_since_ns = ToNanos(finding.start());
    return true;
  }

 private:
  struct LinkState {
    bool seen_up = false;
    bool down = false;  // last known state
    int64_t down_since_ns = 0;
  };

  void ObserveLink(LinkState& s, const v1::DeviceTelemetry* device, const v1::Link& link,
                   RuleContext& context) {
    if (link.has_up()) {
      if (link.up()) {
        s.seen_up = true;
        s.down = false;
      } else if (!s.down) {
        s.down = true;
        s.down_since_ns = context.now_ns();
      }
    }
    if (!s.down || !s.seen_up) return;

    Raised raised;
    raised.severity = kCritical;
    raised.plot = "link_up";
    raised.start_ns = s.down_since_ns;
    raised.summary = std::string(KindName(link.kind())) + " link " + link.name() +
                     LinkPlace(device) + " is down (it was up before)";
    raised.evidence.push_back(NumberEvidence("link_up", 0, "bool"));
    raised.evidence.push_back(TextEvidence("link_kind", KindName(link.kind())));
    if (!link.peer().empty()) raised.evidence.push_back(TextEvidence("peer", link.peer()));
    context.Raise(LinkSubject(device, link), std::move(raised));
  }

  NodeLinkStates<LinkState> links_;
};

}  // namespace

std::unique_ptr<Rule> MakeLinkDownRule(const Config&) { return std::make_unique<LinkDownRule>(); }

}  // namespace accelmon::diagnostics
