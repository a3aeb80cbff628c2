#!/usr/bin/env bash
# Against what a user would run instead (issue 39, goal 3): the same fleet's samples pushed into
# VictoriaMetrics (Debian's victoria-metrics) by Prometheus remote write, protobuf + snappy as
# Prometheus and vmagent send it (bench/remote_write_load.cc). Prints a Markdown table and records
# VictoriaMetrics' device-samples per second per core for bench/goals.py, beside the exporter's
# (bench/ingest_vs_echo.sh's saturation run, same goals run).
#   bench/ingest_vs_vm.sh BUILD_DIR
# The fleet is the saturation run's: 32 loadgen nodes x 8 devices x 18 links, its series as an
# exporter serves them (a scrape after a few reports). One node's series are one WriteRequest, as
# one scrape of that node would be; a device-sample is one device's series at one time, as in
# the exporter's count (one report = 8 device-samples). VictoriaMetrics' CPU is utime+stime over
# the middle of the run; its background merges after the run are not counted (in its favour).
# Environment: VM_SECONDS (default 10), VM_CONNECTIONS (4).
set -euo pipefail
build=${1:-build}
seconds=${VM_SECONDS:-10}
connections=${VM_CONNECTIONS:-4}
accelmon=$build/accelmon
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
need_binary "$accelmon" "$build/bench/remote_write_load"
# The fleet's series, as the exporter serves them.
start_exporter fleet --no-diagnostics
"$accelmon" loadgen --exporter.address "127.0.0.1:$grpc_port" --nodes 32 --devices 8 \
  --links-per-device 18 --interval 1s --duration 3s >"$work/loadgen.out" 2>&1
curl -fsS -o "$work/fleet.txt" "127.0.0.1:$web_port/metrics"
stop "$exporter_pid"

vm_port=$(free_port)
victoria-metrics -storageDataPath "$work/vm" -httpListenAddr "127.0.0.1:$vm_port" \
  -retentionPeriod 10y -loggerLevel ERROR >"$work/vm.log" 2>&1 &
vm=$!
pids+=("$vm")
wait_for_http --pid "$vm" --log "$work/vm.log" 30 "http://127.0.0.1:$vm_port/health"

"$build/bench/remote_write_load" "$work/fleet.txt" "127.0.0.1:$vm_port" "$seconds" "$connections" \
  >"$work/load.out" 2>"$work/load.err" &
load=$!
sleep 1
c0=$(cpu_ticks "$vm")
t0=$(now)
sleep $((seconds - 2))
c1=$(cpu_ticks "$vm")
t1=$(now)
wait "$load" || { cat "$work/load.err" >&2; exit 1; }
value() { awk -v k="$1" '$1 == k { print $2 }' "$work/load.out"; }
nodes=$(value nodes)
devices=$(value devices)
series=$(value series)
requests=$(value requests)
samples=$(value samples)
errors=$(value errors)
elapsed=$(value seconds)
vm_cores=$(calc %.3f "($c1 - $c0) / $hz / ($t1 - $t0)")
# Rows VictoriaMetrics says it took, to check that nothing was dropped on the way.
rows=$(curl -fs "127.0.0.1:$vm_port/metrics" | awk '/^vm_rows_inserted_total\{type="promremotewrite"\}/ { print $2 }')
device_samples_per_s=$(calc %.0f "$requests * $devices / $nodes / $elapsed")
per_core=$(calc %.0f "$device_samples_per_s / ($vm_cores > 0 ? $vm_cores : 1)")
record_result vm_device_samples_per_core "$per_core"
echo "### VictoriaMetrics $(dpkg-query -W -f='${Version}' victoria-metrics) by remote write: the saturation run's fleet ($nodes nodes, $devices devices, $series series), ${seconds} s"
echo
echo "| requests/s | samples/s | device-samples/s | VictoriaMetrics CPU (cores) | device-samples/s per VM core | rows VM counted | errors |"
echo "| --- | --- | --- | --- | --- | --- | --- |"
echo "| $(calc %.0f "$requests / $elapsed") | $(calc %.0f "$samples / $elapsed") | $device_samples_per_s | $vm_cores | $per_core | ${rows:-?} of $samples | $errors |"
echo
