#!/usr/bin/env bash
# The real binary with every vendor's interface boundary at once: the test-only NVML and DCMI
# libraries through --nvml.library / --dcmi.library (dlopen, as the real ones), and the amdgpu
# sysfs fixture through --path.sysfs. One node, three vendors, one schema.
source "$(dirname "$0")/lib.sh"
FIXTURES=${FIXTURES:?set FIXTURES to tests/fixtures}
FAKE_NVML=${FAKE_NVML:?} FAKE_DCMI=${FAKE_DCMI:?}

FAKE_DCMI_CARDS=8 start standalone standalone --node.name mixed --collect.interval 200ms \
  --web.listen-address 127.0.0.1:0 --nvml.library "$FAKE_NVML" --dcmi.library "$FAKE_DCMI" \
  --path.sysfs "$FIXTURES/amdgpu/sys"
url=$(wait_for_log standalone 'http://[^ ]+/metrics')
for vendor in NVIDIA AMD Ascend; do
  grep -q "$vendor collection on" "$WORK/standalone.log" || fail "$vendor collection not on"
done
wait_for_metric "$url" '^accelmon_device_memory_used_bytes\{.*vendor="huawei"'
curl -fsS "$url" >"$WORK/metrics.txt"

count() { grep -c "^accelmon_device_info{.*vendor=\"$1\"" "$WORK/metrics.txt" || true; }
[ "$(count nvidia)" -eq 2 ] || fail "expected 2 NVIDIA GPUs, got $(count nvidia)"
[ "$(count amd)" -eq 3 ] || fail "expected 3 AMD GPUs, got $(count amd)"
[ "$(count huawei)" -eq 8 ] || fail "expected 8 Ascend NPUs, got $(count huawei)"
for vendor in nvidia amd huawei; do
  for metric in accelmon_device_memory_total_bytes accelmon_device_temperature_celsius \
    accelmon_device_power_watts accelmon_device_utilization_ratio; do
    grep -q "^$metric{.*vendor=\"$vendor\"" "$WORK/metrics.txt" || fail "no $metric for $vendor"
  done
done
grep -q '^accelmon_device_link_up{.*kind="nvlink"' "$WORK/metrics.txt" || fail "no NVLink series"
grep -q '^accelmon_device_link_up{.*kind="roce"' "$WORK/metrics.txt" || fail "no RoCE series"
grep -q '^accelmon_device_link_max_bandwidth_bytes_per_second{.*vendor="amd".*kind="pcie"' \
  "$WORK/metrics.txt" || fail "no AMD PCIe link capacity"
promtool check metrics <"$WORK/metrics.txt" >"$WORK/promtool.log" 2>&1 ||
  fail "promtool: $(cat "$WORK/promtool.log")"
stop standalone
echo "devices_test: ok"
