#!/usr/bin/env bash
# Ingest, latency, scale and agent cost, in one run (issue 10). Prints Markdown tables.
#   bench/ingest_vs_echo.sh BUILD_DIR
# 1. Saturation: `accelmon loadgen --interval 0` (8 devices x 18 links, ~3.3 KB reports) against
#    the bare gRPC echo server of the same Ingest.Stream (bench/grpc_echo_server.cc), then
#    `accelmon exporter`, then `accelmon exporter --record.dir`. Server CPU is utime+stime from
#    /proc/PID/stat over the middle of the run, so it counts the server alone, not the loadgen.
# 2. Fleets at 1 Hz (100, 1000, 4000 nodes x 8 simulated devices) against a fresh exporter
#    each: ack latency, exporter CPU and RSS, series in a scrape, and bytes per series (RSS
#    growth over the idle exporter, divided by the series).
# 3. The agent at its default 1 Hz (`--sim 8` and the host collectors over tests/fixtures/host)
#    against an exporter, and node_exporter over the same fixture scraped once a second beside
#    it: CPU (millicores, from the nanosecond run time of every thread in /proc/PID/task/*/schedstat:
#    the tick-sampled utime+stime misses most of a process that wakes for a millisecond a
#    second) and RSS.
# The loadgen shares the machine with the server it measures; the ratio to the echo server is
# taken under the same sharing. Environment overrides: SAT_SECONDS, SAT_NODES, SAT_IN_FLIGHT,
# FLEET_SECONDS, FLEET_SIZES, UPTIME_SECONDS, AGENT_SECONDS.
# 2b. After an hour of reports: 100 nodes at 10 Hz for UPTIME_SECONDS (default 360: 3600 reports a
#    node, an hour's worth at 1 Hz), memory per series as in 2. Rules that keep a trailing window
#    of samples fill it here, not in 2's 20 s. Skipped with the fleets, or with UPTIME_SECONDS=0.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
build=${1:-build}
sat_seconds=${SAT_SECONDS:-10}
sat_nodes=${SAT_NODES:-32}
sat_in_flight=${SAT_IN_FLIGHT:-64}
fleet_seconds=${FLEET_SECONDS:-20}
fleet_sizes=${FLEET_SIZES-100 1000 4000}
uptime_seconds=${UPTIME_SECONDS:-360}
agent_seconds=${AGENT_SECONDS:-30}
accelmon=$build/accelmon
need_binary "$accelmon" "$build/bench/grpc_echo_server"
root=$(cd "$(dirname "$0")/../tests/fixtures/host" && pwd)
# saturate NAME PID PORT: loadgen at full speed against PORT; server PID's CPU over the middle.
# Prints "reports/s device-samples/s server-cores loadgen-cores".
saturate() {
  local name=$1 pid=$2 port=$3
  "$accelmon" loadgen --exporter.address "127.0.0.1:$port" --nodes "$sat_nodes" --devices 8 \
    --links-per-device 18 --interval 0 --max-in-flight "$sat_in_flight" \
    --duration "${sat_seconds}s" >"$work/$name.out" 2>"$work/$name.err" &
  local lg=$!
  sleep 1
  local c0 t0 c1 t1
  c0=$(cpu_ticks "$pid")
  t0=$(now)
  sleep $((sat_seconds - 2))
  c1=$(cpu_ticks "$pid")
  t1=$(now)
  wait "$lg" || { cat "$work/$name.out" "$work/$name.err" >&2; return 1; }
  local rate samples lg_cores
  rate=$(awk '/^rate:/ {print $2}' "$work/$name.out")
  samples=$(awk '/^rate:/ {print $4}' "$work/$name.out")
  lg_cores=$(awk '/^loadgen cpu:/ {print $3}' "$work/$name.out")
  echo "$rate $samples $(calc %.3f "($c1 - $c0) / $hz / ($t1 - $t0)") $lg_cores"
}

# --- 1. saturation: echo server, exporter, exporter recording -------------------------------------
"$build/bench/grpc_echo_server" 127.0.0.1:0 >"$work/echo.log" 2>&1 &
echo_pid=$!
pids+=("$echo_pid")
echo_port=$(nth_port "$(wait_for_log --pid "$echo_pid" 30 "$work/echo.log" 'listening on port [0-9]+')" 1)
result=$(saturate echo "$echo_pid" "$echo_port")
read -r echo_rate echo_samples echo_cores echo_lg <<<"$result"
stop "$echo_pid"

start_exporter exporter
result=$(saturate exporter "$exporter_pid" "$grpc_port")
read -r exp_rate exp_samples exp_cores exp_lg <<<"$result"
stop "$exporter_pid"

