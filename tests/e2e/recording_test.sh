#!/usr/bin/env bash
# The worked example of docs/recording.md, end to end with the real binary: record a
# `standalone --sim 8` run, inspect and verify it, round-trip it through JSON Lines, damage a copy,
# verify that, replay it into a fresh exporter, and backfill it into a real promtool TSDB.
source "$(dirname "$0")/lib.sh"

NODE=rec-node
REC=$WORK/rec

# --- record a couple of seconds of a standalone run: 20 reports or more
start standalone standalone --sim 8 --collect.interval 100ms --node.name "$NODE" \
  --web.listen-address 127.0.0.1:0 --push.socket "" --record.dir "$REC"
url=$(wait_for_log standalone 'http://[^ ]+/metrics')
wait_for_metric "$url" '^accelmon_device_memory_used_bytes\{.*device="7"'
wait_for_metric "$url" '^accelmon_exporter_recorded_reports_total ([2-9][0-9]|[1-9][0-9]{2,})$'
stop standalone

# --- inspect: one node, eight devices
"$ACCELMON" record inspect "$REC" >"$WORK/inspect.txt" || fail "record inspect exited $?"
grep -Eq '^Nodes: +1$' "$WORK/inspect.txt" || fail "inspect: not 1 node: $(cat "$WORK/inspect.txt")"
grep -Eq "^  $NODE +8 devices" "$WORK/inspect.txt" || fail "inspect: $NODE without 8 devices"
grep -Eq '^Devices: +8$' "$WORK/inspect.txt" || fail "inspect: not 8 devices"
grep -Eq '^Damage: +none$' "$WORK/inspect.txt" || fail "inspect: damage in a clean recording"
grep -Eq '^[0-9]{20}\.seg .* exporter ' "$WORK/inspect.txt" || fail "inspect: no segment row"

# --- verify: clean
"$ACCELMON" record verify "$REC" >"$WORK/verify.txt" || fail "verify of a clean recording: $?"
grep -q '^OK: ' "$WORK/verify.txt" || fail "verify: no OK line: $(cat "$WORK/verify.txt")"

# --- usage errors and what is not a recording exit 2
set +e
"$ACCELMON" record verify "$WORK/missing" 2>"$WORK/err.txt"
rc=$?
set -e
[ $rc -eq 2 ] || fail "verify of a missing path exited $rc, not 2"
mkdir "$WORK/empty"
set +e
"$ACCELMON" record verify "$WORK/empty" 2>"$WORK/err.txt"
rc=$?
set -e
[ $rc -eq 2 ] && grep -q 'not a recording' "$WORK/err.txt" || fail "empty dir: rc $rc, $(cat "$WORK/err.txt")"

# --- JSON Lines round trip: export -> import -> export gives the same bytes
"$ACCELMON" record export --jsonl -o "$WORK/a.jsonl" "$REC" || fail "export exited $?"
"$ACCELMON" record import --jsonl "$WORK/a.jsonl" "$WORK/rec2" >"$WORK/import.txt" ||
  fail "import exited $?: $(cat "$WORK/import.txt")"
"$ACCELMON" record export --jsonl "$WORK/rec2" >"$WORK/b.jsonl" || fail "second export exited $?"
cmp -s "$WORK/a.jsonl" "$WORK/b.jsonl" || fail "export -> import -> export changed the reports"
reports=$(wc -l <"$WORK/a.jsonl")
[ "$reports" -ge 10 ] || fail "only $reports reports recorded"
grep -Eq "^Reports: +$reports in" "$WORK/inspect.txt" || fail "inspect and export disagree on $reports"
output_has '^[0-9]{20}\.seg .* import ' "$ACCELMON" record inspect "$WORK/rec2" ||
  fail "imported segments not written by \"import\""

# A bad line is named by FILE:LINE, skipped, and makes the import exit 1.
{ head -n 2 "$WORK/a.jsonl"; echo '{"node": oops}'; tail -n +3 "$WORK/a.jsonl"; } >"$WORK/bad.jsonl"
set +e
"$ACCELMON" record import --jsonl "$WORK/bad.jsonl" "$WORK/rec3" >"$WORK/import3.txt" 2>"$WORK/err.txt"
rc=$?
set -e
[ $rc -eq 1 ] || fail "import with a bad line exited $rc, not 1"
grep -q "bad.jsonl:3: " "$WORK/err.txt" || fail "bad line not named: $(cat "$WORK/err.txt")"
grep -q "imported $reports reports" "$WORK/import3.txt" || fail "import lost good lines"

# --- damage a copy in the middle of its biggest segment; verify names segment and offset
cp -r "$REC" "$WORK/damaged"
seg=$(first_line "$(ls -S "$WORK/damaged"/*.seg)")
size=$(stat -c %s "$seg")
at=$((size / 2))
dd if=/dev/zero of="$seg" bs=1 seek="$at" count=64 conv=notrunc status=none
set +e
"$ACCELMON" record verify "$WORK/damaged" >"$WORK/verify-damaged.txt"
rc=$?
set -e
[ $rc -eq 1 ] || fail "verify of a damaged recording exited $rc, not 1"
grep -Eq "$(basename "$seg") offset [0-9]+: [0-9]+ bytes lost: " "$WORK/verify-damaged.txt" ||
  fail "damage not reported precisely: $(cat "$WORK/verify-damaged.txt")"
