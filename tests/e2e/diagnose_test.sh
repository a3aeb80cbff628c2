#!/usr/bin/env bash
# `accelmon diagnose` end to end: a simulated fleet (2 nodes, 4 devices, 50 minutes at 10 s) with
# the memory_fragmentation scenario (fragmentation creeps up on device 0 from 35m and crosses
# 0.5 near 40m), as JSON Lines and as a recording directory; the three formats, --rules, a bad
# config, stdin, a damaged input.
source "$(dirname "$0")/lib.sh"

FIXTURES=${FIXTURES:?set FIXTURES to tests/fixtures}
PY=/usr/bin/python3
SCENARIO="$FIXTURES/scenarios/memory_fragmentation.yaml"
IN="$WORK/fleet.jsonl"
START=2026-12-02T03:00:00Z

"$ACCELMON" simulate --nodes 2 --sim 4 --duration 50m --interval 10s --start "$START" \
  --scenario "$SCENARIO" --output "$IN" >"$WORK/simulate.log" 2>&1 || fail "simulate failed"
"$ACCELMON" simulate --nodes 2 --sim 4 --duration 50m --interval 10s --start "$START" \
  --scenario "$SCENARIO" --record.dir "$WORK/rec" >>"$WORK/simulate.log" 2>&1 ||
  fail "simulate --record.dir failed"
reports=$(wc -l <"$IN")

# diagnose ARGS... : runs it, leaving stdout, stderr and the exit code in $WORK/out, err, rc.
diagnose() {
  set +e
  "$ACCELMON" diagnose "$@" >"$WORK/out" 2>"$WORK/err"
  rc=$?
  set -e
}

# --- text: header, the fragmentation finding on device 0 from 35m on, the footer
diagnose "$IN"
[ $rc -eq 0 ] || fail "diagnose (text) exited $rc: $(cat "$WORK/err")"
output_has "^$IN: $reports reports from 2 nodes, 2026-12-02T03:00:00.000Z \.\. " head -n 1 "$WORK/out" ||
  fail "text header: $(head -n 1 "$WORK/out")"
grep -Eq '^2026-12-02T03:(3[5-9]|4[0-9]):[0-9]{2}\.[0-9]{3}Z  (WARNING |CRITICAL)  memory_fragmentation  node sim-[0-9]+ device 0  ' \
  "$WORK/out" || fail "no memory_fragmentation finding on device 0 after 35m: $(cat "$WORK/out")"
grep -Eq '^    (still open|ended [0-9:]{8} \(.*\))$' "$WORK/out" || fail "no end line: $(cat "$WORK/out")"
output_has '^[0-9]+ findings? \([0-9]+ still open\): .*memory_fragmentation [0-9]+' tail -n 1 "$WORK/out" ||
  fail "text footer: $(tail -n 1 "$WORK/out")"
cp "$WORK/out" "$WORK/text.txt"

# --- json: valid, the documented fields, the same finding; a recording directory finds the same
diagnose "$IN" --format json -o "$WORK/jsonl.json"
[ $rc -eq 0 ] || fail "diagnose --format json exited $rc: $(cat "$WORK/err")"
[ ! -s "$WORK/out" ] || fail "-o: something went to stdout too"
$PY -m json.tool "$WORK/jsonl.json" >/dev/null || fail "json output is not JSON"
$PY - "$WORK/jsonl.json" "$reports" <<'EOF' || fail "json content: $(head -c 2000 "$WORK/jsonl.json")"
import json, sys
doc = json.load(open(sys.argv[1]))
assert doc["input"]["reports"] == int(sys.argv[2]) and doc["input"]["nodes"] == 2, doc["input"]
assert doc["input"]["damage"] == 0
keys = {"rule", "severity", "node", "device", "link", "job", "consequence_of", "caused_by",
        "action", "start", "detected_at", "window_start", "end", "summary", "evidence"}
for f in doc["findings"]:
    assert set(f) == keys, f
    assert f["severity"] in ("warning", "critical")
    assert f["end"] is None or f["end"] >= f["start"]
    assert f["detected_at"] >= f["start"], f  # RFC 3339 in UTC: text order is time order
frag = [f for f in doc["findings"] if f["rule"] == "memory_fragmentation"]
assert frag, "no memory_fragmentation finding"
assert all(f["device"] == "0" and f["link"] == "" for f in frag), frag
assert all(f["job"] == "sim-job" for f in frag), frag  # the simulated device's job
assert all(f["start"] >= "2026-12-02T03:35:00" for f in frag), frag
assert any(e["name"] == "fragmentation_ratio" for f in frag for e in f["evidence"]), frag
EOF
diagnose "$WORK/rec" --format json -o "$WORK/rec.json"
[ $rc -eq 0 ] || fail "diagnose of the recording directory exited $rc: $(cat "$WORK/err")"
$PY - "$WORK/jsonl.json" "$WORK/rec.json" <<'EOF' || fail "recording and JSON Lines disagree"
import json, sys
a, b = (json.load(open(p))["findings"] for p in sys.argv[1:])
assert a == b, (a, b)
EOF

