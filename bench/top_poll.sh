#!/usr/bin/env bash
# What one `accelmon top` poll costs (issue 42): an exporter holding a loadgen fleet (1000 nodes x
# 8 devices, the simulator's NVLink mesh and PCIe per device, holders and processes), then one
# real agent (--sim 8 over this host: host, processes, links) on an exporter of its own, and per
# fleet the bytes and call time of the whole reports (GetNodes + GetFindings, what top asked
# before) against GetSummary (bench/top_poll_bytes.cc). Prints a Markdown table.
#   bench/top_poll.sh BUILD_DIR
set -euo pipefail
build=${1:-build}
accelmon=$build/accelmon
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
need_binary "$accelmon" "$build/bench/top_poll_bytes"

poll() {  # poll LABEL: one table row from top_poll_bytes against the exporter started last
  local out
  out=$("$build/bench/top_poll_bytes" --exporter.address "127.0.0.1:$grpc_port" --polls 20)
  local nodes full full_ms summary summary_ms
  nodes=$(awk '/^nodes/ {print $2}' <<<"$out")
  read -r full full_ms < <(awk '/^GetNodes/ {print $3, $5}' <<<"$out")
  read -r summary summary_ms < <(awk '/^GetSummary/ {print $3, $5}' <<<"$out")
  echo "| $1 | $nodes | $(calc %.2f "$full / 1048576") MiB ($(calc %.1f "$full / $nodes / 1024") KiB a node), $full_ms ms | $(calc %.2f "$summary / 1048576") MiB ($(calc %.1f "$summary / $nodes / 1024") KiB a node), $summary_ms ms | $(calc %.1f "$full / $summary")x |"
}

echo "| fleet | nodes | whole reports (GetNodes + GetFindings): bytes, call | GetSummary: bytes, call | bytes saved |"
echo "| --- | --- | --- | --- | --- |"
start_exporter fleet --no-diagnostics
"$accelmon" loadgen --exporter.address "127.0.0.1:$grpc_port" --nodes 1000 --devices 8 \
  --interval 5s --duration 8s >"$work/loadgen.out" 2>&1
poll "loadgen, 8 devices per node"
stop "$exporter_pid"

start_exporter real --no-diagnostics
"$accelmon" agent --exporter.address "127.0.0.1:$grpc_port" --node.name real-node --sim 8 \
  --push.socket "" >"$work/agent.log" 2>&1 &
agent_pid=$!
pids+=("$agent_pid")
wait_for_output --pid "$agent_pid" --log "$work/agent.log" 30 "the agent's node at the exporter" \
  '^nodes 1' "$build/bench/top_poll_bytes" --exporter.address "127.0.0.1:$grpc_port" --polls 1
poll "one agent, --sim 8 over this host"
