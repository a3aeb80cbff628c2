#!/usr/bin/env bash
# Findings survive kill -9: an agent plays a scenario whose findings open, escalate and close
# every second or so (two flapping links, XIDs that warn then turn critical and expire, OOM kills)
# while its recording exporter is killed with SIGKILL at 20 random moments. Before each kill the
# agent is paused and the exporter has acknowledged everything it applied; the findings it shows
# then (Watch's initial state and /metrics) must be exactly the ones the restarted exporter shows
# before the agent sends anything again: every open one open (same start, severity and first
# fault), every closed one closed, none twice.
source "$(dirname "$0")/lib.sh"
: "${PYTHONPATH:?set PYTHONPATH to BUILD/python (the generated accelmon.v1 modules)}"
/usr/bin/python3 -c 'import grpc, google.protobuf' 2>/dev/null ||
  skip "/usr/bin/python3 lacks python3-grpcio or python3-protobuf (scripts/install-deps.sh test)"
WATCH=(/usr/bin/python3 "$(dirname "$0")/watch_findings.py")

# Short holds, so that findings close while the test runs.
cat >"$WORK/diagnostics.yaml" <<'YAML'
rules:
  xid_error: {hold: 1500ms}
  host_oom_kill: {hold: 1s}
YAML
# Every 6 s on device 2 (and 3 s later on device 3): XID 13 opens a warning, XID 79 a second
# later makes it critical, and 1.5 s after that it closes. An OOM kill every 4 s, open for 1 s.
# nvlink0 of devices 0 and 1 flaps (link_down opens and closes; link_flapping opens).
{
  echo "faults:"
  echo "  - {at: 1s, fault: link_flap, device: 0, period: 700ms}"
  echo "  - {at: 1s, fault: link_flap, device: 1, period: 1100ms}"
  for t in $(seq 1 6 180); do
    echo "  - {at: ${t}s, fault: xid, device: 2, code: 13}"
    echo "  - {at: $((t + 1))s, fault: xid, device: 2, code: 79}"
    echo "  - {at: $((t + 3))s, fault: xid, device: 3, code: 13}"
    echo "  - {at: $((t + 4))s, fault: xid, device: 3, code: 79}"
  done
  for t in $(seq 2 4 180); do echo "  - {at: ${t}s, fault: oom_kill}"; done
} >"$WORK/scenario.yaml"

EXPORTER=(exporter --record.dir "$WORK/rec" --diagnostics.config "$WORK/diagnostics.yaml"
  --grpc.max-reports-per-second 2000)
start exporter0 "${EXPORTER[@]}" --web.listen-address 127.0.0.1:0 --grpc.listen-address 127.0.0.1:0
ports=$(wait_for_log exporter0 'ingest on 127.0.0.1:0 \(port [0-9]+\), metrics on 127.0.0.1:0 \(port [0-9]+')
grpc_port=$(nth_port "$ports" 1)
web_port=$(echo "$ports" | grep -Eo 'port [0-9]+' | tail -1 | grep -Eo '[0-9]+')
metrics=http://127.0.0.1:$web_port/metrics

start agent agent --exporter.address "127.0.0.1:$grpc_port" --node.name kill-node --sim 4 \
  --collect.interval 100ms --sim.scenario "$WORK/scenario.yaml" --spool.dir "$WORK/spool"
# A paused agent would ignore cleanup's SIGTERM, and its wait would never end.
trap 'kill -CONT "$agent_PID" 2>/dev/null || true; cleanup' EXIT
wait_for_metric "$metrics" '^accelmon_diagnosis_active\{rule="link_down"' 30

