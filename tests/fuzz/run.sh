#!/usr/bin/env bash
# Runs every fuzz target for a short while, seeded with the fixture files of its format.
# Usage: tests/fuzz/run.sh BUILD_DIR SECONDS_PER_TARGET
set -euo pipefail
build=${1:?build dir}
seconds=${2:-10}
root=$(cd "$(dirname "$0")/../fixtures" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

declare -A seeds=(
  [meminfo]="host/proc/meminfo"
  [vmstat]="host/proc/vmstat"
  [pressure]="host/proc/pressure/memory"
  [buddyinfo]="host/proc/buddyinfo"
  [netdev]="host/proc/net/dev"
  [sysfs_values]="host/sys/class/net/ens1f0/speed host/sys/class/net/ens1f0/mtu"
)
for target in "${!seeds[@]}"; do
  corpus="$work/$target"
  mkdir -p "$corpus"
  for f in ${seeds[$target]}; do [ -f "$root/$f" ] && cp "$root/$f" "$corpus/$(echo "$f" | tr / _)"; done
  echo "fuzz: $target for ${seconds}s"
  "$build/tests/fuzz/${target}_fuzz" -max_total_time="$seconds" -timeout=5 -rss_limit_mb=2048 \
    -print_final_stats=1 "$corpus" 2>"$work/$target.log" ||
    { tail -n 40 "$work/$target.log"; echo "fuzz: $target FAILED"; exit 1; }
  grep -E "stat::number_of_executed_units" "$work/$target.log" | sed "s/^/  /"
done
echo "fuzz: all targets ran clean"
