#!/usr/bin/env bash
# The Python push helper (clients/python) against the real agent: standalone with 2 simulated
# devices serving AllocatorPush on a Unix socket; the helper, in a process with the stand-in
# torch (tests/python/fake_torch), pushes for devices 0 and 1; /metrics shows that process.
source "$(dirname "$0")/lib.sh"
: "${PYTHONPATH:?set PYTHONPATH to clients/python, BUILD/python and tests/python/fake_torch}"
/usr/bin/python3 -c 'import grpc, google.protobuf' 2>/dev/null ||
  skip "/usr/bin/python3 lacks python3-grpcio or python3-protobuf (scripts/install-deps.sh test)"

start standalone standalone --sim 2 --collect.interval 200ms --push.socket "$WORK/agent.sock" \
  --web.listen-address 127.0.0.1:0 --node.name e2e-node
url=$(wait_for_log standalone 'http://[^ ]+/metrics')
wait_for_metric "$url" '^accelmon_device_info\{.*device="1"'

# The stand-in torch's devices take the simulated devices' UUIDs (torch index i = device i).
uuids=$(curl -fsS "$url" | grep '^accelmon_device_info{' |
  sed -nE 's/.*device="([0-9]+)".*uuid="([^"]+)".*/\1 \2/p' | sort -n | awk '{print $2}' | paste -sd,)
[[ $uuids == SIM-*,SIM-* ]] || fail "no simulated device UUIDs in /metrics: '$uuids'"

# A "training script": the two lines of docs/fragmentation.md, then it trains (sleeps) until told to stop.
FAKE_TORCH_UUIDS=$uuids SLURM_JOB_ID=e2e-job RANK=3 /usr/bin/python3 -c '
import logging, sys, time
logging.basicConfig(level=logging.INFO)
import torch
import accelmon_push
accelmon_push.start(interval=0.2, socket=sys.argv[1])
time.sleep(60)
' "$WORK/agent.sock" >"$WORK/trainer.log" 2>&1 &
trainer=$!
PIDS+=("$trainer")

wait_for_metric "$url" "^accelmon_process_memory_reserved_bytes\\{.*pid=\"$trainer\".*\\} 2254438400"
curl -fsS "$url" >"$WORK/metrics.txt"
n=$(grep -c "^accelmon_process_memory_reserved_bytes{.*pid=\"$trainer\"" "$WORK/metrics.txt")
[ "$n" -eq 2 ] || fail "expected the trainer on 2 devices, found $n"
grep -Eq "^accelmon_process_memory_reserved_bytes\\{.*pid=\"$trainer\".*\\} 4292870144" "$WORK/metrics.txt" ||
  fail "device 0's reserved bytes are not the recorded ones"
grep -Eq "^accelmon_process_memory_reserved_bytes\\{.*device=\"1\".*pid=\"$trainer\",job_id=\"e2e-job\",rank=\"3\"\\} 2254438400" \
  "$WORK/metrics.txt" || fail "device 1's series lacks the job and rank from the environment"
if grep -Eq '^accelmon_agent_push_rejected_total\{.*\} [1-9]' "$WORK/metrics.txt"; then
  fail "the agent rejected pushes: $(grep '^accelmon_agent_push_rejected_total' "$WORK/metrics.txt")"
fi
promtool check metrics <"$WORK/metrics.txt" >"$WORK/promtool.log" 2>&1 ||
  fail "promtool check metrics: $(cat "$WORK/promtool.log")"
grep -q "pushing allocator statistics to unix:$WORK/agent.sock" "$WORK/trainer.log" ||
  fail "the helper did not log its start: $(cat "$WORK/trainer.log")"

kill "$trainer"
stop standalone
echo "python_push_test: ok"
