#!/usr/bin/env bash
# The status page at 1000 nodes (issue 20). Prints a Markdown table.
#   bench/status_page.sh BUILD_DIR
# An exporter ingests `accelmon loadgen --nodes 1000` (8 simulated devices and their NVLink mesh
# each, one report a second per node). Measured, in the same run:
#   - the page's weight: its three files, and the JSON of one update (without and with one
#     node's devices), beside one /metrics scrape of the same state;
#   - the server's time for that JSON against a /metrics scrape (curl, median of RUNS);
#   - the page in headless Chromium (bench/status_page_bench.js): first full table, render time
#     of an update (median and worst of 10), a sort click and a filter keystroke;
#   - the exporter's CPU over WINDOW seconds with nobody looking, then with the page open at its
#     default 2 s refresh.
# Needs chromium and playwright-core (NODE_PATH; the ctest setup browser_npm_install puts it in
# BUILD_DIR/browser-driver). Environment overrides: NODES, RUNS, WINDOW.
set -euo pipefail
build=${1:-build}
nodes=${NODES:-1000}
runs=${RUNS:-20}
window=${WINDOW:-20}
accelmon=$build/accelmon
export NODE_PATH=${NODE_PATH:-$build/browser-driver/node_modules}
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
need_binary "$accelmon"

exporter_max_reports=1000 start_exporter exporter
exporter=$exporter_pid
base="http://127.0.0.1:$web_port"
wait_for_http --pid "$exporter" --log "$work/exporter.log" 30 "$base/readyz"
"$accelmon" loadgen --exporter.address "127.0.0.1:$grpc_port" --nodes "$nodes" --interval 1s \
  --duration 1h >"$work/loadgen.log" 2>&1 &
loadgen=$!
pids+=("$loadgen")
all_nodes_in() { # whether the exporter's status counts all $nodes loadgen nodes
  local status
  status=$(curl -fs "$base/api/v1/status") || return 1
  [ "$(python3 -c 'import json,sys; print(json.load(sys.stdin)["summary"]["nodes"])' <<<"$status")" -ge "$nodes" ]
}
wait_until --pid "$loadgen" --log "$work/loadgen.log" --every 0.5 120 \
  "all $nodes loadgen nodes in $base/api/v1/status" all_nodes_in

size() { curl -fs -o /dev/null -w '%{size_download}' "$@"; }
median_ms() { # URL -> median of RUNS curl total times, in ms
  for _ in $(seq "$runs"); do curl -fs -o /dev/null -w '%{time_total}\n' "$1"; done |
    sort -n | awk '{ a[NR] = $1 } END { printf "%.1f", 1000 * a[int((NR + 1) / 2)] }'
}
page_bytes=$(($(size "$base/") + $(size "$base/status.js") + $(size "$base/status.css")))
json_bytes=$(size "$base/api/v1/status")
json_gzip=$(size -H 'Accept-Encoding: gzip' --compressed "$base/api/v1/status")
first_node=$(curl -fs "$base/api/v1/status" | python3 -c 'import json,sys; print(json.load(sys.stdin)["nodes"][0]["node"])')
node_json_bytes=$(size "$base/api/v1/status?node=$first_node")
metrics_bytes=$(size "$base/metrics")
json_ms=$(median_ms "$base/api/v1/status")
metrics_ms=$(median_ms "$base/metrics")

cpu_over_window() { # -> the exporter's CPU seconds per second over WINDOW
  local before after
  before=$(cpu_ticks "$exporter")
  sleep "$window"
  after=$(cpu_ticks "$exporter")
  awk -v b="$before" -v a="$after" -v w="$window" -v hz="$hz" 'BEGIN { printf "%.3f", (a - b) / hz / w }'
}
idle_cpu=$(cpu_over_window)
browser=$(BASE=$base NODES=$nodes node bench/status_page_bench.js)
# The page open at its default refresh while the exporter's CPU is measured again.
node -e '
const { chromium } = require("playwright-core");
(async () => {
  const b = await chromium.launch({ executablePath: process.env.CHROMIUM || "/usr/bin/chromium", args: ["--no-sandbox"] });
  const p = await b.newPage();
  await p.goto(process.argv[1] + "/");
  await new Promise((r) => setTimeout(r, 1000 * (Number(process.argv[2]) + 5)));
  await b.close();
})();' "$base" "$window" &
viewer=$!
pids+=("$viewer")
sleep 3 # the page loaded and polling
watched_cpu=$(cpu_over_window)
wait "$viewer" || true

field() { python3 -c "import json,sys; print(round(json.loads(sys.argv[1])[sys.argv[2]], 1))" "$browser" "$1"; }
kib() { awk -v b="$1" 'BEGIN { printf "%.0f KiB", b / 1024 }'; }
echo "Exporter with $nodes loadgen nodes × 8 devices at 1 Hz; curl medians of $runs; CPU over ${window} s."
echo
echo "| what | status page | anchor in the same run |"
echo "| --- | --- | --- |"
echo "| page files (/, status.js, status.css) | $(kib "$page_bytes") | limit 200 KiB |"
echo "| one update's JSON | $(kib "$json_bytes") ($(kib "$json_gzip") gzip'd on the wire) | /metrics: $(kib "$metrics_bytes") |"
echo "| one update with one node's devices | $(kib "$node_json_bytes") | |"
echo "| server time for one update (curl) | $json_ms ms | /metrics scrape: $metrics_ms ms |"
echo "| first full table in Chromium | $(field first_table_ms) ms | |"
echo "| render of one update, 200 rows drawn (median / worst of 10) | $(field render_median_ms) / $(field render_max_ms) ms | |"
echo "| render of one update with all $nodes rows shown (median / worst of 5) | $(field all_rows_median_ms) / $(field all_rows_max_ms) ms | |"
echo "| sort click / filter keystroke to next frame | $(field sort_ms) / $(field filter_ms) ms | |"
echo "| exporter CPU | $watched_cpu cores with the page open | $idle_cpu cores with nobody looking |"
