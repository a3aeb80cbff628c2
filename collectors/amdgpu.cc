#include "collectors/amdgpu.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <system_error>
#include <utility>
#include <vector>

#include "collectors/amdgpu_gpu_metrics.h"
#include "collectors/file_reader.h"
#include "collectors/text_parsing.h"

namespace accelmon::collectors {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kAmdVendorId = "0x1002";

// The card<N>/device/ files read each tick. xgmi_error is left alone on purpose: reading it
// clears the hardware counter, and pcie_bw sleeps a second in the kernel per read.
constexpr std::string_view kDeviceFiles[] = {
    "device",
    "product_name",
    "serial_number",
    "unique_id",
    "vbios_version",
    "mem_info_vram_total",
    "mem_info_vram_used",
    "gpu_busy_percent",
    "mem_busy_percent",
    "current_link_speed",
    "current_link_width",
    "xgmi_device_id",
    "xgmi_hive_info/xgmi_hive_id",
    "ras/umc_err_count",
};

// The files of the card's hwmon chip read each tick (amdgpu has temp1..3 and one power sensor
// on dGPUs; power2 only on Van Gogh APUs).
constexpr std::string_view kHwmonFiles[] = {
    "name",         "pwm1",
    "temp1_input",  "temp1_label",
    "temp1_crit",   "temp1_emergency",
    "temp2_input",  "temp2_label",
    "temp2_crit",   "temp2_emergency",
    "temp3_input",  "temp3_label",
    "temp3_crit",   "temp3_emergency",
    "power1_input", "power1_average",
    "power1_cap",   "freq1_input",
    "freq1_label",  "freq2_input",
    "freq2_label",
};

std::optional<std::string_view> Find(const AmdgpuAttributes& attributes, std::string_view key) {
  const auto it = attributes.find(key);
  if (it == attributes.end()) return std::nullopt;
  return std::string_view(it->second);
}

// Typed lookups that count values present but not parseable.
class Values {
 public:
  explicit Values(const AmdgpuAttributes& attributes) : attributes_(attributes) {}

  std::optional<std::string_view> Text(std::string_view key) const {
    return Find(attributes_, key);
  }

  std::optional<uint64_t> Uint(std::string_view key) {
    const auto text = Find(attributes_, key);
    if (!text) return std::nullopt;
    const auto value = ParseUint64(*text);
    if (!value) ++malformed_;
    return value;
  }

  std::optional<int64_t> Int(std::string_view key) {
    const auto text = Find(attributes_, key);
    if (!text) return std::nullopt;
    const auto value = ParseInt64(*text);
    if (!value) ++malformed_;
    return value;
  }

  // A 0..100 percentage as a 0..1 ratio.
  std::optional<double> Percent(std::string_view key) {
    const auto value = Uint(key);
    if (!value) return std::nullopt;
    if (*value > 100) {
      ++malformed_;
      return std::nullopt;
    }
    return static_cast<double>(*value) / 100.0;
  }

  std::optional<double> Millidegrees(std::string_view key) {
    const auto value = Int(key);
    if (!value) return std::nullopt;
    return static_cast<double>(*value) / 1000.0;
  }

  void CountMalformed() { ++malformed_; }
  size_t malformed() const { return malformed_; }

