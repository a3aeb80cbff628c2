# Shared helpers for the end-to-end tests: real binaries, real HTTP, bounded waits.
# Usage: source lib.sh; each test gets ACCELMON (the binary) and a scratch dir $WORK.
set -euo pipefail
# first_line, nth_port
# shellcheck source-path=SCRIPTDIR source=../../scripts/text_helpers.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/text_helpers.sh"

ACCELMON=${ACCELMON:?set ACCELMON to the accelmon binary}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/accelmon-e2e.XXXXXX")
PIDS=()

cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT

# skip REASON: ends the test as skipped (exit 77, SKIP_RETURN_CODE); `make test` lists it with
# REASON at the end. Under CI (CI=true) it fails instead: every tool a test needs comes from
# scripts/install-deps.sh, so a skip there is a broken setup, not a machine without the tool.
skip() {
  if [ "${CI:-}" = true ]; then
    echo "FAIL: would skip under CI, where this test must run: $*" >&2
    exit 1
  fi
  echo "SKIP: $*"
  exit 77
}

fail() {
  echo "FAIL: $*" >&2
  for f in "$WORK"/*.log; do [ -f "$f" ] && { echo "--- $f" >&2; tail -n 30 "$f" >&2; }; done
  exit 1
}

# start NAME ARGS...: runs accelmon in the background, logging to $WORK/NAME.log.
start() {
  local name=$1
  shift
  "$ACCELMON" "$@" >"$WORK/$name.log" 2>&1 &
  PIDS+=($!)
  eval "${name}_PID=$!"
}

# A pipe into a reader that stops early (`| grep -q`, `| head`) fails under pipefail whenever
# the reader exits before the writer has written everything (exit 141, curl's 23): read the
# whole output first, then match it. These helpers do; tests/check_pipe_close.py finds new
# pipes of that kind in every shell test and runnable docs block (make test runs it).

# output_has REGEX COMMAND...: whether COMMAND succeeds and a line of its output matches REGEX.
output_has() {
  local regex=$1 out
  shift
  out=$("$@") || return 1
  grep -Eq -- "$regex" <<<"$out"
}

# wait_for_log NAME REGEX [SECONDS]: waits until the log matches; prints the matching text.
wait_for_log() {
  local name=$1 regex=$2 deadline=$((SECONDS + ${3:-20})) found
  while [ $SECONDS -lt $deadline ]; do
    if found=$(grep -Eo -m 1 "$regex" "$WORK/$name.log" 2>/dev/null) && [ -n "$found" ]; then
      first_line "$found"
      return 0
    fi
    sleep 0.1
  done
  fail "timed out waiting for /$regex/ in $name.log"
}

# wait_for_metric URL REGEX [SECONDS]: waits until a scrape of URL has a line matching REGEX.
# scrape URL: the whole body, read before anything greps it. `curl | grep -q` fails under
# pipefail whenever grep finds its line and exits before curl has written everything.
scrape() { curl -fsS "$1" 2>/dev/null; }

wait_for_metric() {
  local url=$1 regex=$2 deadline=$((SECONDS + ${3:-20})) body
  while [ $SECONDS -lt $deadline ]; do
    if body=$(scrape "$url") && grep -Eq "$regex" <<<"$body"; then return 0; fi
    sleep 0.2
  done
  fail "timed out waiting for /$regex/ at $url"
}

# spool_drained METRICS_URL [NODE]: whether the agent (of NODE) says in its latest report that
# its spool holds only the last tick or two, i.e. the exporter has caught up with it.
spool_drained() {
  local spool
  spool=$(scrape "$1" | awk -v node="${2:-}" '/^accelmon_agent_spool_reports\{/ &&
    (node == "" || index($0, "node=\"" node "\"")) { print int($2) }')
  [ -n "$spool" ] && [ "$spool" -le 5 ]
}

# wait_until SECONDS WHAT COMMAND...: runs COMMAND until it succeeds; fails naming WHAT once
# SECONDS have passed. For waiting on a condition, never on a guess of how long it takes.
wait_until() {
  local seconds=$1 what=$2
  local deadline=$((SECONDS + seconds))
  shift 2
  until "$@"; do
    [ $SECONDS -lt $deadline ] || fail "timed out after ${seconds}s waiting for $what"
    sleep 0.1
  done
}

# listening_port PID: prints the TCP port that process PID listens on (its first), from /proc;
# fails while it listens on none. For peers told to listen on port 0 that do not log the port.
listening_port() {
  local inodes
  inodes=$(find "/proc/$1/fd" -lname 'socket:*' -printf '%l\n' 2>/dev/null | tr -dc '0-9\n' | tr '\n' ' ')
  [ -n "$inodes" ] || return 1
  local hex
  hex=$(awk -v inodes=" $inodes " '$4 == "0A" && index(inodes, " " $10 " ") {
    split($2, a, ":"); print a[2]; exit }' /proc/net/tcp /proc/net/tcp6)
  [ -n "$hex" ] || return 1
  echo $((16#$hex))
}

# wait_for_listening_port PID [SECONDS]: waits until PID listens on a TCP port; prints it.
wait_for_listening_port() {
  local pid=$1 deadline=$((SECONDS + ${2:-20}))
  until listening_port "$pid"; do
    kill -0 "$pid" 2>/dev/null || fail "process $pid exited before listening"
    [ $SECONDS -lt $deadline ] || fail "process $pid listens on no TCP port after ${2:-20}s"
    sleep 0.1
  done
}

# stop NAME [SECONDS]: SIGTERM, then expects a clean exit (status 0) within the time.
stop() {
  local name=$1 pid_var="${1}_PID" deadline=$((SECONDS + ${2:-10}))
  local pid=${!pid_var}
  kill -TERM "$pid"
  while kill -0 "$pid" 2>/dev/null; do
    [ $SECONDS -lt $deadline ] || fail "$name did not stop within ${2:-10}s of SIGTERM"
    sleep 0.1
  done
  wait "$pid" || fail "$name exited with status $? after SIGTERM"
}

# run_bg NAME COMMAND...: a peer binary (not accelmon: Prometheus, VictoriaMetrics, vmalert, a
# python helper) in the background, logging to $WORK/NAME.log; its pid in peer_pid[NAME].
declare -A peer_pid
run_bg() {
  local name=$1
  shift
  "$@" >"$WORK/$name.log" 2>&1 &
  PIDS+=($!)
  peer_pid[$name]=$!
}

# stop_bg NAME: SIGTERM, then up to 30 s for it to exit (the trap kills what is left).
stop_bg() {
  local pid=${peer_pid[$1]} deadline=$((SECONDS + 30))
  kill -TERM "$pid" 2>/dev/null || return 0
  while kill -0 "$pid" 2>/dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.1; done
}

# rank_first NODE ADDRESS...: the address rendezvous hashing ranks first for NODE, computed as
# daemon/agent/rendezvous.cc does (FNV-1a of "node|address", splitmix64): the hash is fixed arithmetic,
# so any tool can predict where a node goes.
rank_first() {
  python3 - "$@" <<'PY'
import sys
M = (1 << 64) - 1
def weight(node, address):
    h = 0xcbf29ce484222325
    for b in (node + "|" + address).encode():
        h = ((h ^ b) * 0x100000001b3) & M
    h = (h + 0x9e3779b97f4a7c15) & M
    h = ((h ^ (h >> 30)) * 0xbf58476d1ce4e5b9) & M
    h = ((h ^ (h >> 27)) * 0x94d049bb133111eb) & M
    return h ^ (h >> 31)
node, addresses = sys.argv[1], sys.argv[2:]
print(max(sorted(addresses), key=lambda a: weight(node, a)))
PY
}
