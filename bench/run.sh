#!/usr/bin/env bash
# Runs every benchmark (`make bench`), prints its tables and rewrites the generated blocks of
# bench/README.md (between <!-- bench:NAME --> markers) with them, stamped with the date, the
# machine and its load, so the README always shows the latest same-run comparison.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
build=${1:-build}
cd "$(dirname "$0")/.."
readme=bench/README.md
out=$work
# The measured values behind the goals table at the end (bench/goals.py).
export BENCH_RESULTS=$out/results.tsv

machine() {
  echo "_Run $(date -u +%Y-%m-%dT%H:%MZ) on $(nproc) CPUs ($(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo)), load average $(cut -d' ' -f1-3 /proc/loadavg) at the start._"
  echo
}

# section TITLE NAME COMMAND...: runs COMMAND, shows its output, and puts it in the README block.
section() {
  local title=$1 name=$2
  shift 2
  echo "## $title"
  { machine; "$@"; } | tee "$out/$name.md"
  /usr/bin/python3 bench/update_readme.py "$readme" "$name" <"$out/$name.md"
  echo
}

gbench() { # Google Benchmark binary [flags...] -> Markdown table
  "$@" --benchmark_format=json 2>/dev/null | /usr/bin/python3 bench/gbench_table.py
}

section "Host collection: accelmon vs node_exporter" host \
  bash bench/host_vs_node_exporter.sh "$build"
section "Recording: throughput" recording-throughput \
  gbench "$build/bench/recording_bench" --benchmark_min_time=0.5
section "Recording: bytes on disk against Prometheus's TSDB" recording-tsdb \
  bash bench/recording_vs_tsdb.sh "$build"
section "Recording: a lone node against Prometheus's TSDB" lone-node-recording \
  bash bench/lone_node_recording.sh "$build"
section "/metrics render: accelmon vs prometheus-cpp" render \
  gbench "$build/bench/render_bench" --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
section "/metrics over HTTP: plain, gzip and zstd against the peers' own gzip'd /metrics" scrape \
  bash bench/scrape_encodings.sh "$build"
section "/metrics over HTTP at 50 k series" scrape-50k \
  env SERIES=50000 bash bench/scrape_encodings.sh "$build"
section "Offline diagnosis: accelmon diagnose" diagnose \
  gbench "$build/bench/diagnose_bench" --benchmark_min_time=0.5
section "Attribution: the agent cycle with and without 64 Slurm processes" attribution \
  gbench "$build/bench/attribution_bench" --benchmark_repetitions=12 --benchmark_enable_random_interleaving=true \
    --benchmark_min_time=0.5 --benchmark_report_aggregates_only=true
section "Ingest, latency, scale and agent cost: loadgen against a bare gRPC echo server" ingest \
  bash bench/ingest_vs_echo.sh "$build"
section "Ingest's floor: one loadgen report parsed into an arena by protobuf alone" parse \
  gbench "$build/bench/parse_bench" --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
section "Ingest against VictoriaMetrics: the same fleet by Prometheus remote write" ingest-vm \
  bash bench/ingest_vs_vm.sh "$build"
section "A top poll: whole reports against GetSummary" top-poll \
  bash bench/top_poll.sh "$build"
section "The envelope: what one exporter holds at 1 s and at 15 s" envelope \
  bash bench/exporter_envelope.sh "$build"
section "The envelope: Prometheus, VictoriaMetrics and vmalert with the job rules at 1000 nodes" \
  global-store bash bench/global_store_envelope.sh "$build"
section "Restart: an exporter's start from a 1000-node recording" restart \
  bash bench/restart_from_recording.sh "$build"
section "Status page: 1000 nodes in headless Chromium" status-page \
  bash bench/status_page.sh "$build"
section "Diagnosis accuracy: every shipped scenario scored against its expect: list" \
  diagnosis-accuracy bash bench/diagnosis_accuracy.sh "$build"
section "The core path's goals (issue 39): ours against the anchors, from the runs above" goals \
  /usr/bin/python3 bench/goals.py "$BENCH_RESULTS"
echo "bench/README.md: tables rewritten; commit them with the run's context."
