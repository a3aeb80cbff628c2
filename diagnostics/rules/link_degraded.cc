// link_degraded: a link that lost capacity (bandwidth, or a PCIe link's lanes, below the best it
// has reported: raised at once, capacity drops are discrete), or that carries much less traffic
// than its busy siblings of the same kind for a while (a link the traffic routes around).
#include <algorithm>
#include <array>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "diagnostics/rules/rule_state.h"
#include "diagnostics/rules/rules.h"

namespace accelmon::diagnostics {
namespace {

class LinkDegradedRule final : public Rule {
 public:
  explicit LinkDegradedRule(const LinkDegradedConfig& config) : config_(config) {}

  // After a restart: low traffic must last for_seconds (a capacity drop needs the best capacity
  // seen, which starts afresh).
  double SettleSeconds() const override { return config_.for_seconds; }

  void Observe(const v1::NodeReport& report, RuleContext& context) override {
    for (int i = 0; i < report.devices_size(); ++i) {
      const v1::DeviceTelemetry& device = report.devices(i);
      if (device.links().empty()) continue;
      ObserveGroup(devices_.Get(i, DeviceKeyView(device, device_key_)), &device, device.links(),
                   context);
    }
    if (!report.host().links().empty()) {
      ObserveGroup(host_, nullptr, report.host().links(), context);
    }
  }

 private:
  struct LinkState {
    ByteCounters counters;
    double best_bandwidth = 0;
    uint32_t best_pcie_generation = 0;
    uint32_t best_pcie_width = 0;
    std::optional<int64_t> capacity_low_since_ns;
    std::optional<int64_t> traffic_low_since_ns;
    // The last traffic comparison made, for the evidence when the rate is unknown now.
    double rate = 0;
    double sibling_median = 0;
    size_t siblings = 0;
  };

  struct Entry {
    const v1::Link* link;
    LinkState* state;
    std::optional<double> rate;
    bool up;  // known up
    bool busy;
  };

  // The busy up links of one kind in the group being judged.
  struct KindStats {
    size_t busy = 0;
    double largest = 0;
    double second = 0;  // the second largest (the largest without the largest link)
  };
  static constexpr size_t kKinds = 8;
  static size_t KindSlot(v1::LinkKind kind) {
    const auto k = static_cast<size_t>(kind);
    return k < kKinds ? k : 0;
  }

  void ObserveGroup(Slots<LinkState>& states, const v1::DeviceTelemetry* device,
                    const google::protobuf::RepeatedPtrField<v1::Link>& links,
                    RuleContext& context) {
    const int64_t now = context.now_ns();
    entries_.clear();
    states.Reserve(static_cast<size_t>(links.size()));
    const size_t known = states.size();
    for (int j = 0; j < links.size(); ++j) {
      const v1::Link& link = links.Get(j);
      LinkState& s = states.Get(j, link.name());
      Entry e{.link = &link,
              .state = &s,
              .rate = s.counters.Update(link, now),
              .up = link.has_up() && link.up(),
              .busy = false};
      if (e.rate) {
        const bool has_capacity =
            link.has_max_bandwidth_bytes_per_second() && link.max_bandwidth_bytes_per_second() > 0;
        e.busy = has_capacity
                     ? *e.rate >= config_.busy_share * link.max_bandwidth_bytes_per_second()
                     : *e.rate > 0;
      }
      entries_.push_back(e);
    }
    if (states.size() != known) {  // a link was new: adding its slot may have moved the others
      for (int j = 0; j < links.size(); ++j) {
        entries_[static_cast<size_t>(j)].state = &states.Get(j, links.Get(j).name());
      }
    }
    kinds_.fill(KindStats{});
    for (const Entry& e : entries_) {
      if (!e.up || !e.busy) continue;
      KindStats& k = kinds_[KindSlot(e.link->kind())];
      ++k.busy;
      if (*e.rate >= k.largest) {
        k.second = k.largest;
        k.largest = *e.rate;
      } else {
        k.second = std::max(k.second, *e.rate);
      }
    }
    for (const Entry& e : entries_) Judge(e, device, context);
  }