 private:
  const AmdgpuAttributes& attributes_;
  size_t malformed_ = 0;
};

// hwmon sensor "<type><i>" whose label is `label`; amdgpu labels every sensor it shows, and
// without a label the driver's fixed order stands in (temp: edge, junction, mem; freq: sclk,
// mclk).
std::optional<std::string> HwmonSensor(const AmdgpuAttributes& attributes, std::string_view type,
                                       int count, std::string_view label, int default_index) {
  for (int i = 1; i <= count; ++i) {
    const std::string prefix = "hwmon/" + std::string(type) + std::to_string(i);
    if (!attributes.contains(prefix + "_input")) continue;
    const auto found = Find(attributes, prefix + "_label");
    if (found ? *found == label : i == default_index) return prefix;
  }
  return std::nullopt;
}

void MapThermal(const AmdgpuAttributes& attributes, Values& values, v1::DeviceThermal& thermal) {
  const auto junction = HwmonSensor(attributes, "temp", 3, "junction", 2);
  const auto edge = HwmonSensor(attributes, "temp", 3, "edge", 1);
  const auto mem = HwmonSensor(attributes, "temp", 3, "mem", 3);
  // Junction (hotspot) is what the firmware throttles on and the only die sensor on MI300; edge
  // only where there is no junction sensor (pre-Vega cards).
  std::optional<double> core;
  std::optional<std::string> core_sensor;
  if (junction) {
    core = values.Millidegrees(*junction + "_input");
    core_sensor = junction;
  }
  if (!core && edge) {
    core = values.Millidegrees(*edge + "_input");
    core_sensor = edge;
  }
  if (core) {
    thermal.set_core_celsius(*core);
    // The core sensor's own limits: temp*_crit is where the firmware throttles hard,
    // temp*_emergency where the ASIC shuts down.
    if (const auto crit = values.Millidegrees(*core_sensor + "_crit")) {
      thermal.set_slowdown_threshold_celsius(*crit);
    }
    if (const auto emergency = values.Millidegrees(*core_sensor + "_emergency")) {
      thermal.set_shutdown_threshold_celsius(*emergency);
    }
  }
  if (mem) {
    if (const auto celsius = values.Millidegrees(*mem + "_input")) {
      thermal.set_memory_celsius(*celsius);
    }
  }
  // The fan's PWM duty, 0..255 in amdgpu (pwm1_max); fanless server cards have no pwm1.
  if (const auto pwm = values.Uint("hwmon/pwm1")) {
    if (*pwm <= 255) {
      thermal.set_fan_speed_ratio(static_cast<double>(*pwm) / 255.0);
    } else {
      values.CountMalformed();
    }
  }
}

void MapPower(const AmdgpuAttributes& attributes, Values& values, v1::DevicePower& power) {
  // The instantaneous reading where the driver has one (RDNA3, MI300), else its average.
  for (const std::string_view key : {"hwmon/power1_input", "hwmon/power1_average"}) {
    if (!attributes.contains(key)) continue;
    if (const auto microwatts = values.Uint(key)) {
      power.set_usage_watts(static_cast<double>(*microwatts) / 1e6);
      break;
    }
  }
  if (const auto cap = values.Uint("hwmon/power1_cap")) {
    power.set_limit_watts(static_cast<double>(*cap) / 1e6);
  }
}

void MapClocks(const AmdgpuAttributes& attributes, Values& values, v1::DeviceClocks& clocks) {
  if (const auto sclk = HwmonSensor(attributes, "freq", 2, "sclk", 1)) {
    if (const auto hz = values.Uint(*sclk + "_input"))
      clocks.set_compute_hz(static_cast<double>(*hz));
  }
  if (const auto mclk = HwmonSensor(attributes, "freq", 2, "mclk", 2)) {
    if (const auto hz = values.Uint(*mclk + "_input"))
      clocks.set_memory_hz(static_cast<double>(*hz));
  }
}

void MapPcieLink(Values& values, v1::DeviceTelemetry& out) {
  std::optional<double> gts;
  if (const auto speed = values.Text("current_link_speed")) {
    gts = ParsePcieSpeedGts(*speed);
    // "Unknown" is what the kernel answers for a link it cannot read: absent, not malformed.
    if (!gts && *speed != "Unknown") values.CountMalformed();
  }
  // 0 for an untrained link, a width over 32 is junk: both absent. (A plain value, not an
  // optional: GCC 12 warns maybe-uninitialized on the optional once this is inlined.)
  const uint64_t width = values.Uint("current_link_width").value_or(0);
  const bool has_width = width > 0 && width <= 32;
  if (!gts && !has_width) return;

  v1::Link& link = *out.add_links();
  link.set_kind(v1::LINK_KIND_PCIE);
  link.set_name("pcie");
  link.set_index(0);
  link.set_peer("host");
  // A rate that is no PCIe generation's has no capacity either: absent, not guessed.
  if (const auto generation = gts ? PcieGeneration(*gts) : std::nullopt) {
    link.set_pcie_generation(*generation);
  }
  if (has_width) link.set_pcie_width(static_cast<uint32_t>(width));
  if (link.has_pcie_generation() && link.has_pcie_width()) {
    if (const auto max = PcieMaxBytesPerSecond(link.pcie_generation(), link.pcie_width())) {
      link.set_max_bandwidth_bytes_per_second(*max);
    }
  }
}

// What only the binary gpu_metrics table has: the firmware's activity averages, per compute die
// on MI300, energy, and PCIe replays.
void MapGpuMetrics(const AmdgpuAttributes& attributes, const AmdgpuCardContext& context,
                   Values& values, v1::DeviceTelemetry& out) {
  const auto blob = Find(attributes, "gpu_metrics");
  if (!blob) return;
  AmdgpuGpuMetrics metrics;
  std::string why;
  switch (ParseAmdgpuGpuMetrics(*blob, metrics, why)) {
    case GpuMetricsResult::kDecoded:
      break;
    case GpuMetricsResult::kUnknownLayout:
      if (context.unknown_gpu_metrics != nullptr) *context.unknown_gpu_metrics = std::move(why);
      return;
    case GpuMetricsResult::kMalformed:
      values.CountMalformed();
      return;
  }
  for (size_t i = 0; i < metrics.skipped_values; ++i) values.CountMalformed();
  v1::DeviceActivity activity;
  if (metrics.gfx_activity_ratio) activity.set_graphics_engine_ratio(*metrics.gfx_activity_ratio);
  if (metrics.umc_activity_ratio) activity.set_dram_bandwidth_ratio(*metrics.umc_activity_ratio);
  for (const double ratio : metrics.compute_die_ratios) activity.add_compute_die_ratios(ratio);
  if (activity.ByteSizeLong() > 0) *out.mutable_activity() = std::move(activity);
  if (metrics.energy_joules) out.mutable_power()->set_energy_joules_total(*metrics.energy_joules);
  if (metrics.pcie_replays) {
    for (v1::Link& link : *out.mutable_links()) {
      if (link.kind() == v1::LINK_KIND_PCIE) {
        (*link.mutable_errors_total())["replay"] = *metrics.pcie_replays;
      }
    }
  }
}

// Reads a card's files through the injected reader, remembering whether any read failed with
// ENODEV: the driver's answer once the device is gone (drm_dev_unplug) but still registered.
class CardReader {
 public:
  CardReader(const AttributeReader& reader, fs::path dir) : reader_(reader), dir_(std::move(dir)) {}

