# shellcheck shell=bash disable=SC2034  # (variables set here are read by the scripts)
# Sourced first by every bench/*.sh: the helpers they share, each written once here.
#   source "$(dirname "$0")/lib.sh"
# - a scratch folder $work, background processes in $pids and extra paths in $scratch, all
#   removed by one EXIT trap (cleanup); stop / stop_ok end one process within a deadline;
# - die MESSAGE [LOG]: fail naming what went wrong, with LOG's last lines;
# - bounded waits: wait_until SECONDS WHAT COMMAND... and its wrappers wait_for_http,
#   wait_for_log, wait_for_output; no bench waits on anything without a deadline;
# - free_port, nth_port; start_exporter (an exporter on ports the kernel picks) and
#   start_node_exporter (the one definition of node_exporter's equivalent collectors);
# - readers of a process's CPU and memory, arithmetic, bytes on disk, promtool's backfill and
#   the TSDB's sizes;
# - record_result KEY VALUE: one measured value for bench/goals.py's table ($BENCH_RESULTS).
# bench/ does not source tests/e2e/lib.sh, whose helpers these follow; the pure text ones
# (first_line, nth_port) both take from scripts/text_helpers.sh.
# The scripts run under `set -euo pipefail`; nothing here pipes into a reader that stops early.

[ -z "${bench_lib_loaded:-}" ] || return 0
bench_lib_loaded=1
# first_line, nth_port
# shellcheck source-path=SCRIPTDIR source=../scripts/text_helpers.sh
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/text_helpers.sh"

hz=$(getconf CLK_TCK)
work=$(mktemp -d "${TMPDIR:-/tmp}/accelmon-bench.XXXXXX")
pids=()
scratch=()

# cleanup (the EXIT trap): SIGTERM to every tracked process, up to 10 s for all to exit,
# SIGKILL to the rest; then $work and every path in $scratch are removed.
cleanup() {
  local p deadline=$((SECONDS + 10))
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do
    while kill -0 "$p" 2>/dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.05; done
    kill -KILL "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
  done
  rm -rf "$work" "${scratch[@]}"
}
trap cleanup EXIT

# die MESSAGE [LOG]: prints "SCRIPT: MESSAGE" and LOG's last 20 lines to stderr; exits 1.
die() {
  echo "$(basename "$0"): $1" >&2
  if [ -n "${2:-}" ] && [ -f "$2" ]; then
    echo "--- last lines of $2:" >&2
    tail -n 20 "$2" >&2
  fi
  exit 1
}

need_binary() { # need_binary PATH...: each an executable file, or exit 2 saying how to build it
  local f
  for f in "$@"; do
    [ -x "$f" ] && continue
    echo "$(basename "$0"): $f is missing: build it first (cmake --build BUILD_DIR --target benchmarks)" >&2
    exit 2
  done
}
need_command() { # need_command NAME...: each on PATH, or die
  local c
  for c in "$@"; do command -v "$c" >/dev/null || die "$c is not on PATH"; done
}

# stop PID [SECONDS]: SIGTERM, up to SECONDS (default 30) for it to exit, then SIGKILL; no longer
# tracked. Its exit status is left in $stop_status (143: it died of the SIGTERM).
stop() {
  local pid=$1 deadline=$((SECONDS + ${2:-30})) p kept=()
  kill -TERM "$pid" 2>/dev/null || true
  while kill -0 "$pid" 2>/dev/null; do
    if [ $SECONDS -ge $deadline ]; then
      echo "$(basename "$0"): process $pid still running ${2:-30}s after SIGTERM: killed" >&2
      kill -KILL "$pid" 2>/dev/null || true
      break
    fi
    sleep 0.05
  done
  stop_status=0
  wait "$pid" 2>/dev/null || stop_status=$?
  for p in "${pids[@]}"; do [ "$p" = "$pid" ] || kept+=("$p"); done
  pids=("${kept[@]}")
}
# stop_ok PID WHAT [LOG]: stop, and die unless WHAT exited cleanly (status 0).
stop_ok() {
  stop "$1"
  [ "$stop_status" -eq 0 ] || die "$2 exited with status $stop_status after SIGTERM" "${3:-}"
}

# wait_until [--log FILE] [--pid PID] [--every S] SECONDS WHAT COMMAND...: runs COMMAND every S
# seconds (default 0.1) until it succeeds. Dies naming WHAT once SECONDS have passed, or at once
# when process PID has exited (it will not become ready), with FILE's last lines.
wait_until() {
  local log='' pid='' every=0.1
  while :; do
    case $1 in
      --log) log=$2 ;;
      --pid) pid=$2 ;;
      --every) every=$2 ;;
      *) break ;;
    esac
    shift 2
  done
  local seconds=$1 what=$2 deadline=$((SECONDS + $1))
  shift 2
  until "$@"; do
    if [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null; then
      die "gave up waiting for $what: process $pid exited" "$log"
    fi
    [ $SECONDS -lt $deadline ] || die "timed out after ${seconds}s waiting for $what" "$log"
    sleep "$every"
  done
}

