// Per-link and per-device state the rules keep between reports, shared by the rule files.
#pragma once

#include <charconv>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "accelmon/v1/telemetry.pb.h"
#include "diagnostics/rule.h"

namespace accelmon::diagnostics {

// DeviceKey() without allocating on the common path: a UUID as it is, else "#<index>" written
// into `scratch`, whose capacity the next call reuses. Valid until `scratch` changes.
inline std::string_view DeviceKeyView(const v1::DeviceTelemetry& device, std::string& scratch) {
  if (!device.identity().uuid().empty()) return device.identity().uuid();
  scratch.assign("#");
  scratch += std::to_string(device.identity().index());
  return scratch;
}

// The state kept for `device` in a std::map<std::string, State, std::less<>> by DeviceKey, made
// from `fresh` (none: State{}) when the device is new. A device with a UUID, the common case, is
// found without building a key.
template <typename Map, typename... Fresh>
typename Map::mapped_type& DeviceStateOf(Map& states, const v1::DeviceTelemetry& device,
                                         Fresh&&... fresh) {
  const std::string& uuid = device.identity().uuid();
  if (!uuid.empty()) {
    if (auto it = states.find(uuid); it != states.end()) return it->second;
  }
  return states.try_emplace(DeviceKey(device), std::forward<Fresh>(fresh)...).first->second;
}

// Brings per-device state kept by DeviceKey (a std::map<std::string, State, std::less<>>) to
// exactly `devices`: a device that stays keeps its entry, found through DeviceKeyView, so a
// steady report allocates nothing; a new device gets a fresh state and a device that left is
// dropped. Calls update(state, device) for each device. (Rebuilding the map per report cost two
// job rules a node and a key string per device and report, and contended for malloc's lock with
// ingest's parse: bench/README.md, issue 39.)
template <typename Map, typename Update>
void UpdateDeviceStates(Map& states, const std::vector<const v1::DeviceTelemetry*>& devices,
                        std::string& scratch, Update&& update) {
  size_t seen = 0;
  for (const v1::DeviceTelemetry* device : devices) {
    const std::string_view key = DeviceKeyView(*device, scratch);
    auto it = states.find(key);
    if (it == states.end()) it = states.try_emplace(std::string(key)).first;
    update(it->second, *device);
    ++seen;
  }
  if (states.size() <= seen) return;  // no device left (the common case)
  std::erase_if(states, [&](const auto& entry) {
    for (const v1::DeviceTelemetry* device : devices) {
      if (DeviceKeyView(*device, scratch) == entry.first) return false;
    }
    return true;
  });
}

// The state a job rule keeps for the slice's node, in a std::map<std::string, State, std::less<>>
// by node name: made when the node is new to the job; dropped, and null, when the job left the
// node (a slice without devices).
template <typename Map>
typename Map::mapped_type* JobNodeState(Map& nodes, const JobSlice& slice) {
  auto it = nodes.find(slice.node);
  if (slice.devices.empty()) {
    if (it != nodes.end()) nodes.erase(it);
    return nullptr;
  }
  if (it == nodes.end()) it = nodes.try_emplace(std::string(slice.node)).first;
  return &it->second;
}

// State by name, found in O(1) while reports keep their order (the common case) and by a scan
// otherwise. A vector, not a deque: there is one per device and rule, and libstdc++'s deque
// allocates about 600 bytes even empty (22 % of an exporter's heap at 1000 nodes, bench/README.md).
// So a reference stays valid only until the next Get that adds a slot (size() tells).
template <typename T>
class Slots {
 public:
  T& Get(int position, std::string_view name) {
    const size_t p = static_cast<size_t>(position);
    if (p < slots_.size() && slots_[p].first == name) return slots_[p].second;
    for (auto& slot : slots_) {
      if (slot.first == name) return slot.second;
    }
    return slots_.emplace_back(std::string(name), T{}).second;
  }

  // Room for `total` slots, so that a device's links take what they need and no more than the
  // vector's doubling would give them (a no-op once they are there).
  void Reserve(size_t total) { slots_.reserve(total); }
  size_t size() const { return slots_.size(); }

