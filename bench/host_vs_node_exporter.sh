#!/usr/bin/env bash
# Host collection cost, accelmon against Debian's node_exporter, in the same run, over the SAME
# fixture root (tests/fixtures/host) and the equivalent collectors. Prints a Markdown table.
#   bench/host_vs_node_exporter.sh BUILD_DIR [SCRAPES]
# CPU is read from /proc/PID/stat (utime+stime, clock ticks) around a fixed number of scrapes or
# collection cycles, so it counts only the measured process, not curl or the exporter.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
build=${1:-build}
scrapes=${2:-1000}
accelmon=$build/accelmon
need_binary "$accelmon" "$build/bench/host_collectors_bench"
root=$(cd "$(dirname "$0")/../tests/fixtures/host" && pwd)

# --- node_exporter: CPU per scrape --------------------------------------------------------------
port=$(free_port)
start_node_exporter "$root" "$port" "$work/ne.log"
ne=$!
pids+=("$ne")
wait_for_http --pid "$ne" --log "$work/ne.log" 30 "http://127.0.0.1:$port/metrics"
for _ in $(seq 50); do curl -fs "127.0.0.1:$port/metrics" >/dev/null; done # warm up
before=$(cpu_ticks "$ne")
for _ in $(seq "$scrapes"); do curl -fs "127.0.0.1:$port/metrics" >/dev/null; done
after=$(cpu_ticks "$ne")
ne_us=$(awk -v t=$((after - before)) -v hz="$hz" -v n="$scrapes" 'BEGIN { printf "%.0f", t / hz / n * 1e6 }')
ne_series=$(curl -fs "127.0.0.1:$port/metrics" | grep -Ec '^node_(memory|vmstat|pressure|buddyinfo|network|infiniband|thermal|hwmon)_')

# --- accelmon agent process: CPU per collection cycle, streaming to a real exporter ------------
# The agent reports every 10 ms (100/s): lift the exporter's per-stream limit (50/s by default),
# or half the reports would wait and the CPU per ingested report would read double.
exporter_max_reports=1000 start_exporter exporter
"$accelmon" agent --exporter.address "127.0.0.1:$grpc_port" --node.name bench \
  --path.procfs "$root/proc" --path.sysfs "$root/sys" --collect.interval 10ms >"$work/agent.log" 2>&1 &
agent=$!
pids+=("$agent")
ingested() { curl -fs "127.0.0.1:$web_port/metrics" | awk '/^accelmon_exporter_reports_ingested_total/ {print $2}'; }
sleep 2 # warm up
c0=$(cpu_ticks "$agent"); r0=$(ingested)
sleep 10
c1=$(cpu_ticks "$agent"); r1=$(ingested)
agent_us=$(awk -v t=$((c1 - c0)) -v hz="$hz" -v n="$(awk -v a="$r0" -v b="$r1" 'BEGIN{print b-a}')" \
  'BEGIN { printf "%.0f", t / hz / n * 1e6 }')
agent_series=$(curl -fs "127.0.0.1:$web_port/metrics" | grep -c '^accelmon_host_')

# --- accelmon in-process (Google Benchmark) -----------------------------------------------------
"$build/bench/host_collectors_bench" --benchmark_format=csv --benchmark_min_time=2 2>/dev/null >"$work/gb.csv"
gb() { awk -F, -v n="\"$1\"" '$1 == n { printf "%.0f", $4 / 1000 }' "$work/gb.csv"; } # cpu_time ns -> us
collect_us=$(gb BM_HostCollectionCycle/process_time/real_time)
render_us=$(gb BM_HostCollectRenderSerialize/process_time/real_time)

cat <<TABLE
| what (same fixture root, same run) | CPU per cycle | series | vs node_exporter |
| --- | --- | --- | --- |
| node_exporter $(prometheus-node-exporter --version 2>&1 | awk 'NR == 1 {print $3}'), one scrape of 9 collectors | ${ne_us} µs | ${ne_series} | 1× |
| accelmon agent process, one tick (collect + encode + gRPC send + ack) | ${agent_us} µs | ${agent_series} | $(awk -v a="$ne_us" -v b="$agent_us" 'BEGIN { printf "%.1f× less", a / b }') |
| accelmon collectors only, in-process (\`BM_HostCollectionCycle\`) | ${collect_us} µs | | $(awk -v a="$ne_us" -v b="$collect_us" 'BEGIN { printf "%.1f× less", a / b }') |
| accelmon collect + render + text-serialise (\`BM_HostCollectRenderSerialize\`) | ${render_us} µs | | $(awk -v a="$ne_us" -v b="$render_us" 'BEGIN { printf "%.1f× less", a / b }') |
TABLE
