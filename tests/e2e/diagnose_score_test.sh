#!/usr/bin/env bash
# `accelmon diagnose --score` (docs/diagnostics.md "Scoring"): the link_down scenario simulated
# (one node, 8 devices, 40 minutes at 10 s) and scored against its own expect: list: recall 1, no
# false finding, in JSON and in text; a bad expectations file exits 2 naming its file and line.
source "$(dirname "$0")/lib.sh"

FIXTURES=${FIXTURES:?set FIXTURES to tests/fixtures}
PY=/usr/bin/python3
SCENARIO="$FIXTURES/scenarios/link_down.yaml"

"$ACCELMON" simulate --nodes 1 --sim 8 --duration 40m --interval 10s \
  --start 2026-12-02T00:00:00Z --scenario "$SCENARIO" --record.dir "$WORK/rec" \
  >"$WORK/simulate.log" 2>&1 || fail "simulate failed"

# diagnose ARGS... : runs it, leaving stdout, stderr and the exit code in $WORK/out, err, rc.
diagnose() {
  set +e
  "$ACCELMON" diagnose "$@" >"$WORK/out" 2>"$WORK/err"
  rc=$?
  set -e
}

# --- json: every expectation found, nothing false, the onset error of link_down known
diagnose "$WORK/rec" --score "$SCENARIO" --format json
[ $rc -eq 0 ] || fail "diagnose --score exited $rc: $(cat "$WORK/err")"
$PY - "$WORK/out" "$SCENARIO" <<'PY' || fail "score: $(cat "$WORK/out")"
import json, sys
doc = json.load(open(sys.argv[1]))
assert doc["expectations"] == sys.argv[2], doc["expectations"]
assert doc["first_report"] == "2026-12-02T00:00:00.000Z", doc["first_report"]
t = doc["total"]
assert t["expected"] == 1 and t["found"] == 1 and t["missed"] == 0, t
assert t["recall"] == 1, t
assert t["false"] == 0 and doc["false_findings"] == [], doc["false_findings"]
[row] = [r for r in doc["rules"] if r["rule"] == "link_down"]
assert row["recall"] == 1 and row["onset_error_s"]["median_abs"] is not None, row
[m] = doc["matches"]
assert m["found"] and m["node"] == "sim-0" and m["device"] == "0" and m["link"] == "nvlink0", m
assert m["onset"] == "2026-12-02T00:35:00.000Z", m
assert abs(m["onset_error_s"]) <= 10, m  # within one report interval
assert m["detection_delay_s"] >= 0, m
PY

# --- text: the table's row and the recall line
diagnose "$WORK/rec" --score "$SCENARIO"
[ $rc -eq 0 ] || fail "diagnose --score (text) exited $rc: $(cat "$WORK/err")"
grep -Eq '^link_down +1 +1 +0 +0 +0 ' "$WORK/out" || fail "text row: $(cat "$WORK/out")"
grep -q '^recall 1/1, 0 false findings$' "$WORK/out" || fail "text recall: $(cat "$WORK/out")"

# --- a miss is a measurement, not an error: exit 0
printf 'expect:\n  - {rule: xid_error, node: sim-0, device: 5, onset: 10m}\n' >"$WORK/miss.yaml"
diagnose "$WORK/rec" --score "$WORK/miss.yaml" --format json
[ $rc -eq 0 ] || fail "a missed expectation exited $rc"
$PY -c 'import json,sys; t=json.load(open(sys.argv[1]))["total"]; assert t["missed"] == 1 and t["false"] == 1, t' \
  "$WORK/out" || fail "miss: $(cat "$WORK/out")"

# --- a bad expectations file: exit 2, FILE:LINE, before the recording is read
printf 'expect:\n  - rule: link_down\n    node: sim-0\n    onset: 35 minutes\n' >"$WORK/bad.yaml"
diagnose "$WORK/rec" --score "$WORK/bad.yaml"
[ $rc -eq 2 ] || fail "a bad expectations file exited $rc, expected 2"
grep -q "^accelmon: $WORK/bad.yaml:4: onset: \"35 minutes\" is not a duration" "$WORK/err" ||
  fail "bad expectations said: $(cat "$WORK/err")"
[ ! -s "$WORK/out" ] || fail "a bad expectations file still printed: $(cat "$WORK/out")"
echo "diagnose_score_test: ok"