# The regions reported together cover the zeroed bytes.
covered=$(grep -Eo 'offset [0-9]+: [0-9]+ bytes lost' "$WORK/verify-damaged.txt" |
  awk -v at="$at" -v end=$((at + 64)) 'BEGIN { cur = at }
    { o = $2 + 0; e = o + $3; if (o <= cur && e > cur) cur = e }
    END { print (cur >= end) ? "yes" : "no" }')
[ "$covered" = yes ] || fail "reported damage does not cover [$at, +64): $(cat "$WORK/verify-damaged.txt")"

# --- replay the damaged copy into a fresh exporter
set +e
"$ACCELMON" replay "$WORK/damaged" --exporter.address 127.0.0.1:1 2>"$WORK/err.txt"
rc=$?
set -e
[ $rc -eq 1 ] && grep -q 'cannot reach the exporter' "$WORK/err.txt" ||
  fail "replay to nowhere: rc $rc, $(cat "$WORK/err.txt")"

start exporter exporter --web.listen-address 127.0.0.1:0 --grpc.listen-address 127.0.0.1:0
ports=$(wait_for_log exporter 'ingest on 127.0.0.1:0 \(port [0-9]+\), metrics on 127.0.0.1:0 \(port [0-9]+')
grpc_port=$(nth_port "$ports" 1)
web_port=$(echo "$ports" | grep -Eo 'port [0-9]+' | tail -1 | grep -Eo '[0-9]+')
set +e
"$ACCELMON" replay "$WORK/damaged" --exporter.address "127.0.0.1:$grpc_port" --speed max \
  --shift-to-now >"$WORK/replay.txt" 2>"$WORK/err.txt"
rc=$?
set -e
# Exit 1: the damaged region could not be replayed; everything else was, and applied.
[ $rc -eq 1 ] || fail "replay of the damaged copy exited $rc: $(cat "$WORK/err.txt")"
grep -q 'damaged region' "$WORK/err.txt" || fail "replay did not mention the damage"
grep -Eq "^replayed [0-9]+ reports of 1 node .*: [0-9]+ applied, 0 duplicate, 0 rejected" \
  "$WORK/replay.txt" || fail "replay summary: $(cat "$WORK/replay.txt")"
curl -fsS "http://127.0.0.1:$web_port/metrics" >"$WORK/replayed.txt"
used=$(grep -c "^accelmon_device_memory_used_bytes{node=\"$NODE\"" "$WORK/replayed.txt" || true)
[ "$used" -eq 8 ] || fail "expected 8 devices' memory used of $NODE after replay, found $used"
# --shift-to-now moved the reports to the present: the node's last report is recent. (Not
# accelmon_node_up 1: that needs a report within 3x the recorded 100ms interval of the scrape,
# which a loaded CI machine misses between the replay's end and curl.)
last=$(grep "^accelmon_node_last_report_timestamp_seconds{node=\"$NODE\"}" "$WORK/replayed.txt" |
  awk '{ printf "%d", $2 }')
[ -n "$last" ] && [ $(( $(date +%s) - last )) -lt 120 ] ||
  fail "$NODE's last report after --shift-to-now is not recent: '${last}'"
stop exporter

# --- backfill: OpenMetrics -> promtool TSDB blocks -> the recorded values come back
"$ACCELMON" replay "$REC" --openmetrics "$WORK/om" >"$WORK/om.txt" || fail "replay --openmetrics: $?"
grep -q 'promtool tsdb create-blocks-from openmetrics' "$WORK/om.txt" || fail "no promtool hint"
for f in "$WORK"/om/*.om; do
  promtool tsdb create-blocks-from openmetrics "$f" "$WORK/tsdb" >"$WORK/promtool.log" 2>&1 ||
    fail "promtool create-blocks-from $f: $(tail -5 "$WORK/promtool.log")"
done
mkdir -p "$WORK/tsdb/wal"  # promtool tsdb dump opens the (empty) WAL too
promtool tsdb dump "$WORK/tsdb" 2>"$WORK/promtool.log" |
  grep "^{__name__=\"accelmon_device_memory_used_bytes\", device=\"0\", .*node=\"$NODE\"" |
  awk '{ printf "%s %.0f\n", $(NF), $(NF-1) }' | sort >"$WORK/dumped.txt"
# The recorded (timestamp in ms, device 0's memory used) of every report, from the export.
while IFS= read -r report; do
  ts=$(first_line "$(grep -Eo '"timestamp":"[^"]+"' <<<"$report")" | cut -d'"' -f4)
  used=$(first_line "$(grep -Eo '"usedBytes":"[0-9]+"' <<<"${report#*\"devices\":[}")" | cut -d'"' -f4)
  echo "$(date -u -d "$ts" +%s%3N) $used"
done <"$WORK/a.jsonl" | sort >"$WORK/recorded.txt"
[ "$(wc -l <"$WORK/recorded.txt")" -eq "$reports" ] || fail "could not read back every report"
diff "$WORK/recorded.txt" "$WORK/dumped.txt" >"$WORK/diff.txt" ||
  fail "promtool tsdb dump differs from the recording: $(head -n 5 "$WORK/diff.txt")"

echo "recording_test: ok ($reports reports)"
