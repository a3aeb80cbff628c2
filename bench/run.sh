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
