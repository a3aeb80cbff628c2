#!/usr/bin/env bash
# Runs every fuzz target of accelmon_fuzz (ACCELMON_FUZZ_TARGET picks one) for a short while,
# seeded with the fixture files of its format.
# Usage: tests/fuzz/run.sh BUILD_DIR SECONDS_PER_TARGET [PARALLEL_TARGETS]
# Targets run PARALLEL_TARGETS at a time (default: one per core); each fuzzes on one core.
set -euo pipefail
build=${1:?build dir}
seconds=${2:-10}
parallel=${3:-$(nproc)}
root=$(cd "$(dirname "$0")/../fixtures" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

declare -A seeds=(
  [meminfo]="host/proc/meminfo"
  [vmstat]="host/proc/vmstat"
  [pressure]="host/proc/pressure/memory"
  [buddyinfo]="host/proc/buddyinfo"
  [netdev]="host/proc/net/dev"
  [sysfs_values]="host/sys/class/net/ens1f0/speed host/sys/class/infiniband/mlx5_0/ports/1/rate host/sys/class/infiniband/mlx5_0/ports/1/state host/sys/class/thermal/thermal_zone0/temp"
  [sysfs_devices]=""
  [processes]="procs-slurm-v1/proc/31001/cgroup procs-slurm-v2/proc/32002/cgroup procs-plain/proc/33001/status procs-amdgpu-fdinfo/proc/34001/fdinfo/3 procs-amdgpu-fdinfo/proc/34002/fdinfo/3"
  [recording_reader]=""
  [amdgpu_gpu_metrics]="amdgpu/sys/class/drm/card2/device/gpu_metrics amdgpu/sys/class/drm/card10/device/gpu_metrics"
  [cdi_spec]="dra/cdi/k8s.gpu.nvidia.com-claim_5b1c4f0e-7a1d-4c2e-9f3b-0d1e2f3a4b5c.yaml dra/cdi/k8s.gpu.nvidia.com-claim_8e2d6a41-3c5f-4b7e-a1d9-6f0e5c4b3a21.yaml dra/cdi/sim.accelmon.io-gpu.json"
)
# Fuzzes one target; its output goes to $work/$target.out, printed in order afterwards.
fuzz_one() {
  local target=$1 corpus="$work/$1"
  mkdir -p "$corpus"
  for f in ${seeds[$target]}; do [ -f "$root/$f" ] && cp "$root/$f" "$corpus/$(echo "$f" | tr / _)"; done
  # sysfs_devices takes "attribute=value" lines: seed it with a real hwmon chip and IB port.
  if [ "$target" = sysfs_devices ]; then
    for d in host/sys/class/hwmon/hwmon0 host/sys/class/infiniband/mlx5_0/ports/1; do
      (cd "$root/$d" && find . -type f | sed 's|^\./||' | while read -r f; do
        printf '%s=%s\n' "$f" "$(head -c 200 "$f" | tr -d '\n')"; done) >"$corpus/$(echo "$d" | tr / _)"
    done
  fi
  # recording_reader: a small raw segment (first byte even) and a recipe that writes records across
  # blocks, some zstd-compressed, then flips a byte (first byte odd); see recording_reader_fuzz.cc.
  # raw-dictionary: a version 2 header carrying a zstd dictionary, then a record compressed
  # "with the segment's dictionary"; recipe-dictionary: records zstd'd with a dictionary.
  if [ "$target" = recording_reader ]; then
    printf '\x00\xf5\x9c\x32\x17\x4d\x00\x01\x02\x00\x08\x02\x12\x01\x74\x2a\x44\x68\x65\x6c\x6c\x6f\x20\x64\x69\x63\x74\x69\x6f\x6e\x61\x72\x79\x20\x68\x65\x6c\x6c\x6f\x20\x64\x69\x63\x74\x69\x6f\x6e\x61\x72\x79\x20\x68\x65\x6c\x6c\x6f\x20\x64\x69\x63\x74\x69\x6f\x6e\x61\x72\x79\x20\x68\x65\x6c\x6c\x6f\x20\x64\x69\x63\x74\x69\x6f\x6e\x61\x72\x79\x20\x34\xf3\x5f\x76\x12\x00\x01\x01\x02\x28\xb5\x2f\xfd\x20\x07\x39\x00\x00\x0a\x05\x68\x65\x6c\x6c\x6f' >"$corpus/raw-dictionary"
    printf '\x01\x03\x10\x00\x61\x09\x00\x90\x62\x09\x00\x00\x63\x09\x00\x40\x00\x55' >"$corpus/recipe-dictionary"
    printf '\x00\x73\xea\x34\xae\x07\x00\x01\x01\x00\x68\x65\x6c\x6c\x6f\xe3\x34\xba\x60\x00\x00\x01\x43\x84\xd2\x45\x02\x00\x01\x02\x00' >"$corpus/raw"
    printf '\x01\x04\x10\x00\x61\x01\x00\x90\x62\x05\x00\x90\x63\x00\x00\x00\x00\x00\x00\x40\x00\x55' >"$corpus/recipe"
  fi
  echo "fuzz: $target for ${seconds}s"
  ACCELMON_FUZZ_TARGET=$target "$build/tests/fuzz/accelmon_fuzz" -artifact_prefix="$work/" -max_total_time="$seconds" -timeout=5 -rss_limit_mb=2048 \
    -print_final_stats=1 "$corpus" 2>"$work/$target.log" ||
    {
      awk '/ERROR:/,/SUMMARY:/ { print; if (++n == 40) exit }' "$work/$target.log"
      tail -n 8 "$work/$target.log"   # the input, as bytes and Base64, to reproduce it
      echo "fuzz: $target FAILED"
      return 1
    }
  grep -E "stat::number_of_executed_units" "$work/$target.log" | sed "s/^/  /"
}

failed=0
running=0
targets=("${!seeds[@]}")
for target in "${targets[@]}"; do
  fuzz_one "$target" >"$work/$target.out" 2>&1 &
  running=$((running + 1))
  if [ "$running" -ge "$parallel" ]; then
    wait -n || failed=1
    running=$((running - 1))
  fi
done
while [ "$running" -gt 0 ]; do
  wait -n || failed=1
  running=$((running - 1))
done
for target in "${targets[@]}"; do cat "$work/$target.out"; done
[ "$failed" -eq 0 ] || { echo "fuzz: a target FAILED (see above)"; exit 1; }
echo "fuzz: all targets ran clean"
