#!/usr/bin/env bash
# 1000 slow clients (a header byte a second, reconnecting when cut off) against /metrics, while
# 50 scrapes are timed: the slowest says whether a scrape still gets through. Side by side in one
# run: the exporter as shipped (civetweb, a thread per connection, --web.max-connections 1024),
# with 2048, with the old default of 256 threads (10 scrapes only: each waits up to the 10 s
# --web.read-timeout), and node_exporter (Go's net/http on its netpoller: an event-loop server,
# as a peer runs it).
#   bench/slow_clients.sh [BUILD_DIR] [CLIENTS]
set -euo pipefail
BUILD=${1:-build}
CLIENTS=${2:-1000}
ACCELMON=$BUILD/accelmon
SLOW=(python3 "$(dirname "$0")/../tests/e2e/slow_clients.py")
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
need_binary "$ACCELMON"
ulimit -n 8192
rss_mib() { calc %.1f "$(rss_kib "$1") / 1024"; }
threads() { awk '/^Threads/ { print $2 }' "/proc/$1/status"; }

# run NAME PID URL EXPECT SCRAPES: the slow clients and the scrapes; one table row.
run() {
  local name=$1 pid=$2 url=$3 expect=$4 scrapes=$5 out
  out=$("${SLOW[@]}" "$url" --clients "$CLIENTS" --scrapes "$scrapes" --expect "$expect" \
    --max-scrape-seconds 1 --connect-seconds 60 2>&1) || true
  local line=${out%%$'\n'*} slowest failed
  slowest=$(grep -Eo 'slowest [0-9.]+s' <<<"$out" | grep -Eo '[0-9.]+' || echo "?")
  failed=$(grep -Eo '[0-9]+ failed' <<<"$out" | grep -Eo '[0-9]+' || echo "?")
  printf '| %s | %s | %s | %s | %s MiB | %s |\n' "$name" "$slowest" "$failed" \
    "$(threads "$pid")" "$(rss_mib "$pid")" "$line"
}

echo "| server | slowest scrape (s) | failures (over 1 s, errors) | threads | RSS | slow_clients.py |"
echo "| --- | --- | --- | --- | --- | --- |"
for threads_flag in 1024 2048 256; do
  port=$(free_port)
  args=(exporter --web.listen-address "127.0.0.1:$port" --grpc.listen-address 127.0.0.1:0)
  args+=(--web.max-connections "$threads_flag")
  "$ACCELMON" "${args[@]}" >"$work/exporter.log" 2>&1 &
  pid=$!
  pids+=("$pid")
  wait_for_http --pid "$pid" --log "$work/exporter.log" 20 "http://127.0.0.1:$port/metrics"
  label="accelmon exporter (civetweb, --web.max-connections $threads_flag)"
  run "$label" "$pid" "http://127.0.0.1:$port/metrics" accelmon_exporter_ \
    "$([ "$threads_flag" = 256 ] && echo 10 || echo 50)"
  stop "$pid"
done
port=$(free_port)
start_node_exporter "$(dirname "$0")/../tests/fixtures/host" "$port" "$work/node_exporter.log"
pid=$!
pids+=("$pid")
wait_for_http --pid "$pid" --log "$work/node_exporter.log" 20 "http://127.0.0.1:$port/metrics"
ne_version=$(prometheus-node-exporter --version 2>&1)
run "node_exporter $(grep -Eo -m 1 'version [0-9.]+' <<<"$ne_version") (Go net/http)" \
  "$pid" "http://127.0.0.1:$port/metrics" node_ 50
