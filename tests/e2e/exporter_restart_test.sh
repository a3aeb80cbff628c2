#!/usr/bin/env bash
# An exporter restart forgets nothing (docs/delivery.md, "What a restart keeps"). An exporter with
# a recording serves 5 loadgen nodes and a simulated node whose device 0 raises a critical XID
# finding; the agent then crashes (kill -9, its spool a second behind on what was acknowledged)
# and the exporter restarts with no agent connected. As soon as /readyz answers, /metrics has all
# 6 nodes, down (accelmon_node_up 0) with their recorded last-report times, and the XID finding is
# open on /metrics and on the Watch API with its original start. The agent then comes back with
# its spool and re-sends what was not acknowledged: over both exporter processes every sequence
# is applied exactly once, and the finding stays open (its XID is latched for hold_seconds).
source "$(dirname "$0")/lib.sh"
FIXTURES=${FIXTURES:?set FIXTURES to tests/fixtures}
WATCH=(/usr/bin/python3 "$(dirname "$0")/watch_findings.py")

cat >"$WORK/xid.yaml" <<'YAML'
faults:
  - at: 1s
    fault: xid
    device: 0
    code: 79
YAML

EXPORTER=(--log.level debug exporter --record.dir "$WORK/rec" --grpc.max-reports-per-second 2000)
start exporter0 "${EXPORTER[@]}" --web.listen-address 127.0.0.1:0 --grpc.listen-address 127.0.0.1:0
ports=$(wait_for_log exporter0 'ingest on 127.0.0.1:0 \(port [0-9]+\), metrics on 127.0.0.1:0 \(port [0-9]+')
grpc_port=$(nth_port "$ports" 1)
web_port=$(echo "$ports" | grep -Eo 'port [0-9]+' | tail -1 | grep -Eo '[0-9]+')
metrics="http://127.0.0.1:$web_port/metrics"

"$ACCELMON" loadgen --exporter.address "127.0.0.1:$grpc_port" --nodes 5 --duration 2s \
  --interval 500ms >"$WORK/loadgen.log" 2>&1 || fail "loadgen failed"

AGENT=(agent --exporter.address "127.0.0.1:$grpc_port" --node.name xid-node --sim 2
  --collect.interval 100ms --spool.dir "$WORK/spool" --push.socket ""
  --path.procfs "$FIXTURES/host/proc" --path.sysfs "$FIXTURES/host/sys")
start agent "${AGENT[@]}" --sim.scenario "$WORK/xid.yaml"
xid='^accelmon_diagnosis_active\{rule="xid_error",node="xid-node",device="0",link="",severity="critical"'
wait_for_metric "$metrics" "$xid" 30
before_watch=$("${WATCH[@]}" "127.0.0.1:$grpc_port") || fail "Watch before the restart failed"
grep -q '^xid_error xid-node 0 critical ' <<<"$before_watch" ||
  fail "Watch does not show the XID finding before the restart: $before_watch"
last_report='^accelmon_node_last_report_timestamp_seconds\{node="loadgen-0000[0-4]"\}'
before_times=$(scrape "$metrics" | grep -E "$last_report") || fail "no loadgen node on /metrics"

# The agent crashes; then the exporter restarts (an upgrade) with no agent connected.
kill -KILL "$agent_PID"
wait "$agent_PID" 2>/dev/null || true
stop exporter0
grep -q 'ingest on' "$WORK/exporter0.log"
start exporter1 "${EXPORTER[@]}" --web.listen-address "127.0.0.1:$web_port" \
  --grpc.listen-address "127.0.0.1:$grpc_port"
wait_until 20 "the restarted exporter's /readyz" curl -fsS "http://127.0.0.1:$web_port/readyz" -o /dev/null
# At once: the state was rebuilt before the exporter began serving.
body=$(scrape "$metrics") || fail "no /metrics after /readyz"
for node in loadgen-00000 loadgen-00001 loadgen-00002 loadgen-00003 loadgen-00004 xid-node; do
  grep -q "^accelmon_node_up{node=\"$node\"} 0$" <<<"$body" ||
    fail "node $node is not on /metrics as down right after the restart"
done
grep -q '^accelmon_exporter_restored_nodes 6$' <<<"$body" || fail "restored_nodes is not 6"
grep -q '^accelmon_exporter_state_restored 1$' <<<"$body" || fail "state_restored is not 1"
grep -Eq "$xid" <<<"$body" || fail "the XID finding is not on /metrics after the restart"
[ "$(grep -E "$last_report" <<<"$body")" = "$before_times" ] ||
  fail "last-report times changed across the restart: $(grep -E "$last_report" <<<"$body")"
after_watch=$("${WATCH[@]}" "127.0.0.1:$grpc_port") || fail "Watch after the restart failed"
[ "$(grep '^xid_error xid-node 0 ' <<<"$after_watch")" = "$(grep '^xid_error xid-node 0 ' <<<"$before_watch")" ] ||
  fail "Watch shows the XID finding differently after the restart: '$after_watch' vs '$before_watch'"

# The agent comes back (no XID this time) and re-sends what its spool holds.
start agent2 "${AGENT[@]}"
wait_for_metric "$metrics" '^accelmon_node_up\{node="xid-node"\} 1$' 30
wait_until 60 "the agent to catch up with its spool" spool_drained "$metrics" xid-node
stop agent2
stopped=$(wait_for_log agent2 'agent stopped after sequence [0-9]+; [0-9]+ report')
n=$(echo "$stopped" | grep -Eo 'sequence [0-9]+' | grep -Eo '[0-9]+')
unacked=$(echo "$stopped" | grep -Eo '; [0-9]+' | grep -Eo '[0-9]+')
[ "$unacked" = 0 ] || fail "the agent stopped with $unacked unacknowledged reports"
body=$(scrape "$metrics")
grep -Eq "$xid" <<<"$body" || fail "the XID finding closed once the agent reported again"
stop exporter1

# Over both exporter processes: each sequence of the agent's one instance applied exactly once.
instance=$(grep -Eo -m 1 'instance [0-9a-f]+, ' "$WORK/agent2.log" | grep -Eo '[0-9a-f]{16}')
[ -n "$instance" ] || fail "no agent instance in the agent's log"
grep -hEo "applied node=xid-node instance=$instance seq=[0-9]+" "$WORK/exporter0.log" \
  "$WORK/exporter1.log" | grep -Eo '[0-9]+$' | sort -n >"$WORK/applied"
applied=$(wc -l <"$WORK/applied")
distinct=$(sort -un "$WORK/applied" | wc -l)
[ "$applied" = "$distinct" ] ||
  fail "$((applied - distinct)) report(s) applied twice across the restart: $(uniq -d "$WORK/applied" | sed -n 1,10p)"
[ "$distinct" = "$n" ] && [ "$(head -1 "$WORK/applied")" = 1 ] && [ "$(tail -1 "$WORK/applied")" = "$n" ] ||
  fail "applied $distinct distinct sequences, want 1..$n"
resent=$(grep -c "duplicate node=xid-node" "$WORK/exporter1.log" || true)
echo "PASS: 6 nodes and the XID finding back at once; $n reports applied once each ($resent re-sent as duplicates)"