  void Judge(const Entry& e, const v1::DeviceTelemetry* device, RuleContext& context) {
    const v1::Link& link = *e.link;
    LinkState& s = *e.state;
    const int64_t now = context.now_ns();

    // (a) Capacity, judged while the link is not known down (down is link_down's business).
    bool capacity_low = false;
    double bandwidth_now = 0;
    uint32_t pcie_now = 0;
    // PCIe is judged by its lanes only: GPUs drop the link's generation (and so the bandwidth a
    // collector derives from it) whenever they idle, to save power; a lost lane stays lost.
    const bool pcie = link.kind() == v1::LINK_KIND_PCIE;
    if (!link.has_up() || link.up()) {
      if (link.has_max_bandwidth_bytes_per_second() && !pcie) {
        bandwidth_now = link.max_bandwidth_bytes_per_second();
        s.best_bandwidth = std::max(s.best_bandwidth, bandwidth_now);
        capacity_low |= bandwidth_now < config_.capacity_share * s.best_bandwidth;
      }
      if (pcie && link.has_pcie_width()) {
        pcie_now = link.pcie_width();
        if (pcie_now > s.best_pcie_width) {
          s.best_pcie_generation = link.pcie_generation();
          s.best_pcie_width = link.pcie_width();
        }
        capacity_low |= pcie_now < config_.capacity_share * s.best_pcie_width;
      }
    }
    if (capacity_low) {
      if (!s.capacity_low_since_ns) s.capacity_low_since_ns = now;
    } else {
      s.capacity_low_since_ns.reset();
    }

    // (b) Traffic against the median of its busy siblings. An unknown own rate (a counter reset)
    // keeps the timer as it was.
    if (e.rate) {
      bool low = false;
      if (e.up) {
        // The median is at most the largest sibling: most links are dismissed without it.
        const KindStats& k = kinds_[KindSlot(link.kind())];
        const bool counted = e.up && e.busy;
        const size_t n = k.busy - (counted ? 1 : 0);
        const double largest = counted && *e.rate >= k.largest ? k.second : k.largest;
        rates_.clear();
        if (n >= 2 && *e.rate < config_.traffic_share * largest) {
          for (const Entry& o : entries_) {
            if (&o == &e || o.link->kind() != link.kind() || !o.up || !o.busy) continue;
            rates_.push_back(*o.rate);
          }
        }
        if (const size_t m = rates_.size(); m >= 2) {
          std::sort(rates_.begin(), rates_.end());
          const double median =
              m % 2 == 1 ? rates_[m / 2] : (rates_[m / 2 - 1] + rates_[m / 2]) / 2;
          low = *e.rate < config_.traffic_share * median;
          s.rate = *e.rate;
          s.sibling_median = median;
          s.siblings = m;
        }
      }
      if (!low) {
        s.traffic_low_since_ns.reset();
      } else if (!s.traffic_low_since_ns) {
        s.traffic_low_since_ns = now;
      }
    }
    const bool traffic_low =
        s.traffic_low_since_ns &&
        static_cast<double>(now - *s.traffic_low_since_ns) / 1e9 >= config_.for_seconds;
    if (!capacity_low && !traffic_low) return;

    const std::string where = LinkPlace(device);
    Raised raised;
    raised.plot = "link_bytes_per_second";
    if (capacity_low) {
      raised.start_ns = s.capacity_low_since_ns;
      raised.window_start_ns = s.capacity_low_since_ns;
      const bool pcie_low = pcie_now > 0 && pcie_now < config_.capacity_share * s.best_pcie_width;
      if (pcie_low) {
        raised.summary = "link " + link.name() + where + " down-trained to PCIe gen" +
                         std::to_string(link.pcie_generation()) + " x" +
                         std::to_string(link.pcie_width()) + " (was gen" +
                         std::to_string(s.best_pcie_generation) + " x" +
                         std::to_string(s.best_pcie_width) + ")";
        raised.evidence.push_back(NumberEvidence("pcie_generation", link.pcie_generation(), ""));
        raised.evidence.push_back(NumberEvidence("pcie_width", link.pcie_width(), "lanes"));
        raised.evidence.push_back(
            NumberEvidence("best_pcie_generation", s.best_pcie_generation, ""));
        raised.evidence.push_back(NumberEvidence("best_pcie_width", s.best_pcie_width, "lanes"));
      } else {
        raised.summary = "link " + link.name() + where + " capacity at " +
                         std::to_string(static_cast<int>(100 * bandwidth_now / s.best_bandwidth)) +
                         "% of its best";
      }
      if (link.has_max_bandwidth_bytes_per_second()) {
        raised.evidence.push_back(
            NumberEvidence("max_bandwidth", bandwidth_now, "bytes_per_second"));
        raised.evidence.push_back(
            NumberEvidence("best_max_bandwidth", s.best_bandwidth, "bytes_per_second"));
      }
    } else {
      raised.start_ns = s.traffic_low_since_ns;
      raised.window_start_ns = s.traffic_low_since_ns;
      const double seconds = static_cast<double>(now - *s.traffic_low_since_ns) / 1e9;
      raised.summary = "link " + link.name() + where + " carries " +
                       std::to_string(static_cast<int>(100 * s.rate / s.sibling_median)) +
                       "% of the median of its " + std::to_string(s.siblings) +
                       " busy siblings for " + std::to_string(static_cast<int64_t>(seconds)) + " s";
      raised.evidence.push_back(NumberEvidence("link_rate", s.rate, "bytes_per_second"));
      raised.evidence.push_back(
          NumberEvidence("sibling_median_rate", s.sibling_median, "bytes_per_second"));
      raised.evidence.push_back(
          NumberEvidence("busy_siblings", static_cast<double>(s.siblings), "count"));
      raised.evidence.push_back(NumberEvidence("low_for", seconds, "seconds"));
    }
    context.Raise(LinkSubject(device, link), std::move(raised));
  }

  const LinkDegradedConfig& config_;  // the engine's: a reload changes it
  Slots<Slots<LinkState>> devices_;   // by DeviceKey, then link name
  Slots<LinkState> host_;
  std::vector<Entry> entries_;           // scratch, reused across reports
  std::vector<double> rates_;            // scratch
  std::array<KindStats, kKinds> kinds_;  // scratch
  std::string device_key_;               // scratch
};

}  // namespace

std::unique_ptr<Rule> MakeLinkDegradedRule(const Config& config) {
  return std::make_unique<LinkDegradedRule>(config.link_degraded);
}

}  // namespace accelmon::diagnostics
