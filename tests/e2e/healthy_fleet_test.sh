#!/usr/bin/env bash
# A healthy fleet stays silent: 24 simulated hours of 16 nodes in four jobs, with load swings,
# jobs ending and starting, idle periods, checkpoint pauses, brief power caps, temperature spikes,
# traffic bursts and rolling firmware upgrades (tests/fixtures/scenarios/healthy_fleet.yaml),
# recorded by `accelmon simulate` every 30 s and judged by `accelmon diagnose` on the recording:
# zero findings. Prints how many findings each rule raised, so a regression names its rule.
source "$(dirname "$0")/lib.sh"

FIXTURES=${FIXTURES:?set FIXTURES to tests/fixtures}
SCENARIO="$FIXTURES/scenarios/healthy_fleet.yaml"
DEFAULTS="$FIXTURES/../../diagnostics/defaults.yaml"

"$ACCELMON" simulate --nodes 16 --sim 8 --duration 24h --interval 30s \
  --start 2026-12-01T00:00:00Z --scenario "$SCENARIO" --record.dir "$WORK/rec" \
  >"$WORK/simulate.log" 2>&1 || fail "simulate failed"
"$ACCELMON" diagnose "$WORK/rec" --format json >"$WORK/findings.json" 2>"$WORK/diagnose.log" ||
  fail "diagnose failed"
# The same recording scored against the scenario's own `expect: []`: nothing false.
"$ACCELMON" diagnose "$WORK/rec" --score "$SCENARIO" --format json >"$WORK/score.json" \
  2>>"$WORK/diagnose.log" || fail "diagnose --score failed"

/usr/bin/python3 - "$WORK/findings.json" "$WORK/score.json" "$DEFAULTS" <<'PY' ||
import collections, json, re, sys
findings = json.load(open(sys.argv[1]))
score = json.load(open(sys.argv[2]))
rules = re.findall(r"^  ([a-z_]+):$", open(sys.argv[3]).read(), re.M)
assert len(rules) >= 13, rules
assert findings["input"]["nodes"] == 16, findings["input"]
assert findings["input"]["reports"] == 16 * 2880, findings["input"]
counts = collections.Counter(f["rule"] for f in findings["findings"])
print("findings per rule over 24 h of 16 nodes:")
for rule in rules:
    print(f"  {rule:24} {counts.get(rule, 0)}")
for f in findings["findings"]:
    print(f"  unexpected: {f['start']} {f['rule']} {f['node']} device {f['device']}: {f['summary']}")
assert not findings["findings"], f"{len(findings['findings'])} findings on a healthy fleet"
assert score["total"]["false"] == 0, score["total"]
PY
  fail "a healthy fleet raised findings"
echo "PASS: 24 h of a healthy 16-node fleet, zero findings"
