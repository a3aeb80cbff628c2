#!/usr/bin/env bash
# `make test`: the release build and its tests, one clang sanitizer build (ASan + UBSan, the test
# executables and the libFuzzer targets), its tests, the fuzz smoke run. A build uses every core
# while most tests wait on sockets and child processes, so each test phase runs beside the next
# build or run:
#   release build -> release tests | sanitizer build -> sanitizer tests | fuzz run
# A background phase's output goes to a log under build-logs/, printed when it fails. The end
# lists the time of every phase, the tests each ran and every skipped test with its reason
# (docs/development.md "Test time").
set -euo pipefail
cd "$(dirname "$0")/.."

MAKE=${MAKE:-make}
# The fuzz smoke run beside the sanitizer tests: 5 s a target (`make fuzz` alone: 10 s; longer:
# make fuzz FUZZ_SECONDS=600).
export FUZZ_SECONDS=${FUZZ_SECONDS:-5}
logs=${TEST_LOG_DIR:-build-logs}
mkdir -p "$logs"
phases=()
started=$(date +%s)

seconds_since() { echo $(($(date +%s) - $1)); }

# run_phase NAME TARGET: in the foreground, output to the terminal.
run_phase() {
  local name=$1 target=$2 t0
  t0=$(date +%s)
  echo "== $name (make $target)"
  if ! "$MAKE" --no-print-directory "$target"; then
    echo "== $name FAILED after $(seconds_since "$t0") s"
    exit 1
  fi
  phases+=("$(printf '%-20s %5d s' "$name" "$(seconds_since "$t0")")")
}

# run_beside FG_NAME FG_TARGET BG_NAME BG_TARGET: the background target's output goes to a log.
run_beside() {
  local fg_name=$1 fg_target=$2 bg_name=$3 bg_target=$4 log t0 bg fg_rc=0 bg_rc=0
  log="$logs/$bg_target.log"
  t0=$(date +%s)
  echo "== $fg_name (make $fg_target), beside $bg_name (make $bg_target > $log)"
  (
    b0=$(date +%s)
    "$MAKE" --no-print-directory "$bg_target" >"$log" 2>&1
    echo $(($(date +%s) - b0)) >"$log.seconds"
  ) &
  bg=$!
  "$MAKE" --no-print-directory "$fg_target" || fg_rc=$?
  local fg_seconds
  fg_seconds=$(seconds_since "$t0")
  wait "$bg" || bg_rc=$?
  if [ "$bg_rc" -ne 0 ]; then
    echo "== $bg_name FAILED; the end of $log:"
    tail -n 60 "$log"
  fi
  [ "$fg_rc" -eq 0 ] || echo "== $fg_name FAILED after $fg_seconds s"
  [ "$fg_rc" -eq 0 ] && [ "$bg_rc" -eq 0 ] || exit 1
  phases+=("$(printf '%-20s %5d s' "$fg_name" "$fg_seconds")")
  phases+=("$(printf '%-20s %5d s  (beside %s)' "$bg_name" "$(cat "$log.seconds")" "$fg_name")")
  phases+=("$(printf '%-20s %5d s' "  together" "$(seconds_since "$t0")")")
}

# Results of an earlier run must not be counted as this one's.
rm -f "${BUILD_DIR:-build}/ctest-junit.xml" "${ASAN_DIR:-build-asan}/ctest-junit.xml"
run_phase "release build" build
run_beside "release tests" check-run "sanitizer build" asan-build
run_beside "sanitizer tests" asan-run "fuzz run" fuzz-run

echo
echo "make test: every phase passed"
printf '  %s\n' "${phases[@]}"
printf '  %-20s %5d s\n' "total" "$(seconds_since "$started")"
echo
python3 scripts/test_summary.py "release tests=${BUILD_DIR:-build}/ctest-junit.xml" \
  "sanitizer tests=${ASAN_DIR:-build-asan}/ctest-junit.xml"
