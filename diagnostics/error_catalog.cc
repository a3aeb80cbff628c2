#include "diagnostics/error_catalog.h"

#include <algorithm>
#include <array>

namespace accelmon::diagnostics {
namespace {

constexpr std::string_view kW = "warning";
constexpr std::string_view kC = "critical";

constexpr std::array<std::string_view, 8> kActions = {
    kActionNone,           kActionRestartApplication, kActionUpdateSoftware, kActionCheckHardware,
    kActionContactSupport, kActionResetDevice,        kActionRebootNode,     kActionDrainNode};

// NVIDIA XIDs: severity and action from the catalogue's immediate-action bucket (RESTART_APP:
// warning, restart_application; IGNORE: warning, none; RESET_GPU: critical, reset_device;
// RESTART_BM/RESTART_VM: critical, reboot_node; CHECK_MECHANICALS: check_hardware; UPDATE_SWFW:
// update_software; CONTACT_SUPPORT: contact_support). WORKFLOW_* buckets are resolved as their
// trigger conditions say. XIDs the catalogue marks "Unused" on Ampere and newer are left out (the
// unknown-XID default is the catalogue's own CONTACT_SUPPORT), except 61 that older GPUs log.
// Then the ECC classes the ecc_errors rule sees, per vendor.
constexpr CatalogEntry kCatalog[] = {
    {"nvidia", kClassXid, 8, "GPU stopped processing", kW, kActionRestartApplication, "RESTART_APP",
     "a channel timed out idle: the application's work stopped"},
    {"nvidia", kClassXid, 11, "invalid push buffer stream", kW, kActionRestartApplication,
     "RESTART_APP", "the application sent an invalid or corrupted command stream"},
    {"nvidia", kClassXid, 13, "graphics engine exception", kW, kActionRestartApplication,
     "RESTART_APP",
     "an application fault (out-of-bounds access, illegal instruction); rarely hardware"},
    {"nvidia", kClassXid, 31, "GPU memory page fault", kW, kActionRestartApplication, "RESTART_APP",
     "an illegal address access (MMU fault), usually an application bug"},
    {"nvidia", kClassXid, 32, "invalid push buffer stream (PBDMA)", kW, kActionRestartApplication,
     "RESTART_APP", "the DMA controller saw a corrupted command stream, often PCIe signal quality"},
    {"nvidia", kClassXid, 38, "driver firmware error", kW, kActionNone, "IGNORE",
     "a watchdog timeout in the graphics engine's firmware"},
    {"nvidia", kClassXid, 43, "GPU stopped processing", kW, kActionNone, "IGNORE",
     "the application hit a software-induced fault and ended; the GPU is healthy"},
    {"nvidia", kClassXid, 45, "preemptive cleanup", kW, kActionNone, "WORKFLOW_XID_45",
     "the driver tore down an aborted application (kill, Ctrl-C, or after another XID: act on "
     "that)"},
    {"nvidia", kClassXid, 46, "GPU stopped processing (timeout)", kC, kActionResetDevice,
     "RESET_GPU", "the GPU timed out and stopped processing"},
    {"nvidia", kClassXid, 48, "double-bit ECC error", kC, kActionResetDevice, "WORKFLOW_XID_48",
     "an uncorrectable memory error; a GPU reset or node reboot clears it"},
    {"nvidia", kClassXid, 54, "auxiliary power not connected", kW, kActionCheckHardware,
     "CHECK_MECHANICALS",
     "the board's auxiliary power is not connected: it runs at reduced clocks"},
    {"nvidia", kClassXid, 61, "internal micro-controller breakpoint", kW, kActionContactSupport,
     "CONTACT_SUPPORT", "a PMU breakpoint (older GPUs; unused on Ampere and newer)"},
    {"nvidia", kClassXid, 62, "internal micro-controller halt", kC, kActionResetDevice, "RESET_GPU",
     "an internal micro-controller (PMU) halted"},
    {"nvidia", kClassXid, 63, "row remapping event", kW, kActionNone, "IGNORE",
     "a memory row was marked for remapping (a page retired); applied at the next reset"},
    {"nvidia", kClassXid, 64, "row remapping failure", kC, kActionResetDevice, "RESET_GPU",
     "a memory row could not be remapped (or a page retired)"},
    {"nvidia", kClassXid, 68, "video decoder exception", kW, kActionRestartApplication,
     "RESTART_APP", "an NVDEC0 engine exception"},
    {"nvidia", kClassXid, 69, "graphics engine class error", kW, kActionRestartApplication,
     "RESTART_APP", "the application used the graphics engine wrongly"},
    {"nvidia", kClassXid, 74, "NVLink error", kC, kActionResetDevice, "WORKFLOW_NVLINK_ERR",
     "an NVLink connection to a GPU or NVSwitch failed (or its peer did); a reset or reboot clears "
     "it"},
    {"nvidia", kClassXid, 78, "vGPU start error", kW, kActionUpdateSoftware, "UPDATE_SWFW",
     "a vGPU failed to start"},
    {"nvidia", kClassXid, 79, "GPU has fallen off the bus", kC, kActionRebootNode, "RESTART_BM",
     "the GPU is not reachable over PCIe"},
    {"nvidia", kClassXid, 80, "corrupted data sent to GPU", kW, kActionRestartApplication,
     "RESTART_APP", "a push buffer CRC mismatch"},
    {"nvidia", kClassXid, 92, "high single-bit ECC error rate", kW, kActionNone, "IGNORE",
     "corrected memory errors at a high rate; the hardware corrected them"},
    {"nvidia", kClassXid, 94, "contained ECC error", kW, kActionRestartApplication, "RESTART_APP",
     "an uncorrectable error contained to one application; reset the GPU when convenient"},
    {"nvidia", kClassXid, 95, "uncontained ECC error", kC, kActionResetDevice, "RESET_GPU",
     "an uncorrectable error that affects every application on the GPU"},
    {"nvidia", kClassXid, 109, "context switch timeout", kC, kActionResetDevice, "RESET_GPU",
     "a context switch timed out"},
    {"nvidia", kClassXid, 110, "security fault", kC, kActionResetDevice, "RESET_GPU",
     "a security fault, usually failing hardware"},
    {"nvidia", kClassXid, 119, "GSP RPC timeout", kC, kActionResetDevice, "RESET_GPU",
     "the GPU System Processor did not answer the driver in time"},
    {"nvidia", kClassXid, 120, "GSP error", kC, kActionResetDevice, "RESET_GPU",
     "code running on the GPU System Processor failed"},
    {"nvidia", kClassXid, 121, "C2C link corrected errors", kW, kActionNone, "IGNORE",
     "corrected errors on the C2C link to the Grace CPU; a reset at a service window retrains it"},
    {"nvidia", kClassXid, 136, "link training failed", kC, kActionResetDevice, "RESET_GPU",
     "link training failed"},
    {"nvidia", kClassXid, 137, "NVLink privilege error", kW, kActionNone, "IGNORE",
     "an illegal NVLink peer-to-peer access, usually an application bug"},
    {"nvidia", kClassXid, 140, "unrecovered ECC error", kC, kActionResetDevice, "RESET_GPU",
     "uncorrectable memory errors the driver could not retire or remap"},
    {"nvidia", kClassXid, 143, "GPU initialization error", kC, kActionResetDevice, "RESET_GPU",
     "the GPU failed to initialize"},
    {"nvidia", kClassXid, 144, "NVLink SAW error", kC, kActionResetDevice, "WORKFLOW_NVLINK5_ERR",
     "an NVLink error; by subcode, the fatal ones need a GPU reset (taken as fatal)"},
    {"nvidia", kClassXid, 145, "NVLink RLW error", kC, kActionResetDevice, "WORKFLOW_NVLINK5_ERR",
     "an NVLink error; by subcode, the fatal ones need a GPU reset (taken as fatal)"},
    {"nvidia", kClassXid, 146, "NVLink TLW error", kC, kActionResetDevice, "WORKFLOW_NVLINK5_ERR",
     "an NVLink error; by subcode, the fatal ones need a GPU reset (taken as fatal)"},
    {"nvidia", kClassXid, 147, "NVLink TREX error", kW, kActionNone, "WORKFLOW_NVLINK5_ERR",
     "an NVLink error; every subcode is non-fatal (IGNORE)"},
    {"nvidia", kClassXid, 148, "NVLink NVLPW_CTRL error", kW, kActionNone, "WORKFLOW_NVLINK5_ERR",
     "an NVLink error; every subcode is non-fatal (IGNORE)"},
    {"nvidia", kClassXid, 149, "NVLink NETIR error", kC, kActionResetDevice, "WORKFLOW_NVLINK5_ERR",
     "a link-fatal NVLink error (every subcode: RESET_GPU)"},
    {"nvidia", kClassXid, 150, "NVLink MSE error", kC, kActionResetDevice, "WORKFLOW_NVLINK5_ERR",
     "an NVLink error; by subcode, the fatal ones need a GPU reset (taken as fatal)"},
    {"nvidia", kClassXid, 151, "key rotation error", kC, kActionRebootNode, "RESTART_VM",
     "confidential computing key rotation failed"},
    {"nvidia", kClassXid, 154, "GPU recovery action changed", kW, kActionNone, "XID_154",
     "names the recovery another XID needs (in its message): act on that XID"},
    {"nvidia", kClassXid, 155, "NVLink SW defined error", kC, kActionResetDevice, "RESET_GPU",
     "a link went down intentionally (e.g. to sleep)"},
    {"nvidia", kClassXid, 156, "resource retirement event", kC, kActionResetDevice, "RESET_GPU",
     "a resource was retired; a reset applies it"},
    {"nvidia", kClassXid, 157, "resource retirement failure", kW, kActionNone, "IGNORE",
     "no spare resources left to retire: the same XID may come back"},
    {"nvidia", kClassXid, 158, "GPU fatal timeout", kC, kActionResetDevice, "RESET_GPU",
     "a fatal timeout in the GPU"},

    {"nvidia", kClassEccUncorrected, 0, "uncorrectable (double-bit) ECC error", kC,
     kActionResetDevice, "WORKFLOW_XID_48",
     "uncorrectable memory errors; a GPU reset applies the pending row remaps"},
    {"nvidia", kClassEccCorrected, 0, "high corrected ECC error rate", kW, kActionNone,
     "IGNORE (XID 92)", "corrected errors at a high rate: the memory is wearing"},
    {"nvidia", kClassRowRemapFailure, 0, "row remapping failure", kC, kActionDrainNode,
     "RESET_GPU, then CONTACT_SUPPORT (XID 64)",
     "no spare row left for a failing memory row: the memory cannot be repaired in the field"},
    {"amd", kClassEccUncorrected, 0, "UMC uncorrectable ECC error", kC, kActionResetDevice,
     "amdgpu RAS: page retired, GPU reset",
     "uncorrectable HBM errors (RAS umc_err_count); bad pages over the threshold need an RMA"},
    {"amd", kClassEccCorrected, 0, "high UMC corrected ECC error rate", kW, kActionNone,
     "amdgpu RAS: corrected", "corrected HBM errors at a high rate: the memory is wearing"},
};

}  // namespace

std::span<const std::string_view> Actions() { return kActions; }

bool IsAction(std::string_view action) {
  return std::find(kActions.begin(), kActions.end(), action) != kActions.end();
}

std::span<const CatalogEntry> ErrorCatalog() { return kCatalog; }

const CatalogEntry* FindXid(uint64_t xid) {
  for (const CatalogEntry& e : kCatalog) {
    if (e.error_class == kClassXid && e.code == xid) return &e;
  }
  return nullptr;
}

const CatalogEntry* FindErrorClass(std::string_view vendor, std::string_view error_class) {
  for (const CatalogEntry& e : kCatalog) {
    if (e.vendor == vendor && e.error_class == error_class) return &e;
  }
  return nullptr;
}

std::string ErrorCatalogMarkdown() {
  std::string out =
      "| vendor | class | code | name | severity | action | vendor's catalogue | meaning |\n"
      "| --- | --- | --- | --- | --- | --- | --- | --- |\n";
  for (const CatalogEntry& e : kCatalog) {
    out += "| " + std::string(e.vendor) + " | " + std::string(e.error_class) + " | " +
           (e.error_class == kClassXid ? std::to_string(e.code) : std::string()) + " | " +
           std::string(e.name) + " | " + std::string(e.severity) + " | `" + std::string(e.action) +
           "` | " + std::string(e.vendor_action) + " | " + std::string(e.meaning) + " |\n";
  }
  return out;
}

}  // namespace accelmon::diagnostics
