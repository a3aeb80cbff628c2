#!/usr/bin/env bash
# Nothing is lost across exporter crashes: an agent with a disk spool reports every 20ms while its
# exporter is killed with SIGKILL 20 times and restarted on the same ports. Over all exporter
# processes every sequence is applied at least once; no single process applies one twice (after a
# kill, re-applying is correct: the killed process's state is gone).
source "$(dirname "$0")/lib.sh"
FIXTURES=${FIXTURES:?set FIXTURES to tests/fixtures}

# The agent reports 50 times a second, the default per-stream limit: lift it, so that a backlog
# after a kill can drain (this test is about crashes, not throttling).
LIMIT=(--grpc.max-reports-per-second 2000)
start exporter0 --log.level debug exporter "${LIMIT[@]}" --web.listen-address 127.0.0.1:0 \
  --grpc.listen-address 127.0.0.1:0
ports=$(wait_for_log exporter0 'ingest on 127.0.0.1:0 \(port [0-9]+\), metrics on 127.0.0.1:0 \(port [0-9]+')
grpc_port=$(nth_port "$ports" 1)
web_port=$(echo "$ports" | grep -Eo 'port [0-9]+' | tail -1 | grep -Eo '[0-9]+')

start agent agent --exporter.address "127.0.0.1:$grpc_port" --node.name node-a \
  --collect.interval 20ms --path.procfs "$FIXTURES/host/proc" --path.sysfs "$FIXTURES/host/sys" \
  --sim 2 --spool.dir "$WORK/spool"
wait_for_log exporter0 'applied node=node-a instance=[0-9a-f]+ seq=[0-9]+' >/dev/null

kills=20
for i in $(seq 1 $kills); do
  # The random moment is the point: crashes at any time lose nothing. Not a wait for anything.
  sleep "0.$((RANDOM % 5 + 1))"
  prev_var="exporter$((i - 1))_PID"
  kill -KILL "${!prev_var}"
  wait "${!prev_var}" 2>/dev/null || true
  start "exporter$i" --log.level debug exporter "${LIMIT[@]}" --web.listen-address "127.0.0.1:$web_port" \
    --grpc.listen-address "127.0.0.1:$grpc_port"
  wait_for_log "exporter$i" 'ingest on|cannot listen' >/dev/null
  grep -q 'cannot listen' "$WORK/exporter$i.log" && fail "exporter $i could not bind its ports"
done

# The last exporter is up: wait until it has caught up with the agent's backlog, as the agent
# itself says in every report (its spool holds only the last tick or two once caught up). The
# exporter reads a catching-up stream at --grpc.max-reports-per-second, so a long outage on a busy
# machine can take many seconds to drain.
last="exporter$kills"
wait_for_log "$last" 'applied node=node-a' 30 >/dev/null
wait_until 60 "the last exporter to catch up with the agent's spool" \
  spool_drained "http://127.0.0.1:$web_port/metrics"

stop agent
stopped=$(wait_for_log agent 'agent stopped after sequence [0-9]+; [0-9]+ report')
n=$(echo "$stopped" | grep -Eo 'sequence [0-9]+' | grep -Eo '[0-9]+')
unacked=$(echo "$stopped" | grep -Eo '; [0-9]+' | grep -Eo '[0-9]+')
[ "$unacked" = 0 ] || fail "agent stopped with $unacked unacknowledged reports"
stop "$last"

instance=$(grep -Eo -m 1 'instance [0-9a-f]+, ' "$WORK/agent.log" | grep -Eo '[0-9a-f]{16}')
applied_total=0
for i in $(seq 0 $kills); do
  log="$WORK/exporter$i.log"
  grep -Eo 'applied node=node-a instance=[0-9a-f]+ seq=[0-9]+' "$log" >"$WORK/applied$i" || true
  grep -qv "instance=$instance " "$WORK/applied$i" &&
    fail "exporter $i applied reports of another instance than $instance"
  sed 's/.*seq=//' "$WORK/applied$i" | sort -n >"$WORK/seqs$i"
  dups=$(uniq -d "$WORK/seqs$i" | sed -n 1,5p | tr '\n' ' ')
  [ -z "$dups" ] || fail "exporter $i applied sequences twice: $dups"
  applied_total=$((applied_total + $(wc -l <"$WORK/seqs$i")))
done
cat "$WORK"/seqs* | sort -nu >"$WORK/all"
seq 1 "$n" >"$WORK/expected"
missing=$(comm -23 <(sort "$WORK/expected") <(sort "$WORK/all") | sort -n | sed -n 1,10p | tr '\n' ' ')
[ -z "$missing" ] || fail "sequences never applied: $missing(of 1..$n)"
extra=$(comm -13 <(sort "$WORK/expected") <(sort "$WORK/all") | sed -n 1,5p | tr '\n' ' ')
[ -z "$extra" ] || fail "sequences applied that the agent never reported: $extra"
duplicates=$(cat "$WORK"/exporter*.log | grep -c 'duplicate node=node-a' || true)
echo "exporter_crash_test: ok ($n reports, $kills exporter kills, $applied_total applications," \
  "$duplicates duplicates dropped)"
