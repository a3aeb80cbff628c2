#!/usr/bin/env bash
# Guards the core path (issue 39): the goals of bench/goals.sh for two builds, one after the
# other on the same machine, then each measure as new/old, so that a regression shows as a
# number. docs/development.md asks for it before closing a change to ingest, the store, the
# render or the recording.
#   bench/compare.sh OLD_BUILD NEW_BUILD     (each a build folder with `make bench` done in it)
# Each build's full goals table is printed as it runs. The last table: every measure both runs
# recorded, old, new and new/old (for times and CPU lower is better; for rates higher is).
# Noise on this 2-core VM is about 10 % between runs of the same build: read ratios within
# 0.9-1.1 as unchanged, or run it twice.
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 OLD_BUILD NEW_BUILD" >&2; exit 2; }
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/.."
for build in "$1" "$2"; do
  need_binary "$build/accelmon" "$build/bench/render_bench" "$build/bench/parse_bench" \
    "$build/bench/remote_write_load"
done
old=$work/old.tsv
new=$work/new.tsv
echo "## Old: $1"
BENCH_RESULTS=$old KEEP_RESULTS=1 bash bench/goals.sh "$1"
echo
echo "## New: $2"
BENCH_RESULTS=$new KEEP_RESULTS=1 bash bench/goals.sh "$2"
echo
echo "## New against old"
echo
/usr/bin/python3 - "$old" "$new" <<'PY'
import sys

sys.path.insert(0, "bench")
from goals import load  # the same reading of a results file as the goals table

old, new = load(sys.argv[1]), load(sys.argv[2])
print("| measure | old | new | new/old |")
print("| --- | --- | --- | --- |")
for key in sorted(old.keys() & new.keys()):
    ratio = f"{new[key] / old[key]:.2f}" if old[key] else "n/a"
    print(f"| {key} | {old[key]:,.6g} | {new[key]:,.6g} | {ratio} |")
PY
