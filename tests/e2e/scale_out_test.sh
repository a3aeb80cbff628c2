#!/usr/bin/env bash
# Scale-out on loopback: two exporters, six simulated agents spread over both by rendezvous hashing
# of their node names, one Prometheus scraping both exporters and remote-writing into Debian's
# VictoriaMetrics. A query to VictoriaMetrics returns every node.
source "$(dirname "$0")/lib.sh"
FIXTURES=${FIXTURES:?set FIXTURES to tests/fixtures}
for tool in prometheus victoria-metrics python3; do
  command -v "$tool" >/dev/null || fail "$tool not found (scripts/install-deps.sh test installs it)"
done

declare -A grpc web
for e in 1 2; do
  start "exporter$e" exporter --web.listen-address 127.0.0.1:0 --grpc.listen-address 127.0.0.1:0
  ports=$(wait_for_log "exporter$e" 'ingest on 127.0.0.1:0 \(port [0-9]+\), metrics on 127.0.0.1:0 \(port [0-9]+')
  grpc[$e]=$(nth_port "$ports" 1)
  web[$e]=$(echo "$ports" | grep -Eo 'port [0-9]+' | tail -1 | grep -Eo '[0-9]+')
done
a1="127.0.0.1:${grpc[1]}"
a2="127.0.0.1:${grpc[2]}"

# Six names, three ranking each exporter first: both exporters get nodes whatever ports they got.
nodes=()
declare -A home
n1=0 n2=0
for i in $(seq 1 200); do
  node="node-$i"
  first=$(rank_first "$node" "$a1" "$a2")
  if [ "$first" = "$a1" ] && [ $n1 -lt 3 ]; then n1=$((n1 + 1)); elif [ "$first" = "$a2" ] && [ $n2 -lt 3 ]; then n2=$((n2 + 1)); else continue; fi
  nodes+=("$node")
  home[$node]=$first
  [ ${#nodes[@]} -eq 6 ] && break
done
[ ${#nodes[@]} -eq 6 ] || fail "could not pick six names spread over both exporters"

declare -A agent_of  # node -> its agent's log name (start/stop need a shell name)
for i in "${!nodes[@]}"; do
  node=${nodes[$i]}
  agent_of[$node]="agent$i"
  start "agent$i" agent --exporter.address "$a1,$a2" --node.name "$node" --sim 2 \
    --push.socket "" --path.procfs "$FIXTURES/host/proc" --path.sysfs "$FIXTURES/host/sys"
done

# Each agent connects to the exporter the prediction names, and each exporter serves its nodes.
for node in "${nodes[@]}"; do
  wait_for_log "${agent_of[$node]}" "connected to exporter ${home[$node]} \\(choice 1 of 2" 30 >/dev/null
  e=1
  [ "${home[$node]}" = "$a2" ] && e=2
  wait_for_metric "http://127.0.0.1:${web[$e]}/metrics" "^accelmon_node_up\\{node=\"$node\"\\} 1" 30
done

# VictoriaMetrics picks its port (it logs only the address it was given): read it from /proc.
run_bg victoria-metrics victoria-metrics -httpListenAddr 127.0.0.1:0 \
  -storageDataPath "$WORK/vm-data" -retentionPeriod 1d -search.latencyOffset 1s -search.disableCache
vm_port=$(wait_for_listening_port "${peer_pid[victoria-metrics]}" 30)
cat >"$WORK/prometheus.yml" <<YAML
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: accelmon
    static_configs:
      - targets: ["127.0.0.1:${web[1]}", "127.0.0.1:${web[2]}"]
remote_write:
  - url: http://127.0.0.1:$vm_port/api/v1/write
    queue_config:
      batch_send_deadline: 1s
YAML
promtool check config "$WORK/prometheus.yml" >/dev/null || fail "promtool rejects the config"
run_bg prometheus prometheus --config.file "$WORK/prometheus.yml" \
  --storage.tsdb.path "$WORK/prom-data" --web.listen-address 127.0.0.1:0 \
  --storage.remote.flush-deadline 5s  # a failing test must not wait a minute for a dead VictoriaMetrics

# Every node, through Prometheus, in VictoriaMetrics.
query='count by (node) (accelmon_node_up)'
every_node_in_vm() {
  found=$(curl -fsS "http://127.0.0.1:$vm_port/api/v1/query" --data-urlencode "query=$query" \
    2>/dev/null | grep -Eo '"node":"[^"]+"' | sort -u | wc -l || true)
  [ "$found" -eq ${#nodes[@]} ]
}
wait_until 60 "VictoriaMetrics to have all ${#nodes[@]} nodes" every_node_in_vm
answer=$(curl -fsS "http://127.0.0.1:$vm_port/api/v1/query" --data-urlencode "query=$query")
for node in "${nodes[@]}"; do
  grep -q "\"node\":\"$node\"" <<<"$answer" || fail "VictoriaMetrics lacks $node: $answer"
done
# Both exporters' series arrived: each instance carries some of the nodes.
for e in 1 2; do
  answer=$(curl -fsS "http://127.0.0.1:$vm_port/api/v1/query" \
    --data-urlencode "query=count(accelmon_node_up{instance=\"127.0.0.1:${web[$e]}\"})")
  grep -q '"value":\[[0-9.]*,"3"\]' <<<"$answer" || fail "exporter $e: expected 3 nodes: $answer"
done

stop_bg prometheus
stop_bg victoria-metrics
for node in "${nodes[@]}"; do stop "${agent_of[$node]}"; done
stop exporter1
stop exporter2
echo "scale_out_test: ok (${nodes[*]} over $a1 and $a2)"
