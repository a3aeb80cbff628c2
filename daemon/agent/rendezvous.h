// Rendezvous (highest-random-weight) hashing: which exporter a node streams to. Every agent ranks
// the exporter list on its own from its node name, with no coordinator, and all agents agree on
// it: adding or removing one exporter moves only the nodes that rank it first.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace accelmon {

// The weight of `address` for `node`: 64-bit FNV-1a of "node|address", finished with splitmix64
// so similar names spread. Fixed arithmetic, the same in every build and on every machine (unlike
// std::hash).
uint64_t RendezvousWeight(std::string_view node, std::string_view address);

// `addresses` without duplicates, best first for `node` (highest weight; ties by address).
std::vector<std::string> RankByRendezvous(std::string_view node,
                                          std::vector<std::string> addresses);

}  // namespace accelmon