start_exporter exporter-rec --record.dir "$work/recording"
result=$(saturate exporter-rec "$exporter_pid" "$grpc_port")
read -r rec_rate rec_samples rec_cores rec_lg <<<"$result"
stop "$exporter_pid"

bytes=$(grep -Eo '[0-9]+-byte reports' "$work/echo.out" | grep -Eo '[0-9]+')
record_result echo_reports_per_second "$echo_rate"
record_result exporter_reports_per_second "$exp_rate"
record_result exporter_samples_per_core "$(calc %.0f "$exp_samples / ($exp_cores > 0 ? $exp_cores : 1)")"
record_result recording_reports_per_second "$rec_rate"
record_result echo_cpu_us_per_report "$(calc %.2f "1e6 * $echo_cores / $echo_rate")"
record_result exporter_cpu_us_per_report "$(calc %.2f "1e6 * $exp_cores / $exp_rate")"
per_core() { calc %.0f "$1 / ($2 > 0 ? $2 : 1)"; }
echo "### Ingest at saturation: ${sat_nodes} streams x ${sat_in_flight} in flight, 8 devices x 18 links (${bytes}-byte reports), ${sat_seconds} s each"
echo
echo "| server (same run) | reports/s | device-samples/s | server CPU (cores) | device-samples/s per server core | loadgen CPU (cores) | reports/s vs echo |"
echo "| --- | --- | --- | --- | --- | --- | --- |"
echo "| bare gRPC echo (\`bench/grpc_echo_server\`) | $echo_rate | $echo_samples | $echo_cores | $(per_core "$echo_samples" "$echo_cores") | $echo_lg | 100% |"
echo "| \`accelmon exporter\` (parse, validate, apply) | $exp_rate | $exp_samples | $exp_cores | $(per_core "$exp_samples" "$exp_cores") | $exp_lg | $(calc %.0f%% "100 * $exp_rate / $echo_rate") |"
echo "| \`accelmon exporter --record.dir\` (+ record, ack after group commit) | $rec_rate | $rec_samples | $rec_cores | $(per_core "$rec_samples" "$rec_cores") | $rec_lg | $(calc %.0f%% "100 * $rec_rate / $echo_rate") |"
echo

# --- 2. fleets at 1 Hz: latency, CPU, memory ------------------------------------------------------
if [ -n "${fleet_sizes// /}" ]; then # FLEET_SIZES="" skips the fleets (bench/goals.sh)
  echo "### Fleets at 1 Hz: 8 simulated devices per node, ${fleet_seconds} s each, a fresh exporter per size"
  echo
  echo "| nodes | reports/s | ack p50 | ack p99 | ack max | exporter CPU (millicores) | exporter RSS (MiB) | series | bytes per series | one scrape | loadgen CPU (cores) |"
  echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
  for nodes in $fleet_sizes; do
    start_exporter "fleet-$nodes"
    sleep 0.5
    idle_kib=$(rss_kib "$exporter_pid")
    "$accelmon" loadgen --exporter.address "127.0.0.1:$grpc_port" --nodes "$nodes" --devices 8 \
      --interval 1s --duration "${fleet_seconds}s" >"$work/fleet-$nodes.out" 2>"$work/fleet-$nodes.err" &
    lg=$!
    sleep 5 # every node has reported at least once; the state is at full size
    c0=$(cpu_ticks "$exporter_pid")
    t0=$(now)
    sleep $((fleet_seconds - 6))
    c1=$(cpu_ticks "$exporter_pid")
    t1=$(now)
    kib=$(rss_kib "$exporter_pid")
    wait "$lg" || { cat "$work/fleet-$nodes.out" "$work/fleet-$nodes.err" >&2; exit 1; }
    # After the load, so that the scrape does not compete with it for the CPU; nodes stay for
    # --node.expire-after (10 minutes).
    scrape_s=$(curl -fs -o "$work/scrape.txt" -w '%{time_total}' "127.0.0.1:$web_port/metrics")
    series=$(grep -vc '^#' "$work/scrape.txt")
    out=$work/fleet-$nodes.out
    rate=$(awk '/^rate:/ {print $2}' "$out")
    p50=$(awk '/^ack latency:/ {print $4}' "$out")
    p99=$(awk '/^ack latency:/ {print $10}' "$out")
    max=$(awk '/^ack latency:/ {print $13}' "$out")
    lg_cores=$(awk '/^loadgen cpu:/ {print $3}' "$out")
    millicores=$(calc %.1f "($c1 - $c0) / $hz / ($t1 - $t0) * 1000")
    record_result "fleet_${nodes}_p99_ms" "$p99"
    echo "| $nodes | $rate | $p50 ms | $p99 ms | $max ms | $millicores | $(calc %.1f "$kib / 1024") | $series | $(calc %.0f "($kib - $idle_kib) * 1024 / $series") | $(calc %.2f "$scrape_s") s | $lg_cores |"
    stop "$exporter_pid"
  done
  echo
  echo "The exporter acknowledges a report after applying it, and a scrape reads the applied state:"
  echo "ack latency bounds the time from a report's send to its values being visible in /metrics."
  echo
  if [ "$uptime_seconds" -gt 0 ]; then
    start_exporter uptime
    sleep 0.5
    idle_kib=$(rss_kib "$exporter_pid")
    "$accelmon" loadgen --exporter.address "127.0.0.1:$grpc_port" --nodes 100 --devices 8 \
      --interval 100ms --duration "${uptime_seconds}s" >"$work/uptime.out" 2>"$work/uptime.err" ||
      { cat "$work/uptime.out" "$work/uptime.err" >&2; exit 1; }
    kib=$(rss_kib "$exporter_pid")
    curl -fs -o "$work/scrape.txt" "127.0.0.1:$web_port/metrics"
    series=$(grep -vc '^#' "$work/scrape.txt")
    reports=$(awk '/^reports:/ {print $2}' "$work/uptime.out")
    echo "### Uptime: 100 nodes x 8 devices at 10 Hz for ${uptime_seconds} s ($((reports / 100)) reports a node; 3600 are an hour at 1 Hz)"
    echo
    echo "| nodes | reports a node | exporter RSS (MiB) | series | bytes per series |"
    echo "| --- | --- | --- | --- | --- |"
    echo "| 100 | $((reports / 100)) | $(calc %.1f "$kib / 1024") | $series | $(calc %.0f "($kib - $idle_kib) * 1024 / $series") |"
    echo
    stop "$exporter_pid"
  fi