 private:
  std::vector<std::pair<std::string, T>> slots_;
};

// Per-link state of one node's links, kept by DeviceKey and link name for a device's links and by
// link name for the host's, for the rules that judge each link on its own.
template <typename State>
class NodeLinkStates {
 public:
  // Calls observe(state, device, link) for each link of `report`: the devices' links, then the
  // host's (device null).
  template <typename Observe>
  void ForEachLink(const v1::NodeReport& report, Observe&& observe) {
    for (int i = 0; i < report.devices_size(); ++i) {
      const v1::DeviceTelemetry& device = report.devices(i);
      Slots<State>& links = devices_.Get(i, DeviceKeyView(device, device_key_));
      links.Reserve(static_cast<size_t>(device.links_size()));
      for (int j = 0; j < device.links_size(); ++j) {
        const v1::Link& link = device.links(j);
        observe(links.Get(j, link.name()), &device, link);
      }
    }
    host_.Reserve(static_cast<size_t>(report.host().links_size()));
    for (int j = 0; j < report.host().links_size(); ++j) {
      const v1::Link& link = report.host().links(j);
      observe(host_.Get(j, link.name()), nullptr, link);
    }
  }

  // The state of the link `finding` is about (for Rule::Restore, before the first report).
  State& ForFinding(const v1::Finding& finding) {
    const std::string key = SubjectKey(SubjectOf(finding));
    Slots<State>& links = key.empty() ? host_ : devices_.Get(-1, key);
    return links.Get(-1, finding.link());
  }

 private:
  Slots<Slots<State>> devices_;  // by DeviceKey, then link name
  Slots<State> host_;
  std::string device_key_;  // scratch
};

// The subject for `link` of `device`, or of the host when `device` is null.
inline Subject LinkSubject(const v1::DeviceTelemetry* device, const v1::Link& link) {
  return device != nullptr ? DeviceSubject(*device, link.name())
                           : Subject{.device = {}, .device_uuid = {}, .link = link.name()};
}

// Where a link is, as its summary says: " of device 3", or " of the host" when `device` is null.
inline std::string LinkPlace(const v1::DeviceTelemetry* device) {
  return device != nullptr ? " of device " + std::to_string(device->identity().index())
                           : std::string(" of the host");
}

// A link's tx+rx byte rate between consecutive reports.
struct ByteCounters {
  bool seen = false;
  bool has_tx = false;
  bool has_rx = false;
  uint64_t tx = 0;
  uint64_t rx = 0;
  int64_t ns = 0;

  // The rate since the previous call; nullopt when unknown (no counters in both reports, or a
  // counter went down: a reset, whose interval is skipped).
  std::optional<double> Update(const v1::Link& link, int64_t now_ns) {
    std::optional<double> rate;
    if (seen && now_ns > ns) {
      bool any = false;
      bool reset = false;
      double delta = 0;
      if (has_tx && link.has_transmit_bytes_total()) {
        any = true;
        reset |= link.transmit_bytes_total() < tx;
        delta += static_cast<double>(link.transmit_bytes_total() - tx);
      }
      if (has_rx && link.has_receive_bytes_total()) {
        any = true;
        reset |= link.receive_bytes_total() < rx;
        delta += static_cast<double>(link.receive_bytes_total() - rx);
      }
      if (any && !reset) rate = delta / (static_cast<double>(now_ns - ns) / 1e9);
    }
    seen = true;
    has_tx = link.has_transmit_bytes_total();
    has_rx = link.has_receive_bytes_total();
    tx = link.transmit_bytes_total();
    rx = link.receive_bytes_total();
    ns = now_ns;
    return rate;
  }
};

// A rule's latch (Rule::Latch) as text: "name=value" pairs of integers, space-separated.
inline std::string LatchText(std::initializer_list<std::pair<std::string_view, int64_t>> values) {
  std::string out;
  for (const auto& [name, value] : values) {
    if (!out.empty()) out += ' ';
    out += name;
    out += '=';
    out += std::to_string(value);
  }
  return out;
}

// One value of a LatchText; nullopt when absent or not an integer.
inline std::optional<int64_t> LatchValue(std::string_view latch, std::string_view name) {
  size_t pos = 0;
  while (pos < latch.size()) {
    const size_t end = std::min(latch.find(' ', pos), latch.size());
    const std::string_view pair = latch.substr(pos, end - pos);
    if (pair.size() > name.size() && pair.substr(0, name.size()) == name &&
        pair[name.size()] == '=') {
      int64_t value = 0;
      const std::string_view digits = pair.substr(name.size() + 1);
      const auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
      if (ec == std::errc() && ptr == digits.data() + digits.size()) return value;
      return std::nullopt;
    }
    pos = end + 1;
  }
  return std::nullopt;
}

}  // namespace accelmon::diagnostics
