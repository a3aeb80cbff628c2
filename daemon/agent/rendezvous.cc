#include "daemon/agent/rendezvous.h"

#include <algorithm>

namespace accelmon {
namespace {

constexpr uint64_t kFnvOffset = 0xcbf29ce484222325ULL;
constexpr uint64_t kFnvPrime = 0x100000001b3ULL;

uint64_t Fnv1a(uint64_t hash, std::string_view bytes) {
  for (const char c : bytes) {
    hash ^= static_cast<unsigned char>(c);
    hash *= kFnvPrime;
  }
  return hash;
}

// FNV-1a's last bytes reach few high bits; the finaliser mixes every bit into every other.
uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

uint64_t RendezvousWeight(std::string_view node, std::string_view address) {
  uint64_t hash = Fnv1a(kFnvOffset, node);
  hash = Fnv1a(hash, "|");
  return SplitMix64(Fnv1a(hash, address));
}

std::vector<std::string> RankByRendezvous(std::string_view node,
                                          std::vector<std::string> addresses) {
  std::sort(addresses.begin(), addresses.end());
  addresses.erase(std::unique(addresses.begin(), addresses.end()), addresses.end());
  std::stable_sort(addresses.begin(), addresses.end(), [&](const auto& a, const auto& b) {
    return RendezvousWeight(node, a) > RendezvousWeight(node, b);
  });
  return addresses;
}

}  // namespace accelmon
