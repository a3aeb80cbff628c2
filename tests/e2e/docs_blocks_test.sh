#!/usr/bin/env bash
# Runs every shell block of README.md and docs/*.md that is marked as runnable: the line
# `<!-- runnable -->` directly before a ```sh (or ```bash) fence. Each block runs on its own with
# `bash -euo pipefail`, in a fresh directory that links the repository's top-level entries (so
# `tests/fixtures/...` and `diagnostics/defaults.yaml` resolve) with `accelmon` (and the tests'
# `fake-kubelet`, FAKE_KUBELET) on PATH, under a
# timeout; whatever it left running is killed afterwards. A failing block is named by FILE:LINE.
# DOCS_BLOCK_TIMEOUT (seconds, default 60) bounds each block; DOCS_BLOCKS_MIN (default 8) is how
# many marked blocks there must at least be.
source "$(dirname "$0")/lib.sh"

repo=$(cd "$(dirname "$0")/../.." && pwd)
block_timeout=${DOCS_BLOCK_TIMEOUT:-60}
min_blocks=${DOCS_BLOCKS_MIN:-8}

mkdir -p "$WORK/bin" "$WORK/blocks"
ln -s "$(cd "$(dirname "$ACCELMON")" && pwd)/$(basename "$ACCELMON")" "$WORK/bin/accelmon"
# The tests' fake kubelet (tests/support/fake_kubelet_main.cc), for docs/jobs.md's DRA example.
[ -n "${FAKE_KUBELET:-}" ] && ln -s "$FAKE_KUBELET" "$WORK/bin/fake-kubelet"

# Extract: blocks/N.sh and blocks/N.where ("FILE:LINE" of the opening fence).
n=0
cd "$repo"
for doc in README.md docs/*.md; do
  awk -v doc="$doc" -v out="$WORK/blocks" -v start="$n" '
    function fail(msg) { print doc ":" NR ": " msg > "/dev/stderr"; bad = 1; exit 1 }
    marked && !inside {
      if ($0 ~ /^```(sh|bash)[[:space:]]*$/) {
        inside = 1; marked = 0; n++
        file = out "/" (start + n) ".sh"
        print doc ":" NR > (out "/" (start + n) ".where")
        printf "" > file
        next
      }
      fail("<!-- runnable --> must be followed directly by a ```sh fence")
    }
    inside {
      if ($0 ~ /^```[[:space:]]*$/) { inside = 0; close(file); next }
      print >> file
      next
    }
    /^<!-- runnable -->[[:space:]]*$/ { marked = 1 }
    END {
      if (bad) exit 1
      if (inside) { print doc ": unterminated runnable block" > "/dev/stderr"; exit 1 }
      if (marked) { print doc ": <!-- runnable --> at the end of the file" > "/dev/stderr"; exit 1 }
    }
  ' "$doc" || fail "cannot extract the runnable blocks of $doc"
  n=$(find "$WORK/blocks" -name '*.sh' | wc -l)
done
[ "$n" -ge "$min_blocks" ] || fail "only $n runnable blocks in README.md and docs/*.md (want >= $min_blocks)"

failed=()
for i in $(seq 1 "$n"); do
  where=$(cat "$WORK/blocks/$i.where")
  dir="$WORK/run/$i"
  mkdir -p "$dir"
  for entry in "$repo"/* ; do
    case $(basename "$entry") in build | build-*) continue ;; esac
    ln -s "$entry" "$dir/$(basename "$entry")"
  done
  started=$SECONDS
  # timeout makes itself a process group leader and signals the whole group when time is up;
  # afterwards the group is killed either way, so a block's background processes never linger.
  (cd "$dir" && PATH="$WORK/bin:$PATH" exec timeout -k 5 "$block_timeout" \
    bash -euo pipefail "$WORK/blocks/$i.sh") >"$WORK/block-$i.out" 2>&1 </dev/null &
  pid=$!
  set +e
  wait "$pid"
  rc=$?
  set -e
  kill -- -"$pid" 2>/dev/null || true
  if [ "$rc" -eq 0 ]; then
    echo "ok    $where ($((SECONDS - started))s)"
  else
    [ "$rc" -eq 124 ] && why="timed out after ${block_timeout}s" || why="exit $rc"
    echo "FAIL  $where: $why" >&2
    sed 's/^/      | /' "$WORK/blocks/$i.sh" >&2
    echo "      output (last 20 lines):" >&2
    tail -n 20 "$WORK/block-$i.out" | sed 's/^/      > /' >&2
    failed+=("$where")
  fi
done

[ ${#failed[@]} -eq 0 ] || fail "${#failed[@]} of $n runnable blocks failed: ${failed[*]}"
echo "all $n runnable blocks of README.md and docs/*.md passed"