  // Reads dir/<relative>, trimmed, into attributes()[<key>] when it answers something.
  void Read(std::string_view relative, std::string_view key) { Store(relative, key, true); }
  void Read(std::string_view relative) { Store(relative, relative, true); }

  // As Read, byte for byte: for binary tables.
  void ReadBinary(std::string_view relative) { Store(relative, relative, false); }

  const fs::path& dir() const { return dir_; }
  bool lost() const { return lost_; }
  AmdgpuAttributes& attributes() { return attributes_; }

 private:
  void Store(std::string_view relative, std::string_view key, bool trim) {
    std::string text;
    const int err = reader_(dir_ / relative, text);
    if (err == ENODEV) lost_ = true;
    if (err != 0) return;
    const std::string_view value = trim ? Trim(text) : std::string_view(text);
    if (!value.empty()) attributes_.insert_or_assign(std::string(key), std::string(value));
  }

  const AttributeReader& reader_;
  fs::path dir_;
  bool lost_ = false;
  AmdgpuAttributes attributes_;
};

// Reads vendor and uevent; true for an AMD device bound to amdgpu. Which driver: uevent's
// DRIVER, else the `driver` link; with neither readable, the amdgpu-only VRAM file decides.
bool ReadIsAmdgpu(CardReader& r) {
  r.Read("vendor");
  r.Read("uevent");
  const auto vendor = Find(r.attributes(), "vendor");
  if (!vendor || *vendor != kAmdVendorId) return false;
  std::string driver;
  if (const auto uevent = Find(r.attributes(), "uevent")) driver = UeventValue(*uevent, "DRIVER");
  if (driver.empty()) {
    std::error_code ec;
    const fs::path target = fs::read_symlink(r.dir() / "driver", ec);
    if (!ec) driver = target.filename().string();
  }
  if (!driver.empty()) return driver == "amdgpu";
  std::error_code ec;
  return fs::exists(r.dir() / "mem_info_vram_total", ec);
}

// The amdgpu chip among device/hwmon/hwmon*/ (there is one; the name check guards against
// another driver's chip on the same PCI device), or the first chip.
std::optional<fs::path> FindHwmonChip(const fs::path& device, const AttributeReader& reader) {
  std::vector<std::pair<uint64_t, fs::path>> chips;
  std::error_code ec;
  for (fs::directory_iterator it(device / "hwmon", ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!name.starts_with("hwmon") || !AllDigits(std::string_view(name).substr(5))) continue;
    if (const auto n = ParseUint64(std::string_view(name).substr(5))) {
      chips.emplace_back(*n, it->path());
    }
  }
  if (chips.empty()) return std::nullopt;
  std::sort(chips.begin(), chips.end());
  for (const auto& [n, path] : chips) {
    std::string text;
    if (reader(path / "name", text) == 0 && Trim(text) == "amdgpu") return path;
  }
  return chips.front().second;
}

// The card<N> entries of class/drm, ordered by N.
std::vector<std::string> ListCards(const fs::path& root, std::error_code& ec) {
  std::vector<std::pair<uint64_t, std::string>> numbered;
  fs::directory_iterator it(root, ec);
  for (; !ec && it != fs::directory_iterator(); it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (const auto n = DrmCardNumber(name)) numbered.emplace_back(*n, std::move(name));
  }
  std::sort(numbered.begin(), numbered.end());
  std::vector<std::string> cards;
  for (auto& [n, name] : numbered) cards.push_back(std::move(name));
  return cards;
}

}  // namespace

