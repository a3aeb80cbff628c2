#!/usr/bin/env bash
# Bytes on disk per sample: an accelmon recording against Prometheus's own TSDB holding the same
# samples (backfilled by promtool), in the same run. Prints Markdown tables.
#   bench/recording_vs_tsdb.sh BUILD_DIR [INPUT]
# INPUT: a recording directory or a JSON Lines file. Without it, BUILD_DIR/bench/sim_jsonl makes
# NODES (default 1) nodes of `standalone --sim 8` reporting every second for SPAN seconds
# (default 7199), starting on a two-hour boundary: exactly one Prometheus block, as compaction
# would leave it.
#
# The same reports make both stores: JSON Lines -> `accelmon record import` -> recording (zstd,
# and uncompressed for reference) -> `accelmon replay --openmetrics` -> OpenMetrics files (one
# per two-hour window) -> `promtool tsdb create-blocks-from openmetrics` -> TSDB blocks. A sample
# is one OpenMetrics sample line, which is one TSDB sample. A recording spanning several windows
# gives several 2 h blocks (promtool 2.42 cannot make larger ones, and Prometheus compacts them
# only over time): the TSDB figure then includes one index per block.
set -euo pipefail
build=${1:-build}
input=${2:-}
accelmon=$build/accelmon
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
need_binary "$accelmon"
need_command promtool

since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

t=$(now)
if [ -z "$input" ]; then
  "$build/bench/sim_jsonl" "${NODES:-1}" "${SPAN:-7199}" >"$work/in.jsonl"
  input=$work/in.jsonl
  made="sim_jsonl ${NODES:-1} ${SPAN:-7199}"
fi
if [ -d "$input" ]; then
  "$accelmon" record export --jsonl -o "$work/in.jsonl" "$input" 2>/dev/null
  jsonl=$work/in.jsonl
else
  jsonl=$input
fi
"$accelmon" record import --jsonl "$jsonl" --record.compression zstd "$work/rec-zstd" >/dev/null
t_import=$(since "$t")
recording=$work/rec-zstd
"$accelmon" record import --jsonl "$jsonl" --record.compression none "$work/rec-none" >/dev/null
reports=$(grep -c . "$jsonl")
# Reports per record: the exporter writes one record per group commit (one report each when few
# nodes report), import writes large batches; zstd compresses a batch better than single reports.
per_record() { "$accelmon" record inspect "$1" | awk '/^Reports:/ { printf "%.0f", $2 / $4 }'; }

t=$(now)
"$accelmon" replay "$recording" --openmetrics "$work/om" >/dev/null
t_replay=$(since "$t")
samples=$(om_samples "$work/om")
# A sample line is SERIES VALUE TIMESTAMP; label values may hold spaces.
series=$(cat "$work"/om/*.om | grep -v '^#' | sed -E 's/ [^ ]+ [^ ]+$//' | sort -u | wc -l)

t=$(now)
backfill_tsdb "$work/om" "$work/tsdb"
t_promtool=$(since "$t")
tsdb_sizes "$work/tsdb"
tsdb=$tsdb_bytes

zstd_bytes=$(bytes_of "$recording" -name '*.seg')
none_bytes=$(bytes_of "$work/rec-none" -name '*.seg')
om_bytes=$(bytes_of "$work/om" -name '*.om')
jsonl_bytes=$(bytes_of "$jsonl")

row() { # name bytes
  awk -v n="$1" -v b="$2" -v s="$samples" -v t="$tsdb" \
    'BEGIN { printf "| %s | %d | %.2f | %.2f× |\n", n, b, b / s, b / t }'
}
echo "Input: ${made:-$input}: $reports reports, $series series, $samples samples" \
  "($(awk -v a="$samples" -v b="$series" 'BEGIN { printf "%.0f", a / b }') per series)."
echo
echo "| store (same samples, same run) | bytes | bytes/sample | vs TSDB |"
echo "| --- | --- | --- | --- |"
row "Prometheus TSDB, $tsdb_blocks block(s) (chunks $tsdb_chunks, index $tsdb_index)" "$tsdb"
if [ -d "$input" ]; then
  row "accelmon recording as recorded ($(per_record "$input") reports/record)" \
    "$(bytes_of "$input" -name '*.seg')"
fi
row "accelmon record import, zstd ($(per_record "$recording") reports/record)" "$zstd_bytes"
row "accelmon record import, uncompressed" "$none_bytes"
row "OpenMetrics text (backfill input)" "$om_bytes"
row "JSON Lines" "$jsonl_bytes"
echo
echo "| step | seconds |"
echo "| --- | --- |"
echo "| JSON Lines (sim_jsonl or export) and record import | $t_import |"
echo "| accelmon replay --openmetrics | $t_replay |"
echo "| promtool tsdb create-blocks-from openmetrics | $t_promtool |"
