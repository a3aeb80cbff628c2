#!/usr/bin/env bash
# Start-up of an exporter from a 1000-node recording (issue 25). Prints a Markdown table.
#   bench/restart_from_recording.sh BUILD_DIR
# An exporter with --record.dir ingests `accelmon loadgen --nodes 1000` (8 simulated devices
# each, one report a second per node) for RECORD_SECONDS, then stops. The same recording is then
# opened by a fresh exporter, RUNS times each way:
#   - with its tail index (tail.index, as the exporter leaves it);
#   - without it (deleted: the fallback reads the newest two segments whole);
#   - an empty recording directory: the exporter's own start, the anchor of the same run.
# Measured: wall time from exec to the first 200 from /readyz (the state is rebuilt before the
# exporter serves), the exporter's own "start-up read the recording in N ms", the nodes it
# restored, and the peak RSS. Environment overrides: RECORD_SECONDS, NODES, RUNS.
set -euo pipefail
build=${1:-build}
record_seconds=${RECORD_SECONDS:-60}
nodes=${NODES:-1000}
runs=${RUNS:-5}
accelmon=$build/accelmon
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
need_binary "$accelmon"
# Fixed ports, the same for every start, so that each start is timed to the same /readyz.
web=$(free_port)
grpc=$(free_port)

# The recording.
"$accelmon" exporter --web.listen-address "127.0.0.1:$web" --grpc.listen-address "127.0.0.1:$grpc" \
  --record.dir "$work/rec" --grpc.max-reports-per-second 1000 >"$work/recording.log" 2>&1 &
exporter=$!
pids+=("$exporter")
wait_for_http --pid "$exporter" --log "$work/recording.log" 30 "http://127.0.0.1:$web/readyz"
"$accelmon" loadgen --exporter.address "127.0.0.1:$grpc" --nodes "$nodes" --interval 1s \
  --duration "${record_seconds}s" >"$work/loadgen.log" 2>&1
stop_ok "$exporter" "the recording exporter" "$work/recording.log"
bytes=$(du -sb "$work/rec" | cut -f1)
cp "$work/rec/tail.index" "$work/tail.index.saved"

# start_once DIR: one exporter start from DIR; prints "wall_ms read_ms nodes rss_kib".
start_once() {
  local dir=$1 t0 t1 pid
  t0=$(date +%s%N)
  "$accelmon" exporter --web.listen-address "127.0.0.1:$web" --grpc.listen-address "127.0.0.1:$grpc" \
    --record.dir "$dir" >"$work/start.log" 2>&1 &
  pid=$!
  pids+=("$pid")
  wait_for_http --pid "$pid" --log "$work/start.log" --every 0.002 60 "http://127.0.0.1:$web/readyz"
  t1=$(date +%s%N)
  local rss restored read
  rss=$(awk '/^VmHWM:/ {print $2}' "/proc/$pid/status")
  restored=$(curl -fs "http://127.0.0.1:$web/metrics" | awk '/^accelmon_exporter_restored_nodes / {print $2}')
  stop_ok "$pid" "the exporter started from $dir" "$work/start.log"
  read=$(grep -Eo 'start-up read the recording in [0-9]+ ms' "$work/start.log" | grep -Eo '[0-9]+ ms' | grep -Eo '[0-9]+')
  echo "$(((t1 - t0) / 1000000)) $read $restored $rss"
}

# measure MODE DIR: RUNS starts from DIR prepared as MODE; sets median to the median start's
# "wall read nodes rss" (by wall time). In this shell, not a pipe's, so that a failed start ends
# the bench and its exporter is tracked.
measure() {
  local mode=$1 dir=$2
  : >"$work/starts"
  for _ in $(seq 1 "$runs"); do
    case $mode in
      index) cp "$work/tail.index.saved" "$dir/tail.index" ;;
      noindex) rm -f "$dir/tail.index" ;;
      empty) rm -rf "$dir" && mkdir -p "$dir" ;;
    esac
    start_once "$dir" >>"$work/starts"
  done
  median=$(sort -n "$work/starts" | awk '{ a[NR] = $0 } END { print a[int((NR + 1) / 2)] }')
}

segments=$(find "$work/rec" -name '*.seg' | wc -l)
newest=$(find "$work/rec" -name '*.seg' | sort | tail -1)
newest_bytes=$(stat -c %s "$newest")
echo "Recording: $nodes nodes × 8 devices, one report a second each for ${record_seconds} s;" \
  "$segments segment(s), $((bytes / 1048576)) MiB, the newest $((newest_bytes / 1048576)) MiB" \
  "(segments of 64 MiB, zstd). Median of $runs starts each."
echo
echo "| start | to /readyz | reading the recording | nodes restored | peak RSS |"
echo "| --- | --- | --- | --- | --- |"
measure index "$work/rec"
read -r w r n m <<<"$median"
echo "| with tail.index | $w ms | $r ms | $n | $((m / 1024)) MiB |"
measure noindex "$work/rec"
read -r w r n m <<<"$median"
echo "| without tail.index (newest two segments read) | $w ms | $r ms | $n | $((m / 1024)) MiB |"
measure empty "$work/empty"
read -r w r n m <<<"$median"
echo "| empty recording directory (anchor) | $w ms | $r ms | ${n:-0} | $((m / 1024)) MiB |"