std::optional<uint64_t> DrmCardNumber(std::string_view dir_name) {
  constexpr std::string_view kPrefix = "card";
  if (!dir_name.starts_with(kPrefix)) return std::nullopt;
  const std::string_view digits = dir_name.substr(kPrefix.size());
  if (!AllDigits(digits) || (digits.size() > 1 && digits.front() == '0')) return std::nullopt;
  return ParseUint64(digits);
}

std::string_view UeventValue(std::string_view uevent, std::string_view key) {
  while (!uevent.empty()) {
    const size_t eol = uevent.find('\n');
    const std::string_view line = Trim(uevent.substr(0, eol));
    if (line.size() > key.size() && line.starts_with(key) && line[key.size()] == '=') {
      return Trim(line.substr(key.size() + 1));
    }
    if (eol == std::string_view::npos) break;
    uevent.remove_prefix(eol + 1);
  }
  return {};
}

std::optional<double> ParsePcieSpeedGts(std::string_view text) {
  const std::vector<std::string_view> fields = SplitFields(text);
  if (fields.size() < 2 || fields[1] != "GT/s") return std::nullopt;
  const auto gts = ParseDouble(fields[0]);
  if (!gts || !std::isfinite(*gts) || *gts <= 0) return std::nullopt;
  return gts;
}

RasErrorCounts ParseRasErrorCount(std::string_view text) {
  RasErrorCounts counts;
  ForEachLine(text, [&](std::string_view line) {
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) return;
    const std::string_view key = Trim(line.substr(0, colon));
    const auto value = ParseUint64(line.substr(colon + 1));
    if (key == "ue") counts.uncorrected = value;
    if (key == "ce") counts.corrected = value;
  });
  return counts;
}