fi

# --- 3. the agent at 1 Hz, node_exporter scraped at 1 Hz beside it ---------------------------------
# agent_beside_node_exporter NAME ROOT [AGENT FLAGS...]: both over ROOT's proc and sys (ROOT empty:
# this host's own) for $agent_seconds; sets agent_mc, ne_mc, agent_mib, ne_mib.
agent_beside_node_exporter() {
  local name=$1 root=$2
  shift 2
  "$accelmon" agent --exporter.address "127.0.0.1:$grpc_port" --node.name "bench-$name" \
    --path.procfs "${root:-}/proc" --path.sysfs "${root:-}/sys" --collect.interval 1s \
    --push.socket "" "$@" >"$work/agent-$name.log" 2>&1 &
  local agent=$!
  pids+=("$agent")
  local ne_port
  ne_port=$(free_port)
  start_node_exporter "$root" "$ne_port" "$work/ne-$name.log"
  local ne=$!
  pids+=("$ne")
  sleep 3 # warm up: first collections, connections
  local a0 n0 t0 a1 n1 t1
  a0=$(cpu_ns "$agent")
  n0=$(cpu_ns "$ne")
  t0=$(now)
  for _ in $(seq "$agent_seconds"); do
    curl -fs "127.0.0.1:$ne_port/metrics" >/dev/null || true
    sleep 1
  done
  a1=$(cpu_ns "$agent")
  n1=$(cpu_ns "$ne")
  t1=$(now)
  agent_mc=$(calc %.2f "($a1 - $a0) / 1e6 / ($t1 - $t0)")
  ne_mc=$(calc %.2f "($n1 - $n0) / 1e6 / ($t1 - $t0)")
  agent_mib=$(calc %.1f "$(rss_kib "$agent") / 1024")
  ne_mib=$(calc %.1f "$(rss_kib "$ne") / 1024")
  stop "$agent"
  stop "$ne"
}

start_exporter agent-exporter
echo "### Agent at 1 Hz beside node_exporter (9 host collectors, scraped once a second), ${agent_seconds} s each"
echo
echo "| what both read | accelmon agent CPU (millicores) | node_exporter CPU (millicores) | agent less by | agent RSS (MiB) | node_exporter RSS (MiB) |"
echo "| --- | --- | --- | --- | --- | --- |"
agent_row() { echo "| $1 | $agent_mc | $ne_mc | $(calc %.1f× "$ne_mc / ($agent_mc > 0 ? $agent_mc : 1)") | $agent_mib | $ne_mib |"; }
agent_beside_node_exporter fixture-sim "$root" --sim 8
agent_row "tests/fixtures/host; the agent also simulates 8 devices"
record_result agent_sim_millicores "$agent_mc"
agent_beside_node_exporter fixture "$root"
agent_row "tests/fixtures/host, host collectors only (the same host work)"
record_result agent_millicores "$agent_mc"
record_result node_exporter_millicores "$ne_mc"
agent_beside_node_exporter host ""
agent_row "this host's /proc and /sys, host collectors only"
record_result agent_real_millicores "$agent_mc"
record_result node_exporter_real_millicores "$ne_mc"
