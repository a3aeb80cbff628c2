#!/usr/bin/env bash
# One job across two exporters (docs/scaling.md "Job-wide rules across exporters"): four simulated
# nodes of Slurm job 4711 (tests/fixtures/scenarios/job_across_exporters.yaml: rank 13, sim-1
# device 5, straggles from 5s; XID 79 on sim-2 device 3 at 60s, then every rank hangs) stream to
# two exporters, two nodes each by rendezvous hashing; each exporter records what it receives.
# Prometheus scrapes both and remote-writes into VictoriaMetrics, and vmalert evaluates the
# shipped dashboards/prometheus/jobs.yml against VictoriaMetrics, its durations made 12 times
# shorter (below). vmalert must fire the straggler naming rank 13 (sim-1 device 5), and the
# job's stall once, for the job: what no single exporter can see.
source "$(dirname "$0")/lib.sh"
FIXTURES=${FIXTURES:?set FIXTURES to tests/fixtures}
REPO=$(cd "$(dirname "$0")/../.." && pwd)
RULES="$REPO/dashboards/prometheus/jobs.yml"
SCENARIO="$FIXTURES/scenarios/job_across_exporters.yaml"
for tool in prometheus promtool victoria-metrics vmalert python3; do
  command -v "$tool" >/dev/null || skip "$tool not found (scripts/install-deps.sh test installs it)"
done
JOB=4711
NODES=(sim-0 sim-1 sim-2 sim-3)  # the scenario's nodes: a live agent plays the node it is named

# The shipped rules, as vmalert's MetricsQL parses them (the same file promtool checks in ctest).
vmalert -dryRun -rule "$RULES" >"$WORK/vmalert-dry-run.log" 2>&1 ||
  fail "vmalert rejects $RULES: $(tail -n 3 "$WORK/vmalert-dry-run.log")"

