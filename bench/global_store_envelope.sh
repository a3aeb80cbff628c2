#!/usr/bin/env bash
# The global store and the job rules at fleet size (issue 42, docs/scaling.md "The envelope"): one
# exporter holding a loadgen fleet (NODES nodes x 8 devices at 1 s, each node's devices the
# ranks of a job), Prometheus scraping it every SCRAPE and
# remote-writing into VictoriaMetrics, and vmalert evaluating the shipped
# dashboards/prometheus/jobs.yml over VictoriaMetrics every SCRAPE. After a warm-up, over
# SECONDS: each process's CPU and RSS, Prometheus' head series, VictoriaMetrics' rows per
# second, and vmalert's time for one evaluation of the job rules (its
# vmalert_iteration_duration_seconds).
#   bench/global_store_envelope.sh BUILD_DIR
# Environment: NODES (default 1000), SCRAPE (5s), SECONDS_MEASURED (60).
set -euo pipefail
build=${1:-build}
accelmon=$build/accelmon
nodes=${NODES:-1000}
scrape=${SCRAPE:-5s}
measured=${SECONDS_MEASURED:-60}
repo=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
need_binary "$accelmon"

start_exporter global --no-diagnostics
"$accelmon" loadgen --exporter.address "127.0.0.1:$grpc_port" --nodes "$nodes" --devices 8 \
  --interval 1s --duration "$((measured + 60))s" >"$work/loadgen.out" 2>&1 &
pids+=($!)

vm_port=$(free_port)
victoria-metrics -storageDataPath "$work/vm" -httpListenAddr "127.0.0.1:$vm_port" \
  -retentionPeriod 1d -loggerLevel ERROR >"$work/vm.log" 2>&1 &
vm_pid=$!
pids+=("$vm_pid")
prom_port=$(free_port)
cat >"$work/prometheus.yml" <<YAML
global:
  scrape_interval: $scrape
scrape_configs:
  - job_name: accelmon
    scrape_timeout: $scrape
    static_configs:
      - targets: ["127.0.0.1:$web_port"]
remote_write:
  - url: http://127.0.0.1:$vm_port/api/v1/write
    queue_config:
      max_samples_per_send: 10000
YAML
prometheus --config.file "$work/prometheus.yml" --storage.tsdb.path "$work/prom" \
  --web.listen-address "127.0.0.1:$prom_port" >"$work/prometheus.log" 2>&1 &
prom_pid=$!
pids+=("$prom_pid")
vmalert_port=$(free_port)
vmalert -rule "$repo/dashboards/prometheus/jobs.yml" -evaluationInterval "$scrape" \
  -datasource.url "http://127.0.0.1:$vm_port" -remoteWrite.url "http://127.0.0.1:$vm_port" \
  -notifier.url "http://127.0.0.1:9" -httpListenAddr "127.0.0.1:$vmalert_port" \
  >"$work/vmalert.log" 2>&1 &
vmalert_pid=$!
pids+=("$vmalert_pid")

sleep 45  # every node reported, two scrapes in, the rules' windows filling
declare -A c0
for p in exporter_pid prom_pid vm_pid vmalert_pid; do c0[$p]=$(cpu_ticks "${!p}"); done
t0=$(now)
rows0=$(curl -fs "127.0.0.1:$vm_port/metrics" | awk '/^vm_rows_inserted_total\{type="promremotewrite"\}/ {print $2}')
sleep "$measured"
t1=$(now)
rows1=$(curl -fs "127.0.0.1:$vm_port/metrics" | awk '/^vm_rows_inserted_total\{type="promremotewrite"\}/ {print $2}')
cores() { calc %.2f "($(cpu_ticks "${!1}") - ${c0[$1]}) / $hz / ($t1 - $t0)"; }
head=$(curl -fs "127.0.0.1:$prom_port/metrics" | awk '/^prometheus_tsdb_head_series / {print $2}')
pending=$(curl -fs "127.0.0.1:$prom_port/metrics" |
  awk '/^prometheus_remote_storage_samples_pending/ {print $2}')
eval_s=$(curl -fs "127.0.0.1:$vmalert_port/metrics" |
  awk '/^vmalert_iteration_duration_seconds_sum/ {s = $NF} /^vmalert_iteration_duration_seconds_count/ {n = $NF} END { if (n > 0) printf "%.3f", s / n }')
# value QUERY: the one number VictoriaMetrics answers.
value() {
  curl -fs "127.0.0.1:$vm_port/api/v1/query" --data-urlencode "query=$1" |
    python3 -c 'import json, sys; r = json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else "?")'
}
ranks=$(value 'sum(accelmon:job_ranks:count)')
jobs=$(value 'count(accelmon:job_ranks:count)')

echo "| process | CPU (cores) | RSS (MiB) | what it did |"
echo "| --- | --- | --- | --- |"
echo "| accelmon exporter | $(cores exporter_pid) | $(calc %.0f "$(rss_kib "$exporter_pid") / 1024") | $nodes nodes at 1 s |"
echo "| Prometheus | $(cores prom_pid) | $(calc %.0f "$(rss_kib "$prom_pid") / 1024") | ${head:-?} head series, scraped every $scrape, remote-written (${pending:-?} samples pending at the end) |"
echo "| VictoriaMetrics | $(cores vm_pid) | $(calc %.0f "$(rss_kib "$vm_pid") / 1024") | $(calc %.0f "(${rows1:-0} - ${rows0:-0}) / ($t1 - $t0)") rows/s by remote write, and vmalert's queries |"
echo "| vmalert | $(cores vmalert_pid) | $(calc %.0f "$(rss_kib "$vmalert_pid") / 1024") | jobs.yml every $scrape over $ranks ranks in $jobs jobs: ${eval_s:-?} s an evaluation |"
