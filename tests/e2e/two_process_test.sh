#!/usr/bin/env bash
# Agent and exporter as separate processes, as on two machines: the agent reads a fixture procfs,
# survives an exporter restart, and its data reaches /metrics again.
source "$(dirname "$0")/lib.sh"
FIXTURES=${FIXTURES:?set FIXTURES to tests/fixtures}

start exporter exporter --web.listen-address 127.0.0.1:0 --grpc.listen-address 127.0.0.1:0
ports=$(wait_for_log exporter 'ingest on 127.0.0.1:0 \(port [0-9]+\), metrics on 127.0.0.1:0 \(port [0-9]+')
grpc_port=$(nth_port "$ports" 1)
web_port=$(echo "$ports" | grep -Eo 'port [0-9]+' | tail -1 | grep -Eo '[0-9]+')
url="http://127.0.0.1:$web_port/metrics"

start agent agent --exporter.address "127.0.0.1:$grpc_port" --node.name node-a \
  --collect.interval 100ms --path.procfs "$FIXTURES/host/proc" --sim 2
# MemTotal 24683584 kB in the fixture.
wait_for_metric "$url" '^accelmon_host_memory_total_bytes\{node="node-a"\} 25275990016$'
wait_for_metric "$url" '^accelmon_device_memory_used_bytes\{node="node-a",device="1"'

# Restart the exporter on the same ports; the agent reconnects by itself.
stop exporter
start exporter exporter --web.listen-address "127.0.0.1:$web_port" \
  --grpc.listen-address "127.0.0.1:$grpc_port"
wait_for_metric "$url" '^accelmon_node_up\{node="node-a"\} 1' 30
grep -q "connected to exporter" "$WORK/agent.log" || fail "agent never logged its connection"
grep -q "lost connection to exporter" "$WORK/agent.log" || fail "agent did not log the loss"

stop agent
stop exporter
echo "two_process_test: ok"
