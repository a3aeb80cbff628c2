#!/usr/bin/env bash
# The real binary attributes GPUs to Slurm job steps: NVML's process lists from the test library
# (FAKE_NVML_PROCESSES) and a fixture /proc with Slurm's cgroup v2 layout (--path.procfs); the
# holders are read back from the recording the node wrote (record export, protobuf JSON).
source "$(dirname "$0")/lib.sh"
FIXTURES=${FIXTURES:?set FIXTURES to tests/fixtures}
FAKE_NVML=${FAKE_NVML:?}

mkdir -p "$WORK/sys"  # no amdgpu here: the fixture has no sysfs
FAKE_NVML_PROCESSES="0:compute:32001:2147483648,0:graphics:32001:2147483648,1:compute:32002:-,1:compute:32999:1048576" \
  start standalone standalone --node.name slurm-node --collect.interval 200ms \
  --web.listen-address 127.0.0.1:0 --push.socket "" --nvml.library "$FAKE_NVML" \
  --path.procfs "$FIXTURES/procs-slurm-v2/proc" --path.sysfs "$WORK/sys" --record.dir "$WORK/rec"
url=$(wait_for_log standalone 'http://[^ ]+/metrics')
wait_for_metric "$url" '^accelmon_device_info\{.*vendor="nvidia"'
stop standalone
"$ACCELMON" record export --jsonl "$WORK/rec" >"$WORK/reports.jsonl" 2>"$WORK/export.log" ||
  fail "record export failed"
last=$(grep '"holders"' "$WORK/reports.jsonl" | tail -n 1)
[ -n "$last" ] || fail "no report with holders"
/usr/bin/python3 - "$last" <<'PY' || fail "holders are not as expected: $last"
import json, sys
devices = json.loads(sys.argv[1])["devices"]
def holders(i):
    return [(h["kind"], h.get("job"), h.get("step"), [int(p) for p in h["pids"]],
             h.get("memoryUsedBytes"), h.get("command")) for h in devices[i].get("holders", [])]
assert holders(0) == [("HOLDER_KIND_SLURM", "5001", "0", [32001], "2147483648", "python3")], holders(0)
# 32999 is not in /proc (exited): no holder; 32002's memory is not available: absent.
assert holders(1) == [("HOLDER_KIND_SLURM", "5001", "batch", [32002], None, "torchrun")], holders(1)
assert [int(p["pid"]) for p in devices[1]["processes"]] == [32002, 32999], devices[1]["processes"]
assert devices[0]["processes"][0].get("user") == "root", devices[0]["processes"]
PY
echo "processes_test: ok"
