#!/usr/bin/env bash
# Issue 22's four comparisons in one go, each against its anchor in the same run, then one table:
# ours, the anchor, the ratio, the goal, met or missed (bench/goals.py). About 3 minutes.
#   bench/goals.sh BUILD_DIR        (make bench-goals)
# 1. ingest at saturation against the bare gRPC echo server, recording off and on, and 4. the agent
#    beside node_exporter: bench/ingest_vs_echo.sh without its fleets;
# 2. a lone node's recording against Prometheus's TSDB: bench/lone_node_recording.sh;
# 3. the /metrics render and the gzip'd scrape at 100 k series, and prometheus-cpp's render:
#    bench/render_bench.
# `make bench` runs the same scripts in full and ends with the same table.
set -euo pipefail
build=${1:-build}
cd "$(dirname "$0")/.."
BENCH_RESULTS=$(mktemp)
export BENCH_RESULTS
trap 'rm -f "$BENCH_RESULTS"' EXIT

FLEET_SIZES="" bash bench/ingest_vs_echo.sh "$build"
bash bench/lone_node_recording.sh "$build"
echo
"$build/bench/render_bench" --benchmark_filter='BM_(RenderOurs|RenderPeer|GzipScrapeOurs)/100000$' \
  --benchmark_repetitions=3 --benchmark_report_aggregates_only=true --benchmark_format=json \
  2>/dev/null | /usr/bin/python3 bench/gbench_table.py
echo
echo "### Issue 22's goals, all measured above"
echo
/usr/bin/python3 bench/goals.py "$BENCH_RESULTS"
