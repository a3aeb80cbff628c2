#!/usr/bin/env bash
# A lone node's flight recording against Prometheus's own TSDB holding the same samples (issue 22:
# goal <= 1.5x), in one go. Prints Markdown tables.
#   bench/lone_node_recording.sh BUILD_DIR [SECONDS]
# A live `accelmon standalone --sim 8 --collect.interval 100ms --record.dir` (this host's
# collectors and 8 simulated devices, recording only its own node: one report per group commit)
# runs for SECONDS (default 60) and stops on SIGTERM. Its recording -> `accelmon replay
# --openmetrics` -> `promtool tsdb create-blocks-from openmetrics` -> TSDB block(s): the same
# samples in both stores. ACCELMON=path runs another accelmon binary (an older one, say) instead
# of BUILD_DIR/accelmon.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
build=${1:-build}
seconds=${2:-60}
accelmon=${ACCELMON:-$build/accelmon}
need_binary "$accelmon"
need_command promtool

"$accelmon" standalone --sim 8 --collect.interval 100ms --record.dir "$work/rec" \
  --web.listen-address 127.0.0.1:0 --node.name lone-node >"$work/standalone.log" 2>&1 &
pid=$!
pids+=("$pid")
# A benchmark's fixed duration, not a test's wait: the recording is what it wrote in that time.
sleep "$seconds"
stop_ok "$pid" standalone "$work/standalone.log"

"$accelmon" record verify "$work/rec" >/dev/null
inspect=$("$accelmon" record inspect "$work/rec")
reports=$(awk '/^Reports:/ { print $2 }' <<<"$inspect")
records=$(awk '/^Reports:/ { print $4 }' <<<"$inspect")
segments=$(find "$work/rec" -name '*.seg' | wc -l)
rec_bytes=$(bytes_of "$work/rec" -name '*.seg')

"$accelmon" replay "$work/rec" --openmetrics "$work/om" >/dev/null
samples=$(om_samples "$work/om")
backfill_tsdb "$work/om" "$work/tsdb"
tsdb_sizes "$work/tsdb"
tsdb=$tsdb_bytes

echo "Input: \`standalone --sim 8 --collect.interval 100ms\` for ${seconds} s ($("$accelmon" --version 2>/dev/null | sed -n 1p)):" \
  "$reports reports in $records records ($segments segment(s)), $samples samples" \
  "($(awk -v a="$samples" -v b="$reports" 'BEGIN { printf "%.0f", a / b }') per report)."
echo
echo "| store (same samples, same run) | bytes | bytes/report | bytes/sample | vs TSDB |"
echo "| --- | --- | --- | --- | --- |"
row() { # name bytes
  awk -v n="$1" -v b="$2" -v r="$reports" -v s="$samples" -v t="$tsdb" \
    'BEGIN { printf "| %s | %d | %.0f | %.2f | %.2f× |\n", n, b, b / r, b / s, b / t }'
}
row "Prometheus TSDB, $tsdb_blocks block(s) (chunks $tsdb_chunks, index $tsdb_index)" "$tsdb"
row "accelmon flight recording" "$rec_bytes"
record_result lone_node_recording_bytes "$rec_bytes"
record_result lone_node_tsdb_bytes "$tsdb"
echo
awk -v b="$rec_bytes" -v t="$tsdb" 'BEGIN {
  r = b / t
  printf "| ours | anchor (TSDB) | ratio | goal | |\n| --- | --- | --- | --- | --- |\n"
  printf "| %d B | %d B | %.2f× | ≤ 1.50× | %s |\n", b, t, r, (r <= 1.5 ? "met" : "missed")
}'
