#!/usr/bin/env bash
# Runs every benchmark (`make bench`). Results go to stdout; bench/README.md records them.
set -euo pipefail
build=${1:-build}
cd "$(dirname "$0")/.."
echo "## Host collection: accelmon vs node_exporter"
bash bench/host_vs_node_exporter.sh "$build"
echo
echo "## Recording: throughput"
"$build/bench/recording_bench"
echo
echo "## Recording: bytes on disk against Prometheus's TSDB"
bash bench/recording_vs_tsdb.sh "$build"
echo
echo "## Ingest, latency, scale and agent cost: loadgen against a bare gRPC echo server and the exporter"
bash bench/ingest_vs_echo.sh "$build"
echo
echo "## /metrics render: accelmon vs prometheus-cpp Registry::Collect + TextSerializer"
"$build/bench/render_bench" --benchmark_counters_tabular=true --benchmark_repetitions=3 \
  --benchmark_report_aggregates_only=true
