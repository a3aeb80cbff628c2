#!/usr/bin/env bash
# A full recording disk: the exporter acknowledges no report it has not recorded, /readyz says
# why, /metrics, the status page and Watch go on showing what the agent sends (marked unrecorded),
# ingest resumes by itself once space is freed, and at the end every report the agent sent is in
# the recording exactly once. The recording lives on a small tmpfs (needs root, or a user
# namespace that may mount; skipped otherwise).
source "$(dirname "$0")/lib.sh"
: "${PYTHONPATH:?set PYTHONPATH to BUILD/python (the generated accelmon.v1 modules)}"
/usr/bin/python3 -c 'import grpc, google.protobuf' 2>/dev/null ||
  skip "/usr/bin/python3 lacks python3-grpcio or python3-protobuf (scripts/install-deps.sh test)"
WATCH=(/usr/bin/python3 "$(dirname "$0")/watch_findings.py")

REC=$WORK/rec
mkdir -p "$REC"
if ! mount -t tmpfs -o size=4m accelmon-e2e "$REC" 2>/dev/null; then
  if [ -z "${ACCELMON_E2E_UNSHARED:-}" ] && unshare -rm true 2>/dev/null; then
    rm -rf "$WORK"
    ACCELMON_E2E_UNSHARED=1 exec unshare -rm bash "$0"
  fi
  skip "cannot mount a tmpfs here (not root, and unshare -rm is refused: no user namespaces)"
fi
# The processes first (they hold files on it), then the mount, then the scratch directory.
trap 'for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
      umount "$REC" 2>/dev/null || true; cleanup' EXIT

# start_recording_exporter NAME: an exporter recording into the tmpfs on ports the kernel picks;
# sets grpc_port, web_port and metrics (its /metrics URL).
start_recording_exporter() {
  start "$1" exporter --web.listen-address 127.0.0.1:0 --grpc.listen-address 127.0.0.1:0 \
    --record.dir "$REC/recording" --record.segment-size 64KiB
  local line
  line=$(wait_for_log "$1" 'ingest on [^ ]+ \(port [0-9]+\), metrics on [^ ]+ \(port [0-9]+')
  grpc_port=$(nth_port "$line" 1)
  web_port=$(nth_port "$line" 2)
  metrics=http://127.0.0.1:$web_port/metrics
}

start_recording_exporter exporter
start agent agent --node.name fulldisk --sim 2 --collect.interval 100ms \
  --exporter.address "127.0.0.1:$grpc_port" --spool.dir "$WORK/spool"

metric() { scrape "$metrics" | awk -v name="$1" '$1 == name { print int($2) }'; }
recorded_at_least() { local n; n=$(metric accelmon_exporter_recorded_reports_total); [ "${n:-0}" -ge "$1" ]; }
acknowledged() { awk '$1 == "acknowledged" { print $2 }' "$WORK/spool/state" 2>/dev/null || echo 0; }
# recorded_sequences: the agent's sequences in the recording, one per line, in recording order.
recorded_sequences() {
  "$ACCELMON" record export --jsonl "$REC/recording" 2>/dev/null |
    python3 -c 'import json, sys
for line in sys.stdin:
    r = json.loads(line)
    if r.get("node") == "fulldisk": print(int(r["sequence"]))'
}
readyz() { curl -sS -o "$WORK/readyz.txt" -w '%{http_code}' "http://127.0.0.1:$web_port/readyz" || true; }

wait_until 30 "reports recorded" recorded_at_least 20

# Fill the disk.
dd if=/dev/zero of="$REC/filler" bs=4k 2>/dev/null || true
wait_until 30 "/readyz to say the recording cannot be written" \
  bash -c "[ \"\$(curl -s -o '$WORK/readyz.txt' -w '%{http_code}' http://127.0.0.1:$web_port/readyz)\" = 503 ]"
grep -q 'not ready: cannot write the recording' "$WORK/readyz.txt" || fail "/readyz: $(cat "$WORK/readyz.txt")"
cat "$WORK/readyz.txt"
[ "$(metric accelmon_exporter_recording_failing)" = 1 ] || fail "accelmon_exporter_recording_failing is not 1"
errors_at_least() { local n; n=$(metric accelmon_exporter_record_errors_total); [ "${n:-0}" -ge "$1" ]; }
# Three tries a second apart: meanwhile the agent made about 30 more reports.
wait_until 30 "three failed tries" errors_at_least 3
recorded_max=$(recorded_sequences | sort -n | tail -1)
acked=$(acknowledged)
echo "while full: recorded up to $recorded_max, agent acknowledged up to $acked"
[ "$acked" -le "$recorded_max" ] || fail "acknowledged $acked but recorded only up to $recorded_max"
[ "$(readyz)" = 503 ] || fail "/readyz ready again while the disk is full"