# quiet: the paused agent's reports are all read, applied, diagnosed and acknowledged (none
# waits for the recording or for saving findings), the same in two scrapes in a row.
last_ingested=""
quiet() {
  local now
  now=$(scrape "$metrics" | awk '
    $1 == "accelmon_exporter_reports_ingested_total" { ingested = $2 }
    $1 == "accelmon_exporter_diagnosis_reports_total" { diagnosed += $2 }
    $1 == "accelmon_exporter_diagnosis_dropped_reports_total" { diagnosed += $2 }
    $1 == "accelmon_exporter_acks_waiting" { waiting = $2 }
    END { if (ingested != "" && waiting == 0 && diagnosed == ingested) print ingested }')
  local was=$last_ingested
  last_ingested=$now
  [ -n "$now" ] && [ "$now" = "$was" ]
}
# findings FILE: what the exporter shows, as sorted lines: Watch's initial state (rule, node,
# device, severity, start) and /metrics' accelmon_diagnosis_active (every label).
# (the exporter is quiet meanwhile: the agent is paused). Watch's initial state must arrive
# within the client's second, which a loaded machine may miss: asked again until it holds as many
# findings as /metrics.
body=""
scraped() { body=$(scrape "$metrics"); }
watched() {
  "${WATCH[@]}" "127.0.0.1:$grpc_port" 1 | sed 's/^/watch /' | sort >"$WORK/watch" ||
    fail "Watch failed"
  [ "$(grep -c . "$WORK/watch" || true)" = "$(grep -c '^accelmon_diagnosis_active{' <<<"$body" || true)" ]
}
findings() {
  wait_until 10 "a scrape of $metrics" scraped
  wait_until 20 "Watch's initial state to hold what /metrics shows" watched
  { cat "$WORK/watch"; { grep '^accelmon_diagnosis_active{' <<<"$body" || true; } |
    sed 's/^/metrics /' | sort; } >"$1"
}

kills=20
open_total=0
for i in $(seq 1 $kills); do
  # The random moment is the point: a kill at any time loses no acknowledged finding.
  sleep "0.$((RANDOM % 9 + 1))"
  kill -STOP "$agent_PID"
  last_ingested=""
  wait_until 30 "exporter $((i - 1)) to settle what the paused agent sent" quiet
  findings "$WORK/before$i"
  prev="exporter$((i - 1))_PID"
  kill -KILL "${!prev}"
  wait "${!prev}" 2>/dev/null || true
  start "exporter$i" "${EXPORTER[@]}" --web.listen-address "127.0.0.1:$web_port" \
    --grpc.listen-address "127.0.0.1:$grpc_port"
  wait_for_log "exporter$i" 'ingest on|cannot listen' >/dev/null
  grep -q 'ingest on' "$WORK/exporter$i.log" || fail "exporter $i did not start"
  findings "$WORK/after$i"
  twice=$(grep '^watch ' "$WORK/after$i" | awk '{print $2, $3, $4}' | uniq -d)
  [ -z "$twice" ] || fail "after kill $i a finding is open twice: $twice"
  if ! diff -u "$WORK/before$i" "$WORK/after$i" >"$WORK/diff$i"; then
    cat "$WORK/diff$i" >&2
    fail "kill $i: the restarted exporter shows other findings than the killed one acknowledged"
  fi
  n=$(grep -c '^watch ' "$WORK/before$i" || true)
  open_total=$((open_total + n))
  echo "kill $i: $n finding(s) open, the same after the restart"
  kill -CONT "$agent_PID"
done

# Over every exporter process: what the findings did, as each logged it.
count() { cat "$WORK"/exporter*.log | grep -c "diagnosis: $1 " || true; }
opened=$(count opened)
escalated=$(count escalated)
closed=$(count closed)
# The kills must have come while findings opened, escalated and closed (a loaded machine plays
# fewer of the scenario's ticks: 18 opened in one run, 43 in another).
[ "$opened" -gt 0 ] && [ "$escalated" -gt 0 ] && [ "$closed" -gt 0 ] && [ "$open_total" -gt 0 ] ||
  fail "the scenario did too little: $opened opened, $escalated escalated, $closed closed"
echo "PASS: $kills SIGKILLs, $open_total open findings at the kills all back, none twice" \
  "($opened opened, $escalated escalated, $closed closed across the exporters)"
