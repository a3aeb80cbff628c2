#!/usr/bin/env bash
# The core path's goals (issue 39) in one go, each against its anchor in the same run, then one
# table: ours, the anchor, the ratio, the goal, met or missed (bench/goals.py). About 5 minutes.
#   bench/goals.sh BUILD_DIR        (make bench-goals)
# 1. the scrape: /metrics over HTTP with curl at 50 k and 100 k series, plain and gzip'd, beside
#    prometheus-cpp's Exposer (bench/scrape_encodings.sh), and the in-process render
#    (bench/render_bench);
# 2. ingest at saturation against its floor, the bare gRPC echo server's CPU per report
#    (bench/ingest_vs_echo.sh) plus protobuf's parse of the same report into an arena
#    (bench/parse_bench), and 4000 nodes at 1 Hz;
# 3. the same fleet's samples into VictoriaMetrics by remote write (bench/ingest_vs_vm.sh);
# 4. the agent beside node_exporter, over the fixture tree and over this host (ingest_vs_echo.sh).
# `make bench` runs the same scripts in full and ends with the same table; bench/compare.sh runs
# this for two builds and prints each goal's measure new/old.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
build=${1:-build}
cd "$(dirname "$0")/.."
BENCH_RESULTS=${BENCH_RESULTS:-$work/results.tsv}
export BENCH_RESULTS
[ -n "${KEEP_RESULTS:-}" ] || scratch+=("$BENCH_RESULTS")

FLEET_SIZES=4000 UPTIME_SECONDS=0 bash bench/ingest_vs_echo.sh "$build"
bash bench/ingest_vs_vm.sh "$build"
for series in 50000 100000; do
  SERIES=$series RUNS=10 bash bench/scrape_encodings.sh "$build"
  echo
done
"$build/bench/render_bench" --benchmark_filter='BM_(RenderOurs|RenderPeer|GzipScrapeOurs)/100000$' \
  --benchmark_repetitions=3 --benchmark_report_aggregates_only=true --benchmark_format=json \
  2>/dev/null | /usr/bin/python3 bench/gbench_table.py
echo
"$build/bench/parse_bench" --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \
  --benchmark_format=json 2>/dev/null | /usr/bin/python3 bench/gbench_table.py
echo
echo "### The core path's goals (issue 39), all measured above"
echo
/usr/bin/python3 bench/goals.py "$BENCH_RESULTS"
