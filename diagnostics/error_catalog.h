// The vendors' error catalogues in one table: for each error class a rule can see in a report (an
// NVIDIA XID, an ECC error class per vendor), its severity and what to do about it (the finding's
// `action`). The XID entries follow NVIDIA's XID catalogue ("Analyzing Xid Errors with the Xid
// Catalog", docs.nvidia.com/deploy/xid-errors), its "Resolution Bucket (Immediate Action)"
// column. docs/diagnostics.md shows the table (a unit test checks that it matches this one);
// rules.xid_error.overrides in the diagnostics config changes an XID's severity or action.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace accelmon::diagnostics {

// What to do (Finding.action), lower snake case, from least to most disruptive:
//   none                 nothing now: informational, or it follows another error (see that one)
//   restart_application  restart the job (from a checkpoint); the device is healthy (RESTART_APP)
//   update_software      update the driver/firmware/software stack (UPDATE_SWFW)
//   check_hardware       check cabling, power connectors, seating on the node (CHECK_MECHANICALS)
//   contact_support      no field action is known: collect a bug report, open a vendor ticket
//                        (CONTACT_SUPPORT)
//   reset_device         drain the device and reset it (nvidia-smi -r, amd-smi reset) or reboot
//                        the node (RESET_GPU)
//   reboot_node          drain the node and reboot (power-cycle) it (RESTART_BM, RESTART_VM)
//   drain_node           drain the node and send the device for service (RMA)
inline constexpr std::string_view kActionNone = "none";
inline constexpr std::string_view kActionRestartApplication = "restart_application";
inline constexpr std::string_view kActionUpdateSoftware = "update_software";
inline constexpr std::string_view kActionCheckHardware = "check_hardware";
inline constexpr std::string_view kActionContactSupport = "contact_support";
inline constexpr std::string_view kActionResetDevice = "reset_device";
inline constexpr std::string_view kActionRebootNode = "reboot_node";
inline constexpr std::string_view kActionDrainNode = "drain_node";

// Every action above, in that order.
std::span<const std::string_view> Actions();
bool IsAction(std::string_view action);

// Error classes other than XIDs (CatalogEntry::error_class).
inline constexpr std::string_view kClassXid = "xid";                         // code: the XID
inline constexpr std::string_view kClassEccUncorrected = "ecc_uncorrected";  // new uncorrected
inline constexpr std::string_view kClassEccCorrected = "ecc_corrected";      // high corrected rate
inline constexpr std::string_view kClassRowRemapFailure = "row_remap_failure";

struct CatalogEntry {
  std::string_view vendor;         // "nvidia", "amd" (DeviceIdentity.vendor)
  std::string_view error_class;    // kClassXid, kClassEcc...
  uint64_t code;                   // the XID for kClassXid; 0 otherwise
  std::string_view name;           // short name (the finding's summary and `xid_name`)
  std::string_view severity;       // "warning" or "critical"
  std::string_view action;         // one of Actions()
  std::string_view vendor_action;  // what the vendor's catalogue says, e.g. NVIDIA's bucket
  std::string_view meaning;        // one line: what happened
};

// The whole table: XIDs by code, then the ECC classes by vendor.
std::span<const CatalogEntry> ErrorCatalog();

// The entry of an XID; nullptr for an XID not in the table (kUnknownXid* apply).
const CatalogEntry* FindXid(uint64_t xid);
// The entry of a non-XID class for a vendor; nullptr when the table has none.
const CatalogEntry* FindErrorClass(std::string_view vendor, std::string_view error_class);

// An XID the table does not have: a warning, to be looked up in NVIDIA's catalogue (whose own
// default bucket is CONTACT_SUPPORT).
inline constexpr std::string_view kUnknownXidSeverity = "warning";
inline constexpr std::string_view kUnknownXidAction = kActionContactSupport;

// The table as docs/diagnostics.md shows it (Markdown, one row per entry).
std::string ErrorCatalogMarkdown();

}  // namespace accelmon::diagnostics
