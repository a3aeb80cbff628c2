#!/usr/bin/env bash
# A job's post-mortem across exporters: `accelmon simulate` plays a 4-node job (32 ranks) into one
# JSON Lines file, as one exporter that saw every node would have recorded it; the test then splits
# it the way two exporters would have recorded it (sim-0 and sim-1 on one, sim-2 and sim-3 on the
# other, sim-3 moving over halfway with the report in flight at the move in both), imports each
# half into a recording directory, and checks that `diagnose`, `record inspect` and
# `replay --openmetrics` over the two recordings give what they give over the one: the same
# findings, first fault included, and every report once.
source "$(dirname "$0")/lib.sh"

FIXTURES=${FIXTURES:?set FIXTURES to tests/fixtures}
PY=/usr/bin/python3
START=2026-12-01T08:00:00Z

# split ALL A B: the two exporters' halves of ALL.
split() {
  "$PY" - "$@" <<'PY'
import json, sys
src, a, b = sys.argv[1:]
with open(src) as f, open(a, "w") as fa, open(b, "w") as fb:
    for line in f:
        r = json.loads(line)
        seq = int(r["sequence"])
        if r["node"] in ("sim-0", "sim-1"):
            fa.write(line)
        elif r["node"] == "sim-2" or seq < 135:
            fb.write(line)
        elif seq == 135:  # in flight while sim-3 moved: both exporters applied it
            fa.write(line)
            fb.write(line)
        else:
            fa.write(line)
PY
}

# same_findings ONE.json TWO.json: the findings of both are equal, field for field.
same_findings() {
  "$PY" - "$@" <<'PY'
import json, sys
one, two = (json.load(open(p)) for p in sys.argv[1:])
a, b = one["findings"], two["findings"]
assert a, "the single recording has no findings"
if a != b:
    for fa, fb in zip(a, b):
        if fa != fb:
            print("first difference:\n one:", json.dumps(fa)[:600], "\n two:", json.dumps(fb)[:600])
            break
    sys.exit(f"{len(a)} findings over one recording, {len(b)} over two, not the same")
assert two["input"]["recordings"] == 2, two["input"]
assert two["input"]["duplicates"] == 1, two["input"]
assert two["input"]["reports"] == one["input"]["reports"] + 1, (one["input"], two["input"])
assert two["input"]["nodes"] == 4, two["input"]
PY
}

for scenario in job_stall_after_xid job_straggler; do
  all="$WORK/$scenario.jsonl"
  "$ACCELMON" simulate --nodes 4 --duration 45m --interval 10s --start "$START" \
    --scenario "$FIXTURES/scenarios/$scenario.yaml" --output "$all" >"$WORK/simulate.log" 2>&1 ||
    fail "simulate $scenario failed"
  split "$all" "$WORK/a.jsonl" "$WORK/b.jsonl"
  rm -rf "$WORK/exporter-a" "$WORK/exporter-b"
  "$ACCELMON" record import --jsonl "$WORK/a.jsonl" "$WORK/exporter-a" >/dev/null 2>&1 ||
    fail "record import a failed"
  "$ACCELMON" record import --jsonl "$WORK/b.jsonl" "$WORK/exporter-b" >/dev/null 2>&1 ||
    fail "record import b failed"

  "$ACCELMON" diagnose "$all" --job 4711 --format json -o "$WORK/one.json" ||
    fail "diagnose over the single recording failed"
  "$ACCELMON" diagnose "$WORK/exporter-a" "$WORK/exporter-b" --job 4711 --format json \
    -o "$WORK/two.json" || fail "diagnose over both recordings failed"
  same_findings "$WORK/one.json" "$WORK/two.json" || fail "$scenario: findings differ"

  # The order of the recordings does not matter.
  "$ACCELMON" diagnose "$WORK/exporter-b" "$WORK/exporter-a" --job 4711 --format json \
    -o "$WORK/two-reversed.json" || fail "diagnose b a failed"
  same_findings "$WORK/one.json" "$WORK/two-reversed.json" || fail "$scenario: order matters"
done

# The first fault survives the split: the job stall names the XID on sim-2 device 3 (the last
# scenario run above is the straggler, so diagnose the stall again, as text).
split "$WORK/job_stall_after_xid.jsonl" "$WORK/a.jsonl" "$WORK/b.jsonl"
"$ACCELMON" diagnose "$WORK/a.jsonl" "$WORK/b.jsonl" --job 4711 --rules xid_error,job_stall \
  -o "$WORK/timeline.txt" || fail "diagnose (text) failed"
grep -q 'likely a consequence of xid_error on sim-2 device 3' "$WORK/timeline.txt" ||
  fail "no first fault in the merged timeline: $(cat "$WORK/timeline.txt")"
# The stall is printed under the XID it follows from, not as an incident of its own.
grep -Eq '^    1 likely consequence of it:$' "$WORK/timeline.txt" &&
  grep -Eq '^      [0-9T:.-]+Z  CRITICAL  job_stall  node sim-2  job 4711: ' "$WORK/timeline.txt" ||
  fail "the stall is not grouped under its first fault: $(cat "$WORK/timeline.txt")"
grep -q '2 recordings merged by time, 1 report held by two of them read once' "$WORK/timeline.txt" ||
  fail "the timeline's input line does not say what was merged: $(head -n 2 "$WORK/timeline.txt")"

# record inspect: every node, the duplicate counted once.
"$ACCELMON" record inspect "$WORK/exporter-a" "$WORK/exporter-b" >"$WORK/inspect.txt" ||
  fail "record inspect failed"
grep -Eq '^Nodes: +4$' "$WORK/inspect.txt" || fail "inspect: not 4 nodes: $(cat "$WORK/inspect.txt")"
grep -Eq '^  sim-3 +8 devices, 270 reports$' "$WORK/inspect.txt" ||
  fail "inspect: sim-3 not read once per report: $(cat "$WORK/inspect.txt")"
grep -Eq '^Duplicates: +1 report held by two recordings' "$WORK/inspect.txt" ||
  fail "inspect: the duplicate is not reported: $(cat "$WORK/inspect.txt")"

# replay --openmetrics: the same samples from both recordings as from the one.
"$ACCELMON" replay "$WORK/job_straggler.jsonl" --openmetrics "$WORK/om-one" >"$WORK/om-one.txt" ||
  fail "replay of one recording failed"
"$ACCELMON" replay "$WORK/exporter-a" "$WORK/exporter-b" --openmetrics "$WORK/om-two" \
  >"$WORK/om-two.txt" || fail "replay of two recordings failed"
one=$(grep -Eo '[0-9]+ reports, [0-9]+ samples' "$WORK/om-one.txt")
two=$(grep -Eo '[0-9]+ reports, [0-9]+ samples' "$WORK/om-two.txt")
[ -n "$one" ] && [ "$one" = "$two" ] || fail "replay: one recording gave '$one', two gave '$two'"
grep -q '1 report held by two recordings written once' "$WORK/om-two.txt" ||
  fail "replay does not say it skipped the duplicate: $(cat "$WORK/om-two.txt")"

echo "diagnose_across_recordings_test: ok"
