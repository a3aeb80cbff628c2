#!/usr/bin/env bash
# docs/diagnostics.md "Walk-through", as a user runs it: a scenario played live in standalone, the metric
# flipping on and off, the recording diagnosed offline with the same rules.
source "$(dirname "$0")/lib.sh"
SCENARIOS=$(cd "$(dirname "$0")/../fixtures/scenarios" && pwd)

start standalone standalone --sim 8 --sim.scenario "$SCENARIOS/demo.yaml" \
  --web.listen-address 127.0.0.1:0 --push.socket "" --record.dir "$WORK/rec"
URL=$(wait_for_log standalone 'http://[^ ]+/metrics')
[[ $URL =~ :([0-9]+)/ ]] && [ "${BASH_REMATCH[1]}" != 0 ] || fail "printed URL has no real port: $URL"
wait_for_log standalone "scenario .*demo.yaml with 4 fault" 20

# Every rule and severity is there from the start, at 0.
wait_for_metric "$URL" '^accelmon_diagnosis_findings_total\{rule="job_stall",severity="critical"\} 0$' 20
# link_down opens about 10 s in ...
wait_for_metric "$URL" '^accelmon_diagnosis_active\{rule="link_down",node="[^"]+",device="1",link="nvlink2",severity="critical",job_id="sim-job",finding="[^"]+",consequence_of="[^"]*"\} 1$' 30
wait_for_log standalone "diagnosis: opened link_down critical .*device=1 link=nvlink2" 5
# ... XID 79 and the fragmentation follow ...
wait_for_metric "$URL" '^accelmon_diagnosis_active\{rule="xid_error",node="[^"]+",device="3",link="",severity="critical",job_id="sim-job",finding="[^"]+",consequence_of="[^"]*"\} 1$' 30
wait_for_metric "$URL" '^accelmon_diagnosis_active\{rule="memory_fragmentation",node="[^"]+",device="2",link="",severity="warning",job_id="sim-job",finding="[^"]+",consequence_of="[^"]*"\} 1$' 40
# ... and the link comes back at 40 s: its series goes, the counter stays.
link_down_closed() {
  local body
  body=$(scrape "$URL") && ! grep -q '^accelmon_diagnosis_active{rule="link_down"' <<<"$body"
}
wait_until 30 "link_down to close when the link came back" link_down_closed
scrape "$URL" >"$WORK/after_close.prom"
grep -q '^accelmon_diagnosis_findings_total{rule="link_down",severity="critical"} 1$' "$WORK/after_close.prom" ||
  fail "findings_total lost the closed link_down"
curl -fsS "$URL" | promtool check metrics || fail "promtool check metrics complains"
curl -fsS "$URL" | grep '^accelmon_diagnosis_active' | sed -E 's/.*rule="([^"]+)".*device="([^"]*)",link="([^"]*)".*/\1 \2 \3/' |
  sort >"$WORK/online.txt"
stop standalone 15

# Offline: the same rules over the recording find the same things.
"$ACCELMON" diagnose "$WORK/rec" >"$WORK/timeline.txt" || fail "diagnose exited $?"
cat "$WORK/timeline.txt"
grep -Eq 'CRITICAL +link_down +node [^ ]+ device 1 link nvlink2' "$WORK/timeline.txt" ||
  fail "the timeline lacks link_down on device 1 nvlink2"
grep -Eq 'ended .*\(([0-9]+s|[0-9]+m[0-9]+s)\)' "$WORK/timeline.txt" || fail "no ended finding in the timeline"
"$ACCELMON" diagnose "$WORK/rec" --format json -o "$WORK/findings.json" || fail "diagnose json exited $?"
/usr/bin/python3 - "$WORK/findings.json" "$WORK/online.txt" <<'PY' || fail "offline findings differ from online ones"
import json, sys
findings = json.load(open(sys.argv[1]))["findings"]
offline = {(f["rule"], f["device"], f["link"]) for f in findings}
open_offline = {(f["rule"], f["device"], f["link"]) for f in findings if f["end"] is None}
online = {tuple((line.rstrip("\n") + "  ").split(" ")[:3]) for line in open(sys.argv[2]) if line.strip()}
for want in [("link_down", "1", "nvlink2"), ("xid_error", "3", ""), ("memory_fragmentation", "2", "")]:
    assert want in offline, f"{want} missing offline: {sorted(offline)}"
closed = [f for f in findings if f["rule"] == "link_down"]
assert closed and closed[0]["end"], f"link_down should have ended: {closed}"
# What was open online at the last scrape is open at the end of the recording.
missing = online - open_offline
assert not missing, f"open online but not offline: {missing}; offline open: {sorted(open_offline)}"
print(f"{len(findings)} findings offline, {len(online)} open online at the last scrape: consistent")
PY
"$ACCELMON" diagnose "$WORK/rec" --format html -o "$WORK/report.html" || fail "diagnose html exited $?"
grep -q '<svg' "$WORK/report.html" || fail "the html report has no plot"
echo "PASS"
