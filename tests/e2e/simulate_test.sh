#!/usr/bin/env bash
# `accelmon simulate`: a simulated fleet's reports faster than real time, to JSON Lines and to a
# recording directory that `record verify` accepts; a bad scenario file stops it with exit 2.
source "$(dirname "$0")/lib.sh"
SCENARIOS=${FIXTURES:?set FIXTURES to tests/fixtures}/scenarios

# 2 nodes x 10 minutes at 1s: 1200 lines, in time order, every node's sequence from 1.
"$ACCELMON" simulate --nodes 2 --sim 8 --duration 10m --start 2026-12-01T08:00:00Z \
  --scenario "$SCENARIOS/incident.yaml" --output "$WORK/out.jsonl" 2>"$WORK/simulate.log" ||
  fail "simulate to JSON Lines exited $?: $(cat "$WORK/simulate.log")"
grep -q '^simulate: 2 nodes x 600 reports (10m at 1s) -> ' "$WORK/simulate.log" ||
  fail "no summary line: $(cat "$WORK/simulate.log")"
[ "$(wc -l <"$WORK/out.jsonl")" -eq 1200 ] || fail "expected 1200 lines, got $(wc -l <"$WORK/out.jsonl")"
output_has '"node":"sim-0".*"agentInstanceId":"simulate-sim-0"' head -n 1 "$WORK/out.jsonl" ||
  fail "first line: $(head -c 300 "$WORK/out.jsonl")"
output_has '"timestamp":"2026-12-01T08:00:00Z"' head -n 1 "$WORK/out.jsonl" || fail "--start ignored"
# The incident's link flap starts at 15m: outside these 10 minutes, so nvlink0 is up throughout.
grep -q '"up":false' "$WORK/out.jsonl" && fail "a link is down before the scenario says so"

# The same run gives the same bytes.
"$ACCELMON" simulate --nodes 2 --sim 8 --duration 10m --start 2026-12-01T08:00:00Z \
  --scenario "$SCENARIOS/incident.yaml" --output - 2>/dev/null | cmp -s - "$WORK/out.jsonl" ||
  fail "simulate is not deterministic"

# Into a recording directory, which verifies clean.
"$ACCELMON" simulate --nodes 2 --duration 10m --scenario "$SCENARIOS/xid_error.yaml" \
  --record.dir "$WORK/rec" 2>"$WORK/simulate.log" || fail "simulate to --record.dir exited $?"
"$ACCELMON" record verify "$WORK/rec" >"$WORK/verify.txt" || fail "record verify: $(cat "$WORK/verify.txt")"
grep -q '^OK: ' "$WORK/verify.txt" || fail "verify: no OK line: $(cat "$WORK/verify.txt")"

# A bad scenario: exit 2, one line naming the file and line.
printf 'faults:\n  - at: 10m\n    fault: stall\n    devcie: all\n' >"$WORK/bad.yaml"
set +e
"$ACCELMON" simulate --duration 1m --scenario "$WORK/bad.yaml" --output "$WORK/x.jsonl" 2>"$WORK/err.txt"
rc=$?
set -e
[ $rc -eq 2 ] || fail "a bad scenario exited $rc, expected 2"
grep -q "^accelmon: $WORK/bad.yaml:4: unknown key \"devcie\"" "$WORK/err.txt" ||
  fail "bad scenario said: $(cat "$WORK/err.txt")"
# The same for the daemon's --sim.scenario, before anything starts.
set +e
timeout 20 "$ACCELMON" standalone --sim 2 --sim.scenario "$WORK/bad.yaml" --push.socket "" \
  --web.listen-address 127.0.0.1:0 2>"$WORK/err.txt"
rc=$?
set -e
[ $rc -eq 2 ] || fail "standalone with a bad scenario exited $rc, expected 2"
grep -q "$WORK/bad.yaml:4: unknown key" "$WORK/err.txt" || fail "standalone said: $(cat "$WORK/err.txt")"
# Neither output nor two outputs: a usage error.
set +e
"$ACCELMON" simulate --duration 1m 2>/dev/null
rc=$?
set -e
[ $rc -eq 2 ] || fail "simulate without an output exited $rc, expected 2"
echo "simulate_test: ok"
