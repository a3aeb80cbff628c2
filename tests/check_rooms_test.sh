#!/usr/bin/env bash
# Every link daemon/rooms.cmake forbids fails the configure step: for each "FROM TO" pair the
# project is configured again with that one link added (ACCELMON_ROOMS_TRY_LINK) and must stop
# with "FROM links TO". The tree as it is must configure cleanly first, so a failure is the
# added link's. One build directory serves every try (a re-configure takes about a second).
# Usage: check_rooms_test.sh REPO_ROOT
set -euo pipefail

root=${1:?usage: check_rooms_test.sh REPO_ROOT}
work=$(mktemp -d "${TMPDIR:-/tmp}/accelmon-rooms.XXXXXX")
trap 'rm -rf "$work"' EXIT

configure() { cmake -S "$root" -B "$work" -G Ninja "-DACCELMON_ROOMS_TRY_LINK=$1" >"$work/log" 2>&1; }

if ! configure ""; then
  cat "$work/log" >&2
  echo "FAIL: the tree as it is does not configure" >&2
  exit 1
fi

# The pairs, one per line, from the table itself.
mapfile -t pairs < <(sed -n '/^set(ACCELMON_FORBIDDEN_LINKS/,/)$/p' "$root/daemon/rooms.cmake" |
  grep -o '"[a-z_]* [a-z_]*"' | tr -d '"')
[ "${#pairs[@]}" -ge 20 ] || { echo "FAIL: read only ${#pairs[@]} pairs from rooms.cmake" >&2; exit 1; }

failed=0
for pair in "${pairs[@]}"; do
  from=${pair% *}
  to=${pair#* }
  if configure "$pair"; then
    echo "FAIL: $from linking $to configured" >&2
    failed=1
  elif ! grep -q "$from links $to" "$work/log"; then
    echo "FAIL: $from linking $to failed, but not for the room rule:" >&2
    grep -A4 "CMake Error" "$work/log" >&2 || tail -n 5 "$work/log" >&2
    failed=1
  else
    echo "ok: $from may not link $to"
  fi
done
[ "$failed" = 0 ] && echo "all ${#pairs[@]} forbidden links fail the configure step"
exit "$failed"
