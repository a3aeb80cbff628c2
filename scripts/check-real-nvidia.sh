#!/usr/bin/env bash
# Checks accelmon's NVIDIA values against nvidia-smi on a machine with NVIDIA GPUs: starts
# `accelmon standalone`, waits for its second collection (GPM activity needs two), scrapes
# /metrics, runs `nvidia-smi -q -x`, and prints one table row per GPU and value: what accelmon
# says, what nvidia-smi says, and whether they agree (exactly for identity and counts, within a
# tolerance for what moves between the two reads). Values neither side reports are "absent" on
# both and agree; one side only is a mismatch.
#
#   scripts/check-real-nvidia.sh                 # build/accelmon, the system's NVML and nvidia-smi
#   ACCELMON=/usr/bin/accelmon scripts/check-real-nvidia.sh
#
# Environment: ACCELMON (the binary; default build/accelmon), NVIDIA_SMI (default nvidia-smi),
# NVML_LIBRARY (passed as --nvml.library; default the system's libnvidia-ml.so.1).
# Exit: 0 every row agrees, 1 a row disagrees, 2 cannot run (no binary, no nvidia-smi, no GPU).
# tests/e2e/check_real_nvidia_test.sh runs it over the test NVML library and recorded
# nvidia-smi output; the table of a run on real hardware belongs in docs/devices.md.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
accelmon=${ACCELMON:-$repo/build/accelmon}
smi=${NVIDIA_SMI:-nvidia-smi}

die() {
  echo "check-real-nvidia: $*" >&2
  exit 2
}
[ -x "$accelmon" ] || die "no accelmon binary at $accelmon (build it, or set ACCELMON)"
command -v "$smi" >/dev/null || die "no $smi on PATH (set NVIDIA_SMI)"
command -v curl >/dev/null || die "curl is needed"

work=$(mktemp -d)
pid=""
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

args=(standalone --node.name check --collect.interval 1s --web.listen-address 127.0.0.1:0
  --push.socket "" --no-collector.processes)
[ -n "${NVML_LIBRARY:-}" ] && args+=(--nvml.library "$NVML_LIBRARY")
"$accelmon" "${args[@]}" >"$work/out" 2>"$work/log" &
pid=$!

url=""
for _ in $(seq 150); do
  url=$(grep -o 'http://[^ ]*/metrics' "$work/out" 2>/dev/null || true)
  [ -n "$url" ] && break
  kill -0 "$pid" 2>/dev/null || { cat "$work/log" >&2; die "accelmon standalone exited"; }
  sleep 0.1
done
[ -n "$url" ] || die "accelmon standalone did not start within 15 s (log: $(tail -1 "$work/log"))"
grep -q "NVIDIA collection on" "$work/log" ||
  die "accelmon found no NVIDIA GPU: $(grep -o 'NVIDIA collection off.*' "$work/log" || echo '?')"

# Two collections: the second carries GPM activity where the GPUs have it.
for _ in $(seq 100); do
  curl -fsS "$url" >"$work/metrics.txt" || true
  reports=$(grep -c '^accelmon_device_info{' "$work/metrics.txt" || true)
  if [ "$reports" -gt 0 ] && grep -q '^accelmon_agent_collector_success{.*collector="nvml"} 1' \
    "$work/metrics.txt"; then
    sleep 1.2
    curl -fsS "$url" >"$work/metrics.txt"
    break
  fi
  sleep 0.1
done
"$smi" -q -x >"$work/smi.xml" || die "$smi -q -x failed"

rc=0
/usr/bin/python3 - "$work/metrics.txt" "$work/smi.xml" <<'PY' || rc=$?
import re
import sys
import xml.etree.ElementTree as ET

