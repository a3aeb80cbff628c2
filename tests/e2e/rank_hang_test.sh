#!/usr/bin/env bash
# A 4-node job (Slurm job 4711, 32 ranks) whose rank 13 hangs (the scenario below: rank_hang on
# sim-1 device 5 at 8s), four live agents streaming to one recording
# exporter. NCCL RAS's view travels in the reports: job_stall opens on it, online, naming rank 13
# on sim-1 device 5 and the collective count where it stopped; `accelmon diagnose` over the
# exporter's recording names the same rank and count after the fact.
source "$(dirname "$0")/lib.sh"
command -v python3 >/dev/null || skip "python3 not found (scripts/install-deps.sh test installs it)"
JOB=4711
NODES=(sim-0 sim-1 sim-2 sim-3)
cat >"$WORK/scenario.yaml" <<'YAML'
jobs:
  - id: "4711"
    nodes: [sim-0, sim-1, sim-2, sim-3]
faults:
  - {at: 8s, fault: rank_hang, node: sim-1, device: 5}
YAML

start exporter exporter --web.listen-address 127.0.0.1:0 --grpc.listen-address 127.0.0.1:0 \
  --record.dir "$WORK/rec"
ports=$(wait_for_log exporter 'ingest on 127.0.0.1:0 \(port [0-9]+\), metrics on 127.0.0.1:0 \(port [0-9]+')
grpc=$(nth_port "$ports" 1)
web=$(echo "$ports" | grep -Eo 'port [0-9]+' | tail -1 | grep -Eo '[0-9]+')
for i in "${!NODES[@]}"; do
  start "agent$i" agent --exporter.address "127.0.0.1:$grpc" --node.name "${NODES[$i]}" --sim 8 \
    --sim.scenario "$WORK/scenario.yaml" --collect.interval 1s --push.socket "" \
    --path.procfs "$FIXTURES/host/proc" --path.sysfs "$FIXTURES/host/sys"
done

# Online: the exporter's status API lists the job's stall (8 s in, plus 2 intervals).
stall_online() {
  curl -fsS "http://127.0.0.1:$web/api/v1/status" >"$WORK/status.json" 2>/dev/null &&
    python3 - "$WORK/status.json" <<'PY'
import json, sys
stalls = [f for f in json.load(open(sys.argv[1]))["findings"] if f["rule"] == "job_stall"]
sys.exit(0 if stalls else 1)
PY
}
wait_until 60 "job_stall on the exporter" stall_online
python3 - "$WORK/status.json" >"$WORK/online.txt" <<'PY' || fail "online: $(cat "$WORK/status.json")"
import json, sys
stalls = [f for f in json.load(open(sys.argv[1]))["findings"] if f["rule"] == "job_stall"]
assert len(stalls) == 1, stalls
f = stalls[0]
ev = {e["name"]: e for e in f["evidence"]}
assert f["job"] == "4711" and f["node"] == "sim-1", f
assert ev["waiting_for"]["text"] == "rank 13 on sim-1 device 5", ev
assert "rank 13 on sim-1 device 5 stopped after" in f["summary"], f["summary"]
assert ev["others_collectives"]["value"] > ev["waited_rank_collectives"]["value"], ev
print(int(ev["waited_rank"]["value"]), int(ev["waited_rank_collectives"]["value"]))
PY

for i in "${!NODES[@]}"; do stop "agent$i"; done
stop exporter

# Offline: the recording names the same rank, stopped at the same count.
"$ACCELMON" diagnose "$WORK/rec" --job "$JOB" --rules job_stall --format json \
  -o "$WORK/offline.json" || fail "diagnose over the recording failed"
python3 - "$WORK/offline.json" "$(cat "$WORK/online.txt")" <<'PY' ||
import json, sys
stalls = [f for f in json.load(open(sys.argv[1]))["findings"] if f["rule"] == "job_stall"]
assert len(stalls) == 1, stalls
ev = {e["name"]: e for e in stalls[0]["evidence"]}
offline = "%d %d" % (ev["waited_rank"]["value"], ev["waited_rank_collectives"]["value"])
assert offline == sys.argv[2], f"offline {offline}, online {sys.argv[2]}"
assert stalls[0]["node"] == "sim-1", stalls[0]
PY
  fail "diagnose differs from the exporter: $(cat "$WORK/offline.json")"

echo "rank_hang_test: ok (rank and collectives online and offline: $(cat "$WORK/online.txt"))"