# The fast copy: the shipped rules' minutes made seconds. Every duration, and nothing else, is
# divided by SPEEDUP: each `for:` value and each range window (`[1m]` -> `[5s]`, `[15m]` ->
# `[75s]`, `[1h]` -> `[300s]`), so `for: 3m` is 15 s, `for: 2m` 10 s, with 1 s scrapes and 1 s
# evaluations. The check after it proves the two files differ in durations only.
SPEEDUP=12
python3 - "$RULES" "$WORK/jobs-fast.yml" "$SPEEDUP" <<'PY' || fail "fast copy of $RULES"
import re, sys
src, dst, speedup = sys.argv[1], sys.argv[2], int(sys.argv[3])
UNIT = {"s": 1, "m": 60, "h": 3600}
def fast(n, unit):
    ms = int(n) * UNIT[unit] * 1000 // speedup
    return "%ds" % (ms // 1000) if ms % 1000 == 0 else "%dms" % ms
text = open(src).read()
out = re.sub(r"(?m)^(\s+for: )(\d+)([smh])$", lambda m: m.group(1) + fast(m.group(2), m.group(3)), text)
out = re.sub(r"\[(\d+)([smh])\]", lambda m: "[" + fast(m.group(1), m.group(2)) + "]", out)
blank = lambda t: re.sub(r"(?m)^(\s+for: )\S+$", r"\1D", re.sub(r"\[[0-9]+m?s\]|\[[0-9]+[mh]\]", "[D]", t))
if blank(text) != blank(out) or text == out:
    sys.exit("the fast copy differs from the shipped rules in more than durations")
open(dst, "w").write(out)
PY
promtool check rules "$WORK/jobs-fast.yml" >"$WORK/promtool.log" 2>&1 || fail "promtool: $(cat "$WORK/promtool.log")"

# Two exporters, each recording what it receives. Their gRPC ports come from the kernel, and
# rendezvous hashing of the four names over the two addresses splits them 2/2 for 3 pairs of
# ports in 8: exporter 2 is restarted on a new port until it does (nothing has connected yet).
declare -A grpc web
start_exporter() {
  start "exporter$1" exporter --web.listen-address 127.0.0.1:0 --grpc.listen-address 127.0.0.1:0 \
    --record.dir "$WORK/rec$1"
  local ports
  ports=$(wait_for_log "exporter$1" 'ingest on 127.0.0.1:0 \(port [0-9]+\), metrics on 127.0.0.1:0 \(port [0-9]+')
  grpc[$1]=$(nth_port "$ports" 1)
  web[$1]=$(echo "$ports" | grep -Eo 'port [0-9]+' | tail -1 | grep -Eo '[0-9]+')
}
declare -A home
split_two_each() {
  local n1=0 node
  for node in "${NODES[@]}"; do
    home[$node]=$(rank_first "$node" "127.0.0.1:${grpc[1]}" "127.0.0.1:${grpc[2]}")
    [ "${home[$node]}" = "127.0.0.1:${grpc[1]}" ] && n1=$((n1 + 1))
  done
  [ $n1 -eq 2 ]
}
start_exporter 1
start_exporter 2
tries=1
until split_two_each; do
  [ $tries -lt 40 ] || fail "no port of 40 for exporter 2 splits ${NODES[*]} two and two"
  stop exporter2
  rm -rf "$WORK/rec2"
  start_exporter 2
  tries=$((tries + 1))
done
a1="127.0.0.1:${grpc[1]}"
a2="127.0.0.1:${grpc[2]}"

# The agents first: the simulated job loads for 90 s whatever else is starting.
for i in "${!NODES[@]}"; do
  start "agent$i" agent --exporter.address "$a1,$a2" --node.name "${NODES[$i]}" --sim 8 \
    --sim.scenario "$SCENARIO" --collect.interval 1s --push.socket "" \
    --path.procfs "$FIXTURES/host/proc" --path.sysfs "$FIXTURES/host/sys"
done
agents_started=$SECONDS

# VictoriaMetrics picks its port (it logs only the address it was given): read it from /proc.
run_bg victoria-metrics victoria-metrics -httpListenAddr 127.0.0.1:0 \
  -storageDataPath "$WORK/vm-data" -retentionPeriod 1d -search.latencyOffset 1s -search.disableCache
vm_port=$(wait_for_listening_port "${peer_pid[victoria-metrics]}" 30)
vm="http://127.0.0.1:$vm_port"
run_bg alert-receiver python3 "$REPO/tests/e2e/alert_receiver.py" "$WORK/notifications.jsonl"
receiver_port=$(wait_for_log alert-receiver 'listening on port [0-9]+' | grep -Eo '[0-9]+$')
cat >"$WORK/prometheus.yml" <<YAML
global:
  scrape_interval: 1s
scrape_configs:
  - job_name: accelmon
    static_configs:
      - targets: ["127.0.0.1:${web[1]}", "127.0.0.1:${web[2]}"]
remote_write:
  - url: $vm/api/v1/write
    queue_config:
      batch_send_deadline: 1s
YAML
promtool check config "$WORK/prometheus.yml" >/dev/null || fail "promtool rejects the config"
run_bg prometheus prometheus --config.file "$WORK/prometheus.yml" \
  --storage.tsdb.path "$WORK/prom-data" --web.listen-address 127.0.0.1:0 \
  --storage.remote.flush-deadline 5s  # a failing test must not wait a minute for a dead VictoriaMetrics
# vmalert: queries VictoriaMetrics, writes the recording rules' series (and its alerts' state)
# back into it, restores that state from it at start, and notifies the receiver. A 5 s query
# step: a series gone for 5 s is gone (the default, 5m, is for 1m evaluations).
run_bg vmalert vmalert -rule "$WORK/jobs-fast.yml" -evaluationInterval 1s \
  -datasource.url "$vm" -datasource.queryStep 5s -remoteWrite.url "$vm" -remoteWrite.flushInterval 500ms \
  -remoteRead.url "$vm" -notifier.url "http://127.0.0.1:$receiver_port" -httpListenAddr 127.0.0.1:0
vmalert_port=$(wait_for_listening_port "${peer_pid[vmalert]}" 30)

# Each agent streams to the exporter the hash names; each exporter serves its two nodes.
for i in "${!NODES[@]}"; do
  node=${NODES[$i]}
  wait_for_log "agent$i" "connected to exporter ${home[$node]} \\(choice 1 of 2" 30 >/dev/null
  e=1
  [ "${home[$node]}" = "$a2" ] && e=2
  wait_for_metric "http://127.0.0.1:${web[$e]}/metrics" "^accelmon_node_up\\{node=\"$node\"\\} 1" 30
done

# Every series the exporters serve stays well under Mimir's default of 30 labels, with the 3 a
# Prometheus shard adds (instance, job, one external label): 27 of its own at most.
for e in 1 2; do
  scrape "http://127.0.0.1:${web[$e]}/metrics" >"$WORK/scrape$e.txt"
  python3 - "$WORK/scrape$e.txt" <<'PY' || fail "exporter $e serves a series with too many labels"
import re, sys
label = re.compile(r'[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*"')
most, worst = 0, ""
for line in open(sys.argv[1]):
    if line.startswith("#") or "{" not in line:
        continue
    n = len(label.findall(line[line.index("{"):line.rindex("}") + 1]))
    if n > most:
        most, worst = n, line
assert most > 0, "no labelled series"
assert most <= 27, f"{most} labels: {worst}"
PY
done

# alerts NAME: vmalert's firing alerts of that rule, one JSON object per line (labels, value,
# annotations).
alerts() {
  local body
  body=$(curl -fsS "http://127.0.0.1:$vmalert_port/api/v1/alerts" 2>/dev/null) || return 1
  python3 -c '
import json, sys
for a in json.loads(sys.argv[2])["data"]["alerts"]:
    if a["name"] == sys.argv[1] and a["state"] == "firing":
        print(json.dumps({"labels": a["labels"], "value": a["value"], "annotations": a["annotations"]}, sort_keys=True))
' "$1" "$body"
}
firing() {
  local body
  # Cheap first: the rule is not even pending yet for most of the wait.
  body=$(curl -fsS "http://127.0.0.1:$vmalert_port/api/v1/alerts" 2>/dev/null) && [[ $body == *"$1"* ]] &&
    output_has "\"job_id\": \"$JOB\"" alerts "$1"
}

# The straggler: about 20 s in (the job busy enough to judge), plus its 15 s, plus the pipeline.
wait_until 90 "vmalert to fire AccelmonJobStragglerAcrossExporters" firing AccelmonJobStragglerAcrossExporters
straggler_at=$((SECONDS - agents_started))
straggler=$(alerts AccelmonJobStragglerAcrossExporters)
python3 - "$straggler" <<'PY' || fail "straggler alerts: $straggler"
import json, sys
alerts = [json.loads(line) for line in sys.argv[1].splitlines()]
assert len(alerts) == 1, "expected one straggler, got %d" % len(alerts)
labels, summary = alerts[0]["labels"], alerts[0]["annotations"]["summary"]
want = {"job_id": "4711", "rank": "13", "node": "sim-1", "device": "5", "measure": "step_rate", "severity": "warning"}
assert all(labels.get(k) == v for k, v in want.items()), labels
assert summary.startswith("job 4711: rank 13 (sim-1 device 5) at ") and "of the job's median step_rate" in summary, summary
PY

# The stall: every busy rank idle from 71s, plus its 10 s, plus the pipeline; one alert for the
# job, whose summary counts its devices (31: the straggler was never busy) and nodes.
wait_until 100 "vmalert to fire AccelmonJobStallAcrossExporters" firing AccelmonJobStallAcrossExporters
stall_at=$((SECONDS - agents_started))
stall=$(alerts AccelmonJobStallAcrossExporters)
python3 - "$stall" <<'PY' || fail "stall alerts: $stall"
import json, sys
alerts = [json.loads(line) for line in sys.argv[1].splitlines()]
assert len(alerts) == 1, "expected one stall alert, got %d" % len(alerts)
labels, summary = alerts[0]["labels"], alerts[0]["annotations"]["summary"]
assert labels.get("job_id") == "4711" and labels.get("severity") == "critical", labels
assert not {"node", "device", "rank", "instance"} & set(labels), labels
assert summary == ("job 4711: all 31 busy devices on 4 nodes idle with memory held, "
                   "links silent — hung collective?"), summary
PY

# What the receiver got: every straggler notification names rank 13 and nothing else; the stall
# is one alert (one label set), that fired once (one startsAt).
wait_until 30 "the receiver to get the stall" output_has AccelmonJobStallAcrossExporters cat "$WORK/notifications.jsonl"
python3 - "$WORK/notifications.jsonl" <<'PY' || fail "notifications: $(tail -n 5 "$WORK/notifications.jsonl")"
import json, sys
sent = [json.loads(line)["alert"] for line in open(sys.argv[1])]
def of(name):
    return [a for a in sent if a["labels"].get("alertname") == name]
stragglers = {(a["labels"]["job_id"], a["labels"]["rank"], a["labels"]["node"], a["labels"]["device"])
              for a in of("AccelmonJobStragglerAcrossExporters")}
assert stragglers == {("4711", "13", "sim-1", "5")}, stragglers
stalls = of("AccelmonJobStallAcrossExporters")
assert len({json.dumps(a["labels"], sort_keys=True) for a in stalls}) == 1, stalls
assert len({a["startsAt"] for a in stalls}) == 1, "the stall fired more than once"
PY

for i in "${!NODES[@]}"; do stop "agent$i"; done
stop exporter1
stop exporter2
stop_bg vmalert
stop_bg prometheus
stop_bg victoria-metrics
stop_bg alert-receiver
[ -d "$WORK/rec1" ] && [ -d "$WORK/rec2" ] || fail "an exporter left no recording"

# ---------------------------------------------------------------------------------------------
# Offline, across recordings: `accelmon diagnose` over both exporters' recordings finds what it
# finds in one recording of the same scenario that saw every node (`accelmon simulate`, one
# stream of all four nodes, as one exporter would have recorded it): the straggler on sim-1
# device 5, the XID on sim-2 device 3, and the job's stall as its consequence, first fault
# included. The run is about 90 s of 1 s reports, shorter than the built-in job_straggler's 3m
# and job_stall's 2m, so both are diagnosed with the durations 12 times shorter, as the rules
# above ran (and a first-fault window that fits the run).
cat >"$WORK/diagnostics-fast.yaml" <<'YAML'
rules:
  job_straggler:
    for: 15s
  job_stall:
    for: 10s
first_fault:
  window: 25s
YAML
rules=job_straggler,xid_error,job_stall
"$ACCELMON" diagnose "$WORK/rec1" "$WORK/rec2" --diagnostics.config "$WORK/diagnostics-fast.yaml" \
  --rules "$rules" --job "$JOB" --format json -o "$WORK/two-exporters.json" ||
  fail "diagnose over both recordings failed"
"$ACCELMON" simulate --nodes 4 --sim 8 --interval 1s --duration 100s --scenario "$SCENARIO" \
  --output "$WORK/one.jsonl" >"$WORK/simulate.log" 2>&1 || fail "simulate failed"
"$ACCELMON" diagnose "$WORK/one.jsonl" --diagnostics.config "$WORK/diagnostics-fast.yaml" \
  --rules "$rules" --job "$JOB" --format json -o "$WORK/one-exporter.json" ||
  fail "diagnose over the single recording failed"
python3 - "$WORK/one-exporter.json" "$WORK/two-exporters.json" <<'PY' ||
import json, sys
def findings(path):
    doc = json.load(open(path))
    return doc["input"], sorted((f["rule"], f["node"], f["device"], f["job"], f["consequence_of"])
                                for f in doc["findings"])
one_in, one = findings(sys.argv[1])
two_in, two = findings(sys.argv[2])
assert two_in["recordings"] == 2 and two_in["nodes"] == 4, two_in
assert one == two, f"one exporter: {one}\ntwo exporters: {two}"
stalls = [f for f in two if f[0] == "job_stall"]
assert stalls == [("job_stall", "sim-2", "", "4711", "xid_error on sim-2 device 3")], two
assert ("job_straggler", "sim-1", "5", "4711", "") in two, two
PY
  fail "diagnose over the two recordings differs from the one: $(cat "$WORK/two-exporters.json")"

echo "job_across_exporters_test: ok (straggler after ${straggler_at}s, stall after ${stall_at}s;" \
  "${NODES[*]} over $a1 and $a2, exporter 2 started $tries time(s))"