# The wrappers take wait_until's options first, then their own arguments.
http_ok() { curl -fs -o /dev/null "$1" 2>/dev/null; } # http_ok URL: a 2xx answer
# wait_for_http [OPTIONS] SECONDS URL: until URL answers 2xx.
wait_for_http() {
  local opts=()
  while [[ $1 == --* ]]; do opts+=("$1" "$2"); shift 2; done
  wait_until "${opts[@]}" "$1" "$2 to answer" http_ok "$2"
}
# wait_for_log [OPTIONS] SECONDS FILE REGEX: until a line of FILE matches REGEX (grep -E);
# prints the first match. FILE is the log tailed on failure.
wait_for_log() {
  local opts=()
  while [[ $1 == --* ]]; do opts+=("$1" "$2"); shift 2; done
  wait_until --log "$2" "${opts[@]}" "$1" "/$3/ in $2" grep -Eqs -- "$3" "$2"
  first_line "$(grep -Eo -m 1 -- "$3" "$2")"
}
# output_has REGEX COMMAND...: COMMAND succeeds and a line of its output matches REGEX. The
# output is read whole before grep looks (`cmd | grep -q` fails under pipefail).
output_has() {
  local regex=$1 out
  shift
  out=$("$@" 2>/dev/null) || return 1
  grep -Eq -- "$regex" <<<"$out"
}
# wait_for_output [OPTIONS] SECONDS WHAT REGEX COMMAND...: until output_has REGEX COMMAND.
wait_for_output() {
  local opts=()
  while [[ $1 == --* ]]; do opts+=("$1" "$2"); shift 2; done
  local seconds=$1 what=$2
  shift 2
  wait_until "${opts[@]}" "$seconds" "$what" output_has "$@"
}

# free_port: a port that is free now, the kernel's choice (bind port 0, read it back).
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' ||
    die "free_port: python3 could not bind a port"
}

# start_exporter NAME [FLAGS...]: `$accelmon exporter` on ports the kernel picks, its per-stream
# limit at $exporter_max_reports (default 1000000: a load measures the exporter, not the limit),
# logging to $work/NAME.log; waits (30 s at most) for its start-up line. Sets exporter_pid,
# grpc_port, web_port; the pid is tracked.
start_exporter() {
  local name=$1 line
  shift
  "${accelmon:?set accelmon to the accelmon binary}" exporter --web.listen-address 127.0.0.1:0 --grpc.listen-address 127.0.0.1:0 \
    --grpc.max-reports-per-second "${exporter_max_reports:-1000000}" "$@" >"$work/$name.log" 2>&1 &
  exporter_pid=$!
  pids+=("$exporter_pid")
  line=$(wait_for_log --pid "$exporter_pid" 30 "$work/$name.log" 'ingest on .*')
  grpc_port=$(nth_port "$line" 1)
  web_port=$(nth_port "$line" 2)
}

# start_node_exporter ROOT PORT LOG: node_exporter over ROOT's proc and sys (ROOT empty: this
# host's) with the collectors equivalent to accelmon's host collectors, so every comparison runs
# the same peer. Backgrounds it: $! is its pid.
start_node_exporter() {
  prometheus-node-exporter --path.procfs="$1/proc" --path.sysfs="$1/sys" \
    --web.listen-address="127.0.0.1:$2" --collector.disable-defaults \
    --collector.meminfo --collector.vmstat --collector.pressure --collector.buddyinfo \
    --collector.netdev --collector.netclass --collector.infiniband --collector.thermal_zone \
    --collector.hwmon --no-collector.netdev.netlink --no-collector.netclass.netlink \
    --collector.netclass.ignore-invalid-speed 2>"$3" &
}

# A process's CPU and memory, from /proc.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; } # utime+stime, clock ticks ($hz a second)
cpu_ns() { cat "/proc/$1"/task/*/schedstat | awk '{ s += $1 } END { printf "%.0f", s }'; } # every thread's run time
rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }
now() { date +%s.%N; }
calc() { awk "BEGIN { printf \"$1\", $2 }"; } # calc FORMAT EXPRESSION
bytes_of() { find "$@" -type f -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }'; } # bytes_of FIND-ARGS...

# The same samples in Prometheus's TSDB: `accelmon replay --openmetrics` writes OM_DIR, then
om_samples() { cat "$1"/*.om | grep -vc '^#'; } # om_samples OM_DIR: its sample lines
backfill_tsdb() { # backfill_tsdb OM_DIR TSDB_DIR: every file of OM_DIR into blocks, by promtool
  local f
  for f in "$1"/*.om; do
    promtool tsdb create-blocks-from openmetrics --quiet "$f" "$2" >/dev/null
  done
}
# tsdb_sizes TSDB_DIR: sets tsdb_blocks, tsdb_bytes (all but the WAL), tsdb_chunks, tsdb_index.
tsdb_sizes() {
  tsdb_blocks=$(find "$1" -mindepth 2 -maxdepth 2 -name meta.json | wc -l)
  tsdb_bytes=$(bytes_of "$1" -path '*/wal/*' -prune -o -type f)
  tsdb_chunks=$(bytes_of "$1" -path '*/chunks/*')
  tsdb_index=$(bytes_of "$1" -name index)
}

# record_result KEY VALUE: appends one measured value to $BENCH_RESULTS (when set), from which
# bench/goals.py prints the goals table.
record_result() {
  if [ -n "${BENCH_RESULTS:-}" ]; then printf '%s\t%s\n' "$1" "$2" >>"$BENCH_RESULTS"; fi
  return 0
}