# --- html: one page, a plot per finding that has data, nothing fetched from elsewhere
diagnose "$WORK/rec" --format html -o "$WORK/report.html"
[ $rc -eq 0 ] || fail "diagnose --format html exited $rc: $(cat "$WORK/err")"
grep -q '^<!DOCTYPE html>' "$WORK/report.html" || fail "html: no doctype"
grep -q '<polyline class="line" points="' "$WORK/report.html" || fail "html: no plot line"
grep -q 'class="span ' "$WORK/report.html" || fail "html: no shaded span"
http=$(grep -o 'http[^"]*' "$WORK/report.html" | grep -vc '^http://www.w3.org/2000/svg$' || true)
[ "$http" -eq 0 ] || fail "html refers to something outside the page"
! grep -Eq '<script|<link|@import' "$WORK/report.html" || fail "html is not self-contained"

# --- --rules: only those; an unknown id exits 2 naming the known ones
diagnose "$IN" --rules link_down,memory_fragmentation
[ $rc -eq 0 ] || fail "--rules exited $rc"
grep -q ' memory_fragmentation ' "$WORK/out" || fail "--rules dropped the selected rule"
diagnose "$IN" --rules link_down
[ $rc -eq 0 ] || fail "--rules link_down exited $rc"
! grep -q ' memory_fragmentation ' "$WORK/out" || fail "--rules link_down still ran memory_fragmentation"
diagnose "$IN" --rules no_such_rule
[ $rc -eq 2 ] || fail "unknown rule exited $rc, not 2"
grep -q 'unknown rule "no_such_rule" (known: .*memory_fragmentation' "$WORK/err" ||
  fail "unknown rule: $(cat "$WORK/err")"

# --- config: it is used (here: the rule turned off); a bad file exits 2 with FILE:LINE
printf 'rules:\n  memory_fragmentation:\n    enabled: false\n' >"$WORK/off.yaml"
diagnose "$IN" --diagnostics.config "$WORK/off.yaml"
[ $rc -eq 0 ] || fail "--config exited $rc: $(cat "$WORK/err")"
! grep -q ' memory_fragmentation ' "$WORK/out" || fail "--config did not disable the rule"
printf 'rules:\n  memory_fragmentation:\n    ratio: lots\n' >"$WORK/bad.yaml"
diagnose "$IN" --diagnostics.config "$WORK/bad.yaml"
[ $rc -eq 2 ] || fail "bad config exited $rc, not 2"
grep -q "$WORK/bad.yaml:3: " "$WORK/err" || fail "bad config: no FILE:LINE: $(cat "$WORK/err")"

# --- stdin: text and json work; html needs a file
set +e
"$ACCELMON" diagnose - --format json <"$IN" >"$WORK/stdin.json" 2>"$WORK/err"
rc=$?
set -e
[ $rc -eq 0 ] || fail "diagnose - exited $rc: $(cat "$WORK/err")"
$PY - "$WORK/jsonl.json" "$WORK/stdin.json" <<'EOF' || fail "stdin and file disagree"
import json, sys
a, b = (json.load(open(p))["findings"] for p in sys.argv[1:])
assert a == b
EOF
diagnose - --format html
[ $rc -eq 2 ] || fail "html from stdin exited $rc, not 2"

# --- not a recording, a bad format: 2
diagnose "$WORK/nonexistent"
[ $rc -eq 2 ] || fail "a missing input exited $rc, not 2"
diagnose "$IN" --format pdf
[ $rc -eq 2 ] || fail "--format pdf exited $rc, not 2"

# --- damage: a garbled line early on loses that report only; exit 1, the findings still printed
sed '100s/.*/{"node": garbage/' "$IN" >"$WORK/damaged.jsonl"
diagnose "$WORK/damaged.jsonl"
[ $rc -eq 1 ] || fail "damaged input exited $rc, not 1"
grep -q "damaged.jsonl:100: " "$WORK/err" || fail "damage not named: $(cat "$WORK/err")"
grep -q 'damaged region' "$WORK/err" || fail "no damage summary: $(cat "$WORK/err")"
grep -q ' memory_fragmentation ' "$WORK/out" || fail "damaged input: findings not printed"
output_has 'DAMAGED: 1 region' head -n 1 "$WORK/out" || fail "header does not say damaged"

echo "PASS: diagnose"