size_t ParseAmdgpuCard(const AmdgpuAttributes& attributes, const AmdgpuCardContext& context,
                       v1::DeviceTelemetry& out) {
  Values values(attributes);

  auto& id = *out.mutable_identity();
  id.set_vendor("amd");
  // product_name comes from the board's FRU EEPROM, on server cards only.
  if (const auto product = values.Text("product_name")) {
    id.set_model(std::string(*product));
  } else if (const auto device = values.Text("device")) {
    id.set_model(std::string(*device));
  }
  id.set_index(context.index);
  if (const auto uevent = values.Text("uevent")) {
    id.set_pci_bus_id(std::string(UeventValue(*uevent, "PCI_SLOT_NAME")));
  }
  if (const auto unique = values.Text("unique_id")) {
    id.set_uuid(std::string(*unique));
  } else {
    id.set_uuid("amdgpu-" + (id.pci_bus_id().empty() ? context.card : id.pci_bus_id()));
  }
  if (const auto vbios = values.Text("vbios_version")) id.set_firmware_version(std::string(*vbios));
  id.set_driver_version(context.driver_version);
  if (const auto serial = values.Text("serial_number")) id.set_serial(std::string(*serial));

  const auto total = values.Uint("mem_info_vram_total");
  const auto used = values.Uint("mem_info_vram_used");
  if (total) out.mutable_memory()->set_total_bytes(*total);
  if (used) out.mutable_memory()->set_used_bytes(*used);
  if (total && used && *used <= *total) out.mutable_memory()->set_free_bytes(*total - *used);

  if (const auto busy = values.Percent("gpu_busy_percent")) {
    out.mutable_utilization()->set_compute_ratio(*busy);
  }
  if (const auto busy = values.Percent("mem_busy_percent")) {
    out.mutable_utilization()->set_memory_bandwidth_ratio(*busy);
  }

  // Built aside so that a card without such sensors has no empty message either.
  v1::DeviceThermal thermal;
  MapThermal(attributes, values, thermal);
  if (thermal.ByteSizeLong() > 0) *out.mutable_thermal() = std::move(thermal);
  v1::DevicePower power;
  MapPower(attributes, values, power);
  if (power.ByteSizeLong() > 0) *out.mutable_power() = std::move(power);
  v1::DeviceClocks clocks;
  MapClocks(attributes, values, clocks);
  if (clocks.ByteSizeLong() > 0) *out.mutable_clocks() = std::move(clocks);

  // UMC is the memory controller: its counts are HBM/GDDR ECC errors since the driver loaded.
  // They are all the card counts in device memory, so they are also its DRAM location's.
  if (const auto text = values.Text("ras/umc_err_count")) {
    const RasErrorCounts counts = ParseRasErrorCount(*text);
    v1::DeviceErrors& errors = *out.mutable_errors();
    if (counts.uncorrected) errors.set_ecc_uncorrected_total(*counts.uncorrected);
    if (counts.corrected) errors.set_ecc_corrected_total(*counts.corrected);
    if (counts.uncorrected || counts.corrected) {
      v1::EccLocationCounts& dram = *errors.add_ecc_by_location();
      dram.set_location(v1::MEMORY_LOCATION_DRAM);
      if (counts.uncorrected) dram.set_uncorrected_total(*counts.uncorrected);
      if (counts.corrected) dram.set_corrected_total(*counts.corrected);
    }
    // "Query currently inaccessible" after a fatal RAS interrupt, or junk.
    if (!counts.uncorrected && !counts.corrected) values.CountMalformed();
  }

  MapPcieLink(values, out);
  MapGpuMetrics(attributes, context, values, out);
  return values.malformed();
}

AmdgpuCollector::AmdgpuCollector(PathResolver paths, AttributeReader reader)
    : paths_(std::move(paths)),
      reader_(reader ? std::move(reader) : AttributeReader(TryReadAttributeFile)) {}

