#!/usr/bin/env bash
# Nothing is lost across agent crashes: an agent with a disk spool is killed with SIGKILL mid-stream
# three times and restarted on the same spool. It keeps its instance id, its sequences continue
# without a gap, and the one exporter applies every sequence exactly once.
source "$(dirname "$0")/lib.sh"
FIXTURES=${FIXTURES:?set FIXTURES to tests/fixtures}

# The agent reports 50 times a second, the exporter's default per-stream limit: lift it so a
# backlog after a restart drains (this test is about crashes, not throttling).
start exporter --log.level debug exporter --grpc.max-reports-per-second 2000 --web.listen-address 127.0.0.1:0 \
  --grpc.listen-address 127.0.0.1:0
ports=$(wait_for_log exporter 'ingest on 127.0.0.1:0 \(port [0-9]+\), metrics on 127.0.0.1:0 \(port [0-9]+')
grpc_port=$(nth_port "$ports" 1)

agent_args=(agent --exporter.address "127.0.0.1:$grpc_port" --node.name node-a
  --collect.interval 20ms --path.procfs "$FIXTURES/host/proc" --path.sysfs "$FIXTURES/host/sys"
  --sim 2 --spool.dir "$WORK/spool")

applied_count() { grep -c 'applied node=node-a' "$WORK/exporter.log" || true; }
applied_at_least() { [ "$(applied_count)" -ge "$1" ]; }

start agent0 "${agent_args[@]}"
instance=$(wait_for_log agent0 'instance [0-9a-f]{16}, ' | grep -Eo '[0-9a-f]{16}')
[ -s "$WORK/spool/state" ] || fail "no spool state file"

crashes=3
for i in $(seq 1 $crashes); do
  # Let it stream for a while, then kill it at a random moment.
  target=$(($(applied_count) + 20))
  wait_until 20 "the exporter to apply 20 more reports" applied_at_least $target
  # The random moment is the point: crashes at any time lose nothing. Not a wait for anything.
  sleep "0.$((RANDOM % 5 + 1))"
  prev_var="agent$((i - 1))_PID"
  kill -KILL "${!prev_var}"
  wait "${!prev_var}" 2>/dev/null || true
  last_applied=$(grep -Eo 'applied node=node-a instance=[0-9a-f]+ seq=[0-9]+' "$WORK/exporter.log" |
    tail -1 | sed 's/.*seq=//')

  start "agent$i" "${agent_args[@]}"
  line=$(wait_for_log "agent$i" 'instance [0-9a-f]{16}, .*first sequence [0-9]+')
  [ "$(echo "$line" | grep -Eo '[0-9a-f]{16}')" = "$instance" ] ||
    fail "restart $i changed the instance id: $line (was $instance)"
  first=$(echo "$line" | grep -Eo 'first sequence [0-9]+' | grep -Eo '[0-9]+')
  [ "$first" -gt "$last_applied" ] ||
    fail "restart $i starts at sequence $first, but $last_applied was applied already"
  grep -Eq "spool .*instance $instance, [0-9]+ unacknowledged" "$WORK/agent$i.log" ||
    fail "restart $i did not report what its spool held"
done

# Caught up, then a clean stop.
target=$(($(applied_count) + 20))
wait_until 20 "the exporter to apply 20 more reports" applied_at_least $target
stop "agent$crashes"
stopped=$(wait_for_log "agent$crashes" 'agent stopped after sequence [0-9]+; [0-9]+ report')
n=$(echo "$stopped" | grep -Eo 'sequence [0-9]+' | grep -Eo '[0-9]+')
[ "$(echo "$stopped" | grep -Eo '; [0-9]+' | grep -Eo '[0-9]+')" = 0 ] ||
  fail "agent stopped with unacknowledged reports: $stopped"
stop exporter

grep -Eo 'applied node=node-a instance=[0-9a-f]+ seq=[0-9]+' "$WORK/exporter.log" >"$WORK/applied"
grep -qv "instance=$instance " "$WORK/applied" && fail "reports of another instance were applied"
sed 's/.*seq=//' "$WORK/applied" >"$WORK/seqs"
seq 1 "$n" >"$WORK/expected"
diff -q "$WORK/expected" "$WORK/seqs" >/dev/null || {
  diff "$WORK/expected" "$WORK/seqs" | sed -n 1,10p >&2
  fail "the exporter did not apply exactly 1..$n, once each, in order"
}
duplicates=$(grep -c 'duplicate node=node-a' "$WORK/exporter.log" || true)
echo "agent_crash_test: ok ($n reports from instance $instance over $crashes SIGKILLs," \
  "$duplicates re-sent duplicates dropped)"
