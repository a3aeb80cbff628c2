#include "diagnostics/collective_view.h"

#include <algorithm>

#include "proto/enum_labels.h"

namespace accelmon::diagnostics {

std::string GroupThousands(uint64_t n) {
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string CollectiveVerdict::Describe() const {
  constexpr size_t kNamed = 3;
  std::string out;
  for (size_t i = 0; i < waited.size() && i < kNamed; ++i) {
    const WaitedRank& w = waited[i];
    if (i > 0) out += ", ";
    out += "rank " + std::to_string(w.rank);
    if (!w.node.empty()) {
      out += " on " + w.node + (w.device ? " device " + std::to_string(*w.device) : "");
    } else if (!w.host.empty()) {
      out += " (host " + w.host + (w.device ? ", device " + std::to_string(*w.device) : "") + ")";
    }
    if (w.state == v1::RANK_STATE_OK && w.collectives) {
      out += " stopped after " + GroupThousands(*w.collectives) + " collectives";
    } else {
      out += " is " + std::string(RankStateLabel(w.state));
    }
  }
  if (waited.size() > kNamed) out += " and " + std::to_string(waited.size() - kNamed) + " more";
  const size_t others = size > waited.size() ? size - waited.size() : 0;
  out += "; the other " + std::to_string(others) + " rank" + (others == 1 ? "" : "s") +
         (others_between ? " reach "
          : others == 1  ? " is at "
                         : " are at ") +
         GroupThousands(others_at);
  return out;
}

void CollectiveView::Update(std::string_view node,
                            const std::vector<const v1::Communicator*>& communicators,
                            int64_t now_ns) {
  auto it = nodes_.find(node);
  if (communicators.empty()) {
    if (it != nodes_.end()) nodes_.erase(it);
  } else {
    if (it == nodes_.end()) it = nodes_.try_emplace(std::string(node)).first;
    auto& mine = it->second;
    mine.clear();
    for (const v1::Communicator* c : communicators) {
      NodeCommunicator& n = mine[c->hash()];
      n.size = c->size();
      if (c->has_collectives_max()) n.max = c->collectives_max();
      n.ranks.assign(c->ranks().begin(), c->ranks().end());
    }
  }
  // Each communicator's most advanced rank over every node's view, and when it last grew.
  std::map<std::string, uint64_t> max;
  for (const auto& [name, comms] : nodes_) {
    for (const auto& [hash, n] : comms) {
      uint64_t& m = max[hash];
      if (n.max) m = std::max(m, *n.max);
    }
  }
  for (auto p = progress_.begin(); p != progress_.end();) {
    p = max.count(p->first) ? std::next(p) : progress_.erase(p);
  }
  for (const auto& [hash, m] : max) {
    auto [p, fresh] = progress_.try_emplace(hash, Progress{.max = m, .moved_ns = now_ns});
    if (!fresh && m > p->second.max) p->second = Progress{.max = m, .moved_ns = now_ns};
  }
}

std::optional<CollectiveVerdict> CollectiveView::Judge(const std::string& hash,
                                                       const Progress& p) const {
  CollectiveVerdict v;
  v.communicator = hash;
  v.others_at = p.max;
  v.since_ns = p.moved_ns;
  // A rank as its own node lists it wins over what other nodes' RAS says of it.
  std::map<uint32_t, WaitedRank> ranks;
  std::string reporter;
  for (const bool local : {true, false}) {
    for (const auto& [node, comms] : nodes_) {
      const auto c = comms.find(hash);
      if (c == comms.end()) continue;
      v.size = std::max(v.size, c->second.size);
      if (reporter.empty()) reporter = node;
      for (const v1::CommunicatorRank& r : c->second.ranks) {
        if (r.local() != local || ranks.count(r.rank())) continue;
        WaitedRank w{
            .rank = r.rank(),
            .node = local ? node : std::string(),
            .device = r.has_device() ? std::optional<uint32_t>(r.device()) : std::nullopt,
            .host = r.host(),
            .state = r.state(),
            .collectives = r.has_collectives() ? std::optional(r.collectives()) : std::nullopt};
        ranks.emplace(r.rank(), std::move(w));
      }
    }
  }
  // Waited for: the ranks that do not answer, and those furthest behind (the lowest count, below
  // the most advanced): ranks a little behind the front only launched their last one later.
  std::optional<uint64_t> lowest;
  for (const auto& [rank, w] : ranks) {
    if (w.collectives) lowest = std::min(lowest.value_or(*w.collectives), *w.collectives);
  }
  for (auto& [rank, w] : ranks) {
    const bool behind = w.collectives && *w.collectives == lowest && *lowest < p.max;
    if (w.state != v1::RANK_STATE_OK || behind) {
      v.waited.push_back(std::move(w));
    } else if (w.collectives && *w.collectives < p.max) {
      v.others_between = true;
    }
  }
  if (v.waited.empty()) return std::nullopt;
  v.node = reporter;
  for (const WaitedRank& w : v.waited) {
    if (!w.node.empty()) {
      v.node = w.node;
      break;
    }
  }
  return v;
}

std::optional<CollectiveVerdict> CollectiveView::Lagging() const {
  std::optional<CollectiveVerdict> best;
  for (const auto& [hash, p] : progress_) {
    auto v = Judge(hash, p);
    if (v && (!best || v->size > best->size)) best = std::move(v);
  }
  return best;
}

std::optional<CollectiveVerdict> CollectiveView::Stopped(int64_t now_ns, int64_t for_ns) const {
  std::optional<CollectiveVerdict> best;
  for (const auto& [hash, p] : progress_) {
    if (now_ns - p.moved_ns < for_ns) continue;
    auto v = Judge(hash, p);
    if (v && (!best || v->size > best->size)) best = std::move(v);
  }
  return best;
}

bool CollectiveView::ProgressedAfter(int64_t since_ns) const {
  return std::any_of(progress_.begin(), progress_.end(),
                     [&](const auto& p) { return p.second.moved_ns > since_ns; });
}

}  // namespace accelmon::diagnostics
