#!/usr/bin/env bash
# The scrape people really do (issue 22): /metrics plain, gzip'd (what Prometheus asks for) and
# zstd'd, over HTTP with curl, beside the peers' own gzip'd /metrics in the same run. Prints a
# Markdown table.
#   bench/scrape_encodings.sh BUILD_DIR
# bench/scrape_peers serves the same simulated fleet (SERIES series, default 100k) from
# accelmon's exporter and from prometheus-cpp's Exposer (its gzip is zlib's, as built by Debian);
# node_exporter serves this host's /proc and /sys with its default collectors. Each row: bytes on
# the wire and the median of RUNS scrapes' total time (curl, loopback), and per series.
# Records the plain and gzip'd scrape and the peer's plain one for bench/goals.py (record_result in lib.sh), by
# the SERIES asked for.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
build=${1:-build}
series=${SERIES:-100000}
asked=$series
runs=${RUNS:-20}
need_binary "$build/bench/scrape_peers"

mkfifo "$work/stdin"
"$build/bench/scrape_peers" "$series" <"$work/stdin" >"$work/ports" 2>"$work/peers.log" &
peers=$!
pids+=("$peers")
exec 3>"$work/stdin"  # scrape_peers serves until this closes (or the exit trap stops it)
wait_for_log --pid "$peers" --log "$work/peers.log" 120 "$work/ports" '^prometheus-cpp ' >/dev/null
ours=$(awk '$1 == "accelmon" { print $2 }' "$work/ports")
peer=$(awk '$1 == "prometheus-cpp" { print $2 }' "$work/ports")
series=$(awk '$1 == "series" { print $2 }' "$work/ports")

ne=$(free_port)
prometheus-node-exporter --web.listen-address="127.0.0.1:$ne" 2>"$work/node_exporter.log" &
ne_pid=$!
pids+=("$ne_pid")
wait_until --pid "$ne_pid" --log "$work/node_exporter.log" 30 "node_exporter's /metrics" \
  curl -fs -o "$work/ne.txt" "http://127.0.0.1:$ne/metrics"
ne_series=$(grep -vc '^#' "$work/ne.txt")

# row NAME URL SERIES [ACCEPT-ENCODING [RESULT-KEY]]: bytes, median time, per series.
row() {
  local name=$1 url=$2 n=$3 accept=${4:-identity} key=${5:-} bytes encoding times
  curl -fsS -H "Accept-Encoding: $accept" -D "$work/headers" -o "$work/body" "$url"
  bytes=$(stat -c %s "$work/body")
  encoding=$(awk -F': ' 'tolower($1) == "content-encoding" { gsub("\r", "", $2); print $2 }' "$work/headers")
  times=$(for _ in $(seq "$runs"); do
    curl -fsS -H "Accept-Encoding: $accept" -o /dev/null -w '%{time_total}\n' "$url"
  done | sort -n)
  local line
  line=$(awk -v name="$name" -v enc="${encoding:-none}" -v bytes="$bytes" -v n="$n" -v times="$times" 'BEGIN {
    k = split(times, t, "\n"); m = t[int((k + 1) / 2)]
    printf "| %s | %s | %d | %.1f ms | %.2f | %.0f |\n", name, enc, n, 1000 * m, bytes / n, 1e9 * m / n }')
  echo "$line"
  if [ -n "$key" ]; then record_result "$key" "$(awk -F'|' '{ gsub(/ /, "", $7); print $7 }' <<<"$line")"; fi
}

echo "Same fleet of simulated nodes ($series series) behind both servers; median of $runs curl scrapes on loopback."
echo
echo "| server | Content-Encoding | series | scrape | bytes/series | ns/series |"
echo "| --- | --- | --- | --- | --- | --- |"
row "accelmon exporter" "http://127.0.0.1:$ours/metrics" "$series" identity "scrape_plain_ns_$asked"
row "accelmon exporter" "http://127.0.0.1:$ours/metrics" "$series" gzip "scrape_gzip_ns_$asked"
row "accelmon exporter" "http://127.0.0.1:$ours/metrics" "$series" zstd
row "prometheus-cpp 1.0.1 Exposer (peer)" "http://127.0.0.1:$peer/metrics" "$series" identity "scrape_peer_ns_$asked"
row "prometheus-cpp 1.0.1 Exposer (peer)" "http://127.0.0.1:$peer/metrics" "$series" gzip
row "node_exporter, this host (peer)" "http://127.0.0.1:$ne/metrics" "$ne_series"
row "node_exporter, this host (peer)" "http://127.0.0.1:$ne/metrics" "$ne_series" gzip