void AmdgpuCollector::Collect(v1::NodeReport& report) {
  const fs::path root = paths_.Sys("class/drm");
  std::error_code ec;
  const std::vector<std::string> cards = ListCards(root, ec);
  if (ec) ThrowSourceError(root.string(), ec);

  // Only the DKMS (ROCm) driver declares a module version; the in-tree one has none.
  std::string driver_version;
  if (std::string text; reader_(paths_.Sys("module/amdgpu/version"), text) == 0) {
    driver_version = std::string(Trim(text));
  }

  struct Card {
    const std::string* name;
    v1::DeviceTelemetry device;
    std::string hive;
    bool lost = false;
  };
  std::vector<Card> found;
  size_t malformed = 0;
  for (const std::string& card : cards) {
    CardReader r(reader_, root / card / "device");
    const bool known = cards_.contains(card);
    // A card seen before stays ours while it answers ENODEV, even to vendor or uevent.
    if (!ReadIsAmdgpu(r) && !(known && r.lost())) continue;
    for (const std::string_view file : kDeviceFiles) r.Read(file);
    r.ReadBinary("gpu_metrics");
    if (const auto chip = FindHwmonChip(r.dir(), reader_)) {
      for (const std::string_view file : kHwmonFiles) {
        r.Read("hwmon/" + chip->filename().string() + "/" + std::string(file),
               "hwmon/" + std::string(file));
      }
    }

    Card& c = found.emplace_back();
    c.name = &card;
    c.lost = r.lost();
    std::string unknown_gpu_metrics;
    const AmdgpuCardContext context{card, static_cast<uint32_t>(found.size() - 1), driver_version,
                                    &unknown_gpu_metrics};
    malformed += ParseAmdgpuCard(r.attributes(), context, c.device);
    if (!unknown_gpu_metrics.empty() && unknown_gpu_metrics != unknown_gpu_metrics_logged_) {
      spdlog::info("amdgpu {}: {}; activity comes from gpu_busy_percent and mem_busy_percent only",
                   card, unknown_gpu_metrics);
      unknown_gpu_metrics_logged_ = std::move(unknown_gpu_metrics);
    }
    if (const auto hive = Find(r.attributes(), "xgmi_hive_info/xgmi_hive_id");
        hive && *hive != "0") {
      c.hive = std::string(*hive);
    }
  }

  std::map<std::string, CardState, std::less<>> seen;
  for (Card& c : found) {
    CardState& state = seen[*c.name];
    if (const auto it = cards_.find(*c.name); it != cards_.end()) state = std::move(it->second);
    if (!c.lost) {
      c.device.set_up(true);
      state.identity = c.device.identity();
      state.lost = false;
      continue;
    }
    c.device.set_up(false);
    // What a lost card still answers (PCI ids) is less than what it was known by.
    if (!state.identity.uuid().empty()) {
      const uint32_t index = c.device.identity().index();
      *c.device.mutable_identity() = state.identity;
      c.device.mutable_identity()->set_index(index);
    }
    if (!state.lost) {
      v1::Event& event = *report.add_events();
      event.set_kind(v1::EVENT_KIND_DEVICE_LOST);
      *event.mutable_time() = report.timestamp();
      event.set_device_index(c.device.identity().index());
      event.set_device_uuid(c.device.identity().uuid());
      event.set_message("amdgpu " + *c.name + " (" + c.device.identity().pci_bus_id() +
                        "): sysfs reads fail with ENODEV");
    }
    state.lost = true;
  }
  cards_ = std::move(seen);  // a card that vanished is forgotten

  // xGMI: every other card of the hive is a peer. sysfs has no per-link state or traffic
  // counters, so the links carry who is connected, nothing measured.
  for (Card& c : found) {
    if (c.hive.empty() || c.lost) continue;
    uint32_t link_index = 0;
    for (const Card& peer : found) {
      if (&peer == &c || peer.hive != c.hive) continue;
      v1::Link& link = *c.device.add_links();
      link.set_kind(v1::LINK_KIND_XGMI);
      link.set_name("xgmi" + std::to_string(link_index));
      link.set_index(link_index);
      const auto& peer_id = peer.device.identity();
      link.set_peer(peer_id.pci_bus_id().empty() ? peer_id.uuid() : peer_id.pci_bus_id());
      ++link_index;
    }
  }

  for (Card& c : found) *report.add_devices() = std::move(c.device);

  malformed_log_.Skipped(malformed, "malformed value(s) under", root);
}

std::unique_ptr<Collector> CreateAmdgpuCollector(const PathResolver& paths, std::string* why_not) {
  const fs::path root = paths.Sys("class/drm");
  std::error_code ec;
  const std::vector<std::string> cards = ListCards(root, ec);
  std::string reason;
  if (ec) {
    reason = root.string() + ": " + ec.message();
  } else {
    const AttributeReader reader(TryReadAttributeFile);
    for (const std::string& card : cards) {
      CardReader r(reader, root / card / "device");
      if (ReadIsAmdgpu(r)) return std::make_unique<AmdgpuCollector>(paths);
    }
    reason = root.string() + ": no card with PCI vendor 0x1002 bound to amdgpu";
  }
  if (why_not != nullptr) *why_not = std::move(reason);
  return nullptr;
}

}  // namespace accelmon::collectors
