#!/usr/bin/env bash
# What one exporter holds (issue 42, docs/scaling.md "The envelope"): loadgen fleets of 8-device
# nodes reporting every 1 s and every 15 s, diagnostics on (the default), a fresh exporter per
# row. Per row: the reports per second acknowledged, the exporter's CPU over the middle of the
# run, its RSS, the series of one scrape, the scrape's time over curl (and the first one's, which
# grows the buffers), and the most labels any
# series has (Mimir refuses series over 30 by default; Prometheus adds `instance` and `job`).
#   bench/exporter_envelope.sh BUILD_DIR
# Environment: ENVELOPE_ROWS (default "1s:1000 1s:4000 15s:4000 15s:12500"), ENVELOPE_INTERVALS
# (intervals measured per row, default 3).
set -euo pipefail
build=${1:-build}
accelmon=$build/accelmon
rows=${ENVELOPE_ROWS:-1s:1000 1s:4000 15s:4000 15s:12500}
intervals=${ENVELOPE_INTERVALS:-3}
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
need_binary "$accelmon"

echo "| interval | nodes | reports/s | exporter CPU (cores) | exporter RSS (MiB) | series | one scrape (the first after start) | most labels on a series |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
for row in $rows; do
  interval=${row%%:*}
  nodes=${row#*:}
  seconds=${interval%s}
  start_exporter "envelope-$row"
  # One interval for every node to report once (they start spread over it) and at least 5 s
  # for the fleet's state to settle, then the measure: `intervals` intervals, at least 10 s.
  settle=$((seconds + 1 > 5 ? seconds + 1 : 5))
  measure=$((seconds * intervals > 10 ? seconds * intervals : 10))
  duration=$((settle + measure + seconds + 1))
  "$accelmon" loadgen --exporter.address "127.0.0.1:$grpc_port" --nodes "$nodes" --devices 8 \
    --interval "$interval" --duration "${duration}s" >"$work/$row.out" 2>"$work/$row.err" &
  lg=$!
  sleep "$settle"
  c0=$(cpu_ticks "$exporter_pid")
  t0=$(now)
  sleep "$measure"
  c1=$(cpu_ticks "$exporter_pid")
  t1=$(now)
  kib=$(rss_kib "$exporter_pid")
  wait "$lg" || { cat "$work/$row.out" "$work/$row.err" >&2; exit 1; }
  # The first scrape after start grows the render's buffers (page faults for every new page);
  # the next ones reuse them, as every later Prometheus scrape does.
  first_s=$(curl -fs -o "$work/scrape.txt" -w '%{time_total}' "127.0.0.1:$web_port/metrics")
  scrape_s=$(curl -fs -o "$work/scrape.txt" -w '%{time_total}' "127.0.0.1:$web_port/metrics")
  series=$(grep -vc '^#' "$work/scrape.txt")
  labels=$(python3 - "$work/scrape.txt" <<'PY'
import re, sys
most = 0
label = re.compile(r'[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*"')
with open(sys.argv[1]) as f:
    for line in f:
        if line.startswith("#") or "{" not in line:
            continue
        most = max(most, len(label.findall(line[line.index("{"):line.rindex("}") + 1])))
print(most)
PY
)
  rate=$(awk '/^rate:/ {print $2}' "$work/$row.out")
  echo "| $interval | $nodes | $rate | $(calc %.2f "($c1 - $c0) / $hz / ($t1 - $t0)") | $(calc %.0f "$kib / 1024") | $series | $(calc %.2f "$scrape_s") s ($(calc %.2f "$first_s") s) | $labels |"
  stop "$exporter_pid"
done