metrics_path, smi_path = sys.argv[1], sys.argv[2]
SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)\{(.*)\}\s+(\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')

series = []  # (name, labels, value)
with open(metrics_path) as f:
    for line in f:
        m = SAMPLE.match(line.strip())
        if m:
            series.append((m.group(1), dict(LABEL.findall(m.group(2))), float(m.group(3))))


def ours(uuid, name, **want):
    for n, labels, value in series:
        if n == name and labels.get("uuid") == uuid and all(labels.get(k) == v for k, v in want.items()):
            return value
    return None


def info(uuid, label):
    for n, labels, _ in series:
        if n == "accelmon_device_info" and labels.get("uuid") == uuid:
            return labels.get(label)
    return None


def text(gpu, path):
    node = gpu.find(path)
    if node is None or node.text is None:
        return None
    t = node.text.strip()
    return None if t in ("", "N/A", "[N/A]", "Not Supported", "[Not Supported]") else t


def number(gpu, *paths):
    """The first of `paths` nvidia-smi reports, without its unit ("81559 MiB" -> 81559)."""
    for path in paths:
        t = text(gpu, path)
        if t is not None:
            m = re.match(r'^(-?[0-9.]+)', t)
            if m:
                return float(m.group(1))
    return None


rows = []  # (gpu, what, accelmon, nvidia-smi, verdict)


def compare(gpu, what, mine, theirs, tolerance=0.0, relative=False):
    if mine is None and theirs is None:
        rows.append((gpu, what, "absent", "absent", "ok"))
        return
    if mine is None or theirs is None:
        rows.append((gpu, what, "absent" if mine is None else fmt(mine),
                     "absent" if theirs is None else fmt(theirs), "MISMATCH"))
        return
    if isinstance(mine, str) or isinstance(theirs, str):
        ok = str(mine) == str(theirs)
    else:
        allowed = tolerance * abs(theirs) if relative else tolerance
        ok = abs(mine - theirs) <= allowed + 1e-9
    verdict = "ok" if ok else "MISMATCH"
    if ok and tolerance and not isinstance(mine, str) and mine != theirs:
        verdict = "ok (within %s%s)" % (fmt(tolerance * 100) if relative else fmt(tolerance),
                                         " %" if relative else "")
    rows.append((gpu, what, fmt(mine), fmt(theirs), verdict))


def fmt(v):
    if isinstance(v, float):
        return ("%.0f" % v) if v == int(v) else ("%.6g" % v)
    return str(v)


MIB = 1024.0 * 1024.0
smi = ET.parse(smi_path).getroot()
driver = text(smi, "driver_version")
gpus = smi.findall("gpu")
if not gpus:
    print("check-real-nvidia: nvidia-smi lists no GPU", file=sys.stderr)
    sys.exit(2)
for gpu in gpus:
    uuid = text(gpu, "uuid")
    device = None
    for n, labels, _ in series:
        if n == "accelmon_device_info" and labels.get("uuid") == uuid:
            device = labels.get("device")
    name = "GPU %s" % (device if device is not None else uuid)
    if device is None:
        rows.append((name, "present in accelmon", "absent", uuid, "MISMATCH"))
        continue
    compare(name, "model", info(uuid, "model"), text(gpu, "product_name"))
    compare(name, "driver", info(uuid, "driver"), driver)
    compare(name, "vbios", info(uuid, "firmware"), text(gpu, "vbios_version"))
    bus = text(gpu, "pci/pci_bus_id")
    if bus:  # nvidia-smi: 00000000:18:00.0; accelmon: 0000:18:00.0, lower case
        bus = (bus[-12:] if len(bus) > 12 else bus).lower()
    compare(name, "PCI bus id", info(uuid, "pci_bus_id"), bus)
    total = ours(uuid, "accelmon_device_memory_total_bytes")
    compare(name, "memory total (MiB)", None if total is None else float(int(total // MIB)),
            number(gpu, "fb_memory_usage/total"))
    used = ours(uuid, "accelmon_device_memory_used_bytes")
    compare(name, "memory used (MiB)", None if used is None else float(int(used // MIB)),
            number(gpu, "fb_memory_usage/used"), tolerance=0.02, relative=True)
    compare(name, "temperature (C)", ours(uuid, "accelmon_device_temperature_celsius", sensor="core"),
            number(gpu, "temperature/gpu_temp"), tolerance=3)
    compare(name, "slowdown threshold (C)",
            ours(uuid, "accelmon_device_temperature_threshold_celsius", threshold="slowdown"),
            number(gpu, "temperature/gpu_temp_slow_threshold"))
    compare(name, "shutdown threshold (C)",
            ours(uuid, "accelmon_device_temperature_threshold_celsius", threshold="shutdown"),
            number(gpu, "temperature/gpu_temp_max_threshold"))
    compare(name, "power draw (W)", ours(uuid, "accelmon_device_power_watts"),
            number(gpu, "gpu_power_readings/power_draw", "power_readings/power_draw"),
            tolerance=0.15, relative=True)
    compare(name, "power limit (W)", ours(uuid, "accelmon_device_power_limit_watts"),
            number(gpu, "gpu_power_readings/current_power_limit",
                   "power_readings/enforced_power_limit"), tolerance=0.01, relative=True)
    util = ours(uuid, "accelmon_device_utilization_ratio", kind="compute")
    compare(name, "utilization (%)", None if util is None else util * 100,
            number(gpu, "utilization/gpu_util"), tolerance=15)
    mutil = ours(uuid, "accelmon_device_utilization_ratio", kind="memory_bandwidth")
    compare(name, "memory utilization (%)", None if mutil is None else mutil * 100,
            number(gpu, "utilization/memory_util"), tolerance=15)
    sm = ours(uuid, "accelmon_device_clock_hertz", kind="compute")
    compare(name, "SM clock (MHz)", None if sm is None else sm / 1e6,
            number(gpu, "clocks/sm_clock"), tolerance=0.1, relative=True)
    mem = ours(uuid, "accelmon_device_clock_hertz", kind="memory")
    compare(name, "memory clock (MHz)", None if mem is None else mem / 1e6,
            number(gpu, "clocks/mem_clock"), tolerance=0.1, relative=True)
    pstate = ours(uuid, "accelmon_device_performance_state")
    smi_pstate = text(gpu, "performance_state")
    compare(name, "performance state", None if pstate is None else "P%d" % pstate, smi_pstate)
    persistence = ours(uuid, "accelmon_device_persistence_mode")
    smi_persistence = text(gpu, "persistence_mode")
    compare(name, "persistence mode",
            None if persistence is None else ("Enabled" if persistence == 1 else "Disabled"),
            smi_persistence)
    fan = ours(uuid, "accelmon_device_fan_speed_ratio")
    compare(name, "fan (%)", None if fan is None else fan * 100, number(gpu, "fan_speed"), tolerance=5)
    compare(name, "PCIe replays", ours(uuid, "accelmon_device_link_errors_total", link="pcie", type="replay"),
            number(gpu, "pci/replay_counter"))
    for cause, path in (("correctable", "remapped_rows/remapped_row_corr"),
                        ("uncorrectable", "remapped_rows/remapped_row_unc")):
        compare(name, "remapped rows, %s" % cause,
                ours(uuid, "accelmon_device_remapped_rows", cause=cause), number(gpu, path))
    pending = ours(uuid, "accelmon_device_remapped_rows_pending")
    compare(name, "row remap pending",
            None if pending is None else ("Yes" if pending == 1 else "No"),
            text(gpu, "remapped_rows/remapped_row_pending"))
    for cause, path in (("single_bit", "retired_pages/multiple_single_bit_retirement/retired_count"),
                        ("double_bit", "retired_pages/double_bit_retirement/retired_count")):
        compare(name, "retired pages, %s" % cause,
                ours(uuid, "accelmon_device_retired_pages", cause=cause), number(gpu, path))

    # ECC: totals, and by location. nvidia-smi from R525 on prints SRAM and DRAM (SRAM's
    # uncorrectable split into parity and SEC-DED from R535); before, single/double bit per
    # location with a total.
    ecc = gpu.find("ecc_errors")
    for scope, family in (("volatile", "accelmon_device_ecc_errors_total"),
                          ("aggregate", "accelmon_device_ecc_errors_lifetime_total")):
        section = None if ecc is None else ecc.find(scope)
        by_location = {}  # (location, type) -> count
        if section is not None:
            for location in ("sram", "dram"):
                c = number(section, location + "_correctable")
                u = number(section, location + "_uncorrectable")
                if u is None:
                    parts = [number(section, location + "_uncorrectable_" + k) for k in ("parity", "secded")]
                    u = None if all(p is None for p in parts) else sum(p or 0 for p in parts)
                if c is not None:
                    by_location[(location, "corrected")] = c
                if u is not None:
                    by_location[(location, "uncorrected")] = u
            for old_type, kind in (("single_bit", "corrected"), ("double_bit", "uncorrected")):
                for tag, location in (("device_memory", "dram"), ("register_file", "register_file"),
                                      ("l1_cache", "l1_cache"), ("l2_cache", "l2_cache"),
                                      ("texture_memory", "texture_memory"),
                                      ("texture_shm", "texture_shared"), ("cbu", "cbu")):
                    v = number(section, "%s/%s" % (old_type, tag))
                    if v is not None:
                        by_location[(location, kind)] = v
        for kind in ("corrected", "uncorrected"):
            total = number(section, ("single_bit" if kind == "corrected" else "double_bit") + "/total") \
                if section is not None else None
            if total is None:
                counts = [v for (l, k), v in by_location.items() if k == kind]
                total = sum(counts) if counts else None
            compare(name, "ECC %s %s" % (scope, kind), ours(uuid, family, type=kind), total)
        ours_locations = {labels["location"] for n, labels, _ in series
                          if n == family.replace("errors_", "errors_by_location_") and labels.get("uuid") == uuid}
        for location in sorted(ours_locations | {l for l, _ in by_location}):
            for kind in ("corrected", "uncorrected"):
                compare(name, "ECC %s %s, %s" % (scope, kind, location),
                        ours(uuid, family.replace("errors_", "errors_by_location_"), location=location, type=kind),
                        by_location.get((location, kind)))
    mig = ours(uuid, "accelmon_device_mig_mode")
    compare(name, "MIG mode", None if mig is None else ("Enabled" if mig == 1 else "Disabled"),
            text(gpu, "mig_mode/current_mig"))
    fabric = ours(uuid, "accelmon_device_link_up", link="fabric")
    state, status = text(gpu, "fabric/state"), text(gpu, "fabric/status")
    compare(name, "NVLink fabric registered",
            None if fabric is None else ("Yes" if fabric == 1 else "No"),
            None if state is None else ("Yes" if state == "Completed" and status == "Success" else "No"))

print("| GPU | value | accelmon | nvidia-smi | |")
print("| --- | --- | --- | --- | --- |")
for r in rows:
    print("| %s | %s | %s | %s | %s |" % r)
bad = sum(1 for r in rows if r[4] == "MISMATCH")
print()
print("%d of %d values agree%s" % (len(rows) - bad, len(rows), "" if not bad else "; %d MISMATCH" % bad))
sys.exit(1 if bad else 0)
PY
exit "$rc"
