// firmware_below_minimum: a device runs firmware or a driver older than the fleet's minimum
// (known bugs, missing fixes).
#include <cctype>
#include <string>
#include <string_view>

#include "diagnostics/rules/rules.h"

namespace accelmon::diagnostics {
namespace {

bool IsDigit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }

// The next run of digits at or after `pos` (leading zeros dropped), advancing `pos` past it;
// empty at the end.
std::string_view NextNumber(std::string_view v, size_t& pos) {
  while (pos < v.size() && !IsDigit(v[pos])) ++pos;
  const size_t begin = pos;
  while (pos < v.size() && IsDigit(v[pos])) ++pos;
  std::string_view n = v.substr(begin, pos - begin);
  while (n.size() > 1 && n.front() == '0') n.remove_prefix(1);
  return n;
}

// Compares versions by their numeric components in order, whatever separates them ("550.54.15" <
// "550.127.05"; "1.0.0-sim" == "1.0.0"; a missing component counts as 0). Digits are compared as
// text by length first, so no component overflows. <0, 0, >0 like strcmp.
int CompareVersions(std::string_view a, std::string_view b) {
  size_t pa = 0;
  size_t pb = 0;
  while (pa < a.size() || pb < b.size()) {
    std::string_view x = NextNumber(a, pa);
    std::string_view y = NextNumber(b, pb);
    if (x.empty()) x = "0";
    if (y.empty()) y = "0";
    if (x.size() != y.size()) return x.size() < y.size() ? -1 : 1;
    if (const int c = x.compare(y); c != 0) return c;
  }
  return 0;
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

bool Below(const std::string& version, const std::string& minimum) {
  return !version.empty() && !minimum.empty() && CompareVersions(version, minimum) < 0;
}

class FirmwareBelowMinimumRule final : public Rule {
 public:
  explicit FirmwareBelowMinimumRule(const FirmwareBelowMinimumConfig& config) : config_(config) {}

  void Observe(const v1::NodeReport& report, RuleContext& context) override {
    for (const v1::DeviceTelemetry& d : report.devices()) {
      const v1::DeviceIdentity& id = d.identity();
      bool below = false;
      for (const FirmwareMinimum& min : config_.minimums) {
        if (Matches(id, min) && (Below(id.firmware_version(), min.firmware) ||
                                 Below(id.driver_version(), min.driver))) {
          below = true;
          break;
        }
      }
      if (below) context.Raise(DeviceSubject(d), Describe(id));
    }
  }

 private:
  static bool Matches(const v1::DeviceIdentity& id, const FirmwareMinimum& min) {
    return EqualsIgnoreCase(id.vendor(), min.vendor) &&
           (min.model.empty() || EqualsIgnoreCase(id.model(), min.model));
  }

  Raised Describe(const v1::DeviceIdentity& id) const {
    Raised r;
    r.severity = kWarning;
    r.plot = "";
    std::string what;
    for (const FirmwareMinimum& min : config_.minimums) {
      if (!Matches(id, min)) continue;
      if (Below(id.firmware_version(), min.firmware)) {
        r.evidence.push_back(TextEvidence(
            "firmware_version", id.firmware_version() + " (minimum " + min.firmware + ")"));
        what += (what.empty() ? "" : ", ") + std::string("firmware ") + id.firmware_version() +
                " below minimum " + min.firmware;
      }
      if (Below(id.driver_version(), min.driver)) {
        r.evidence.push_back(
            TextEvidence("driver_version", id.driver_version() + " (minimum " + min.driver + ")"));
        what += (what.empty() ? "" : ", ") + std::string("driver ") + id.driver_version() +
                " below minimum " + min.driver;
      }
    }
    r.summary = "device " + std::to_string(id.index()) + " " + what + " (" + id.vendor() +
                (id.model().empty() ? "" : " " + id.model()) + ")";
    return r;
  }

  const FirmwareBelowMinimumConfig& config_;  // the engine's: a reload changes it
};

}  // namespace

std::unique_ptr<Rule> MakeFirmwareBelowMinimumRule(const Config& config) {
  return std::make_unique<FirmwareBelowMinimumRule>(config.firmware_below_minimum);
}

}  // namespace accelmon::diagnostics