# Live views go on: past the 64 reports a stream holds unacknowledged, the exporter reads on and
# shows what the agent sends, marked unrecorded, and acknowledges none of it.
unrecorded_at_least() { local n; n=$(metric accelmon_exporter_reports_unrecorded_total); [ "${n:-0}" -ge "$1" ]; }
wait_until 30 "reports shown unrecorded while the disk is full" unrecorded_at_least 5
[ "$(metric accelmon_exporter_unrecorded_nodes)" = 1 ] || fail "accelmon_exporter_unrecorded_nodes is not 1"
report_time() {
  scrape "$metrics" | awk '/^accelmon_node_last_report_timestamp_seconds\{.*node="fulldisk"/ { print $2 }'
}
shown=$(report_time)
newer() { awk -v now="$(report_time)" -v then="$shown" 'BEGIN { exit !(now > then) }'; }
wait_until 10 "/metrics to show a newer report while the disk is full" newer
status=$(curl -fsS "http://127.0.0.1:$web_port/api/v1/status")
grep -Eq '"node":"fulldisk","up":true,"recorded":false' <<<"$status" ||
  fail "the status page does not mark the node unrecorded: $status"
"${WATCH[@]}" "127.0.0.1:$grpc_port" 1.5 --reports >"$WORK/watch.txt" || fail "Watch failed"
watched=$(grep -Ec '^report fulldisk [0-9]+ unrecorded$' "$WORK/watch.txt" || true)
[ "$watched" -ge 3 ] || fail "Watch showed $watched unrecorded reports in 1.5 s: $(cat "$WORK/watch.txt")"
[ "$(readyz)" = 503 ] || fail "/readyz ready while the disk is full"
recorded_max=$(recorded_sequences | sort -n | tail -1)
acked=$(acknowledged)
[ "$acked" -le "$recorded_max" ] || fail "acknowledged $acked but recorded only up to $recorded_max"
echo "while full: $(metric accelmon_exporter_reports_unrecorded_total) reports shown unrecorded," \
  "$watched of them on Watch in 1.5 s; recorded up to $recorded_max, acknowledged up to $acked"

# Free the space: ingest resumes by itself.
rm -f "$REC/filler"
wait_until 30 "/readyz to be ready again" bash -c "[ \"\$(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:$web_port/readyz)\" = 200 ]"
[ "$(metric accelmon_exporter_recording_failing)" = 0 ] || fail "still failing after space was freed"
caught_up() { [ "$(acknowledged)" -ge $((recorded_max + 30)) ]; }
wait_until 60 "the agent's reports held meanwhile to be acknowledged" caught_up
[ "$(metric accelmon_exporter_unrecorded_nodes)" = 0 ] || fail "a node is still shown unrecorded"

stop agent 20
final_ack=$(acknowledged)
stop exporter 20
recorded_sequences >"$WORK/sequences.txt"
python3 - "$WORK/sequences.txt" "$final_ack" <<'PY' || fail "the recording does not hold every report exactly once"
import collections, sys
seqs = [int(s) for s in open(sys.argv[1]).read().split()]
acked = int(sys.argv[2])
dups = [s for s, n in collections.Counter(seqs).items() if n > 1]
missing = sorted(set(range(1, max(seqs) + 1)) - set(seqs))
print(f"recording: {len(seqs)} reports of node fulldisk, sequences 1..{max(seqs)}, "
      f"{len(dups)} twice, {len(missing)} missing; agent acknowledged up to {acked}")
sys.exit(1 if dups or missing or max(seqs) < acked else 0)
PY

# SIGTERM while the disk is full: a clean stop, not a hang on the acks that wait for the disk
# (their reports are the agent's to send again).
start_recording_exporter exporter2
start agent2 agent --node.name fulldisk2 --sim 2 --collect.interval 100ms \
  --exporter.address "127.0.0.1:$grpc_port"
wait_until 30 "reports recorded" recorded_at_least 5
dd if=/dev/zero of="$REC/filler" bs=4k 2>/dev/null || true
wait_until 30 "reports shown unrecorded while the disk is full" unrecorded_at_least 70
stop exporter2 20
stop agent2 20
echo "PASS: no report acknowledged unrecorded while the disk was full, live views meanwhile," \
  "all recorded exactly once; a clean stop while full"
