#!/usr/bin/env bash
# `accelmon top` (docs/live-views.md): an exporter and three simulated agents; `top --once` agrees
# with /metrics; the terminal UI in tmux shows the fleet and answers its keys (sort, filter, a
# node's devices, back, quit), with and without colour (NO_COLOR); an exporter gone is shown as
# unreachable while top keeps running; `--local` needs no exporter.
# With ACCELMON_SCREENSHOT_DIR set it writes the screen, colours included, to top.ansi (the node
# list) and top-devices.ansi (a node's devices) there, for the README.
source "$(dirname "$0")/lib.sh"

if ! command -v tmux >/dev/null; then
  skip "tmux is not installed (scripts/install-deps.sh test installs it)"
fi

# A tmux server of our own, gone with the test.
TMUX_SOCKET="accelmon-top-test-$$"
tmux_() { tmux -L "$TMUX_SOCKET" -f /dev/null "$@"; }
trap 'tmux_ kill-server 2>/dev/null || true; cleanup' EXIT

start exporter exporter --web.listen-address 127.0.0.1:0 --grpc.listen-address 127.0.0.1:0
ports=$(wait_for_log exporter 'ingest on 127.0.0.1:0 \(port [0-9]+\), metrics on 127.0.0.1:0 \(port [0-9]+')
grpc_port=$(nth_port "$ports" 1)
web_port=$(echo "$ports" | grep -Eo 'port [0-9]+' | tail -1 | grep -Eo '[0-9]+')
url="http://127.0.0.1:$web_port/metrics"
address="127.0.0.1:$grpc_port"

# One report each (a collection an hour): what top reads and what /metrics shows cannot move
# between the two reads.
for node in alpha bravo charlie; do
  start "agent_$node" agent --exporter.address "$address" --node.name "top-$node" --sim 2 \
    --collect.interval 1h --push.socket ""
done
fleet_reported() {
  local body
  body=$(scrape "$url") || return 1
  [ "$(grep -c '^accelmon_node_up{.*} 1$' <<<"$body")" -eq 3 ] &&
    grep -q '^accelmon_device_memory_used_bytes{node="top-charlie",device="1"' <<<"$body"
}
wait_until 20 "three nodes with their devices in /metrics" fleet_reported

# --once: plain text, the same numbers as /metrics.
scrape "$url" >"$WORK/metrics.txt"
"$ACCELMON" top --once --exporter.address "$address" >"$WORK/once.txt" 2>"$WORK/once.err" ||
  fail "top --once exited $?: $(cat "$WORK/once.err")"
metrics_nodes=$(grep -c '^accelmon_node_up{' "$WORK/metrics.txt")
once_nodes=$(awk 'NR == 2 && $1 == "nodes" { print $2 }' "$WORK/once.txt")
[ "$once_nodes" = "$metrics_nodes" ] ||
  fail "top --once says $once_nodes nodes, /metrics $metrics_nodes: $(cat "$WORK/once.txt")"
grep -q '^nodes 3 (3 live, 0 stale)  devices 6  ' "$WORK/once.txt" ||
  fail "summary line: $(sed -n 2p "$WORK/once.txt")"
metric_used=$(awk 'index($0, "accelmon_device_memory_used_bytes{node=\"top-bravo\",device=\"1\"") == 1 {
  print $NF }' "$WORK/metrics.txt")
once_used=$(awk '/^NODE +IDX +MEM_USED_BYTES/ { devices = 1; next } /^$/ { devices = 0 }
  devices && $1 == "top-bravo" && $2 == "1" { print $3 }' "$WORK/once.txt")
[ -n "$metric_used" ] || fail "no memory used for top-bravo device 1 in /metrics"
[ "$once_used" = "$metric_used" ] ||
  fail "top --once says top-bravo device 1 uses '$once_used' bytes, /metrics $metric_used"
devices=$(awk '/^NODE +IDX / { devices = 1; next } /^$/ { devices = 0 } devices' "$WORK/once.txt" |
  grep -c '^top-')
[ "$devices" -eq 6 ] || fail "top --once lists $devices devices, expected 6"

# Two exporters (a fleet spread over them): a second exporter with one node of its own, and
# top-bravo reporting to both (as a node does for a while after it moved: the exporter it left
# still serves its last report). top --once over both lists every node once, from its newest.
start exporter2 exporter --web.listen-address 127.0.0.1:0 --grpc.listen-address 127.0.0.1:0
ports2=$(wait_for_log exporter2 'ingest on 127.0.0.1:0 \(port [0-9]+\), metrics on 127.0.0.1:0 \(port [0-9]+')
address2="127.0.0.1:$(nth_port "$ports2" 1)"
url2="http://127.0.0.1:$(echo "$ports2" | grep -Eo 'port [0-9]+' | tail -1 | grep -Eo '[0-9]+')/metrics"
start agent_delta agent --exporter.address "$address2" --node.name top-delta --sim 3 \
  --collect.interval 1h --push.socket ""
start agent_bravo2 agent --exporter.address "$address2" --node.name top-bravo --sim 1 \
  --collect.interval 1h --push.socket ""
second_reported() {
  local body
  body=$(scrape "$url2") || return 1
  [ "$(grep -c '^accelmon_node_up{.*} 1$' <<<"$body")" -eq 2 ]
}
wait_until 20 "two nodes on the second exporter" second_reported
"$ACCELMON" top --once --exporter.address "$address,$address2" >"$WORK/once2.txt" \
  2>"$WORK/once2.err" || fail "top --once over two exporters exited $?: $(cat "$WORK/once2.err")"
grep -q "^accelmon top: exporters $address,$address2 at " "$WORK/once2.txt" ||
  fail "the title does not name both exporters: $(head -n 1 "$WORK/once2.txt")"
grep -q '^nodes 4 (4 live, 0 stale)  devices 8  ' "$WORK/once2.txt" ||
  fail "top over two exporters: $(sed -n 2p "$WORK/once2.txt")"
for node in top-alpha top-bravo top-charlie top-delta; do
  [ "$(grep -c "^$node  " "$WORK/once2.txt")" -ge 1 ] || fail "$node missing: $(cat "$WORK/once2.txt")"
done
# top-bravo once, with the one device its newest report (the second exporter's) has.
bravo_devices=$(awk '/^NODE +IDX / { devices = 1; next } /^$/ { devices = 0 } devices' \
  "$WORK/once2.txt" | grep -c '^top-bravo ')
[ "$bravo_devices" -eq 1 ] || fail "top-bravo shows $bravo_devices devices, expected its newest report's 1"
# One exporter gone: the other's nodes, the reason on stderr, exit 1.
stop exporter2
set +e
"$ACCELMON" top --once --exporter.address "$address,$address2" >"$WORK/once3.txt" 2>"$WORK/once3.err"
rc=$?
set -e
[ "$rc" -eq 1 ] || fail "top --once with one exporter down exited $rc, expected 1"
grep -q "exporter $address2 unreachable: .*; the others are shown" "$WORK/once3.err" ||
  fail "stderr does not name the exporter down: $(cat "$WORK/once3.err")"
grep -q '^nodes 3 (3 live, 0 stale)' "$WORK/once3.txt" ||
  fail "the reachable exporter's nodes: $(sed -n 2p "$WORK/once3.txt")"
stop agent_delta
stop agent_bravo2

# The terminal UI, 120x40, inside tmux.
pane() { tmux_ capture-pane -p -t "$1"; }
pane_has() { local text; text=$(pane "$1") && grep -qF -- "$2" <<<"$text"; }
pane_lacks() { local text; text=$(pane "$1") && ! grep -qF -- "$2" <<<"$text"; }
# pane_says SESSION TEXT: TEXT anywhere, also across lines top wrapped (a long error).
pane_says() { local text; text=$(pane "$1" | tr -d '\n') && grep -qF -- "$2" <<<"$text"; }
# run_top SESSION ENV...: `accelmon top` against the exporter; its exit status goes to
# $WORK/SESSION.rc when it ends.
run_top() {
  local session=$1
  shift
  local command
  command=$(printf '%q ' env "$@" "$ACCELMON" top --exporter.address "$address" --refresh 500ms)
  tmux_ new-session -d -s "$session" -x 120 -y 40 \
    "$command; echo \$? >$(printf '%q' "$WORK/$session.rc")"
}
exited_with() { [ -s "$WORK/$1.rc" ]; }

run_top colour TERM=xterm-256color
wait_until 20 "the fleet on top's screen" pane_has colour 'nodes 3 (3 live, 0 stale)'
wait_until 10 "the node list" pane_has colour 'top-charlie'
if [ -n "${ACCELMON_SCREENSHOT_DIR:-}" ]; then
  mkdir -p "$ACCELMON_SCREENSHOT_DIR"
  tmux_ capture-pane -p -e -t colour >"$ACCELMON_SCREENSHOT_DIR/top.ansi"
fi
tmux_ capture-pane -p -e -t colour >"$WORK/colour.ansi"
grep -qE $'\e\\[([0-9]+;)*3[1-6](;[0-9]+)*m' "$WORK/colour.ansi" ||
  fail "no colour on the screen without NO_COLOR: $(head -20 "$WORK/colour.ansi" | cat -v)"

# s: the sort key changes, and the header says which.
pane_has colour 'sort: node' || fail "header does not say 'sort: node': $(pane colour)"
tmux_ send-keys -t colour s
wait_until 10 "the header to say 'sort: util'" pane_has colour 'sort: util'

# / bravo Enter: only that node remains.
tmux_ send-keys -t colour /
wait_until 10 "the filter prompt" pane_has colour 'Filter (node or job):'
tmux_ send-keys -t colour -l bravo
tmux_ send-keys -t colour Enter
wait_until 10 "the header to say 'filter: bravo'" pane_has colour 'filter: bravo'
filtered() {
  pane_has colour 'top-bravo' && pane_lacks colour 'top-alpha' && pane_lacks colour 'top-charlie' &&
    pane_has colour 'nodes 1 (1 live, 0 stale)  devices 2'
}
wait_until 10 "only top-bravo after the filter" filtered

# Enter: the node's devices.
tmux_ send-keys -t colour Enter
wait_until 10 "top-bravo's devices" pane_has colour 'Devices of top-bravo (live, 2 device(s))'
pane_has colour 'IDX' || fail "no device table: $(pane colour)"
if [ -n "${ACCELMON_SCREENSHOT_DIR:-}" ]; then
  tmux_ capture-pane -p -e -t colour >"$ACCELMON_SCREENSHOT_DIR/top-devices.ansi"
fi
# Esc: back to the node list.
tmux_ send-keys -t colour Escape
wait_until 10 "the node list again" pane_lacks colour 'Devices of top-bravo'

# q: top ends, status 0.
tmux_ send-keys -t colour q
wait_until 10 "top to exit after q" exited_with colour
[ "$(cat "$WORK/colour.rc")" = 0 ] || fail "top exited $(cat "$WORK/colour.rc") after q"

# NO_COLOR: no colour at all; then the exporter goes away and top says so, and keeps running.
run_top plain TERM=xterm-256color NO_COLOR=1
wait_until 20 "the fleet on the NO_COLOR screen" pane_has plain 'nodes 3 (3 live, 0 stale)'
tmux_ capture-pane -p -e -t plain >"$WORK/plain.ansi"
if grep -qE $'\e\\[([0-9]+;)*3[1-6](;[0-9]+)*m' "$WORK/plain.ansi"; then
  fail "colour on the screen with NO_COLOR=1: $(head -20 "$WORK/plain.ansi" | cat -v)"
fi
stop exporter
wait_until 20 "top to say the exporter is unreachable" \
  pane_says plain "exporter $address unreachable:"
pane_says plain 'retrying every 500ms' || fail "no retry notice: $(pane plain)"
pane_has plain 'top-bravo' || fail "the last answer left the screen: $(pane plain)"
exited_with plain && fail "top exited while the exporter was unreachable"
tmux_ send-keys -t plain q
wait_until 10 "top to exit after q" exited_with plain
[ "$(cat "$WORK/plain.rc")" = 0 ] || fail "top exited $(cat "$WORK/plain.rc") after q"

# --once against the closed port: the reason on stderr, exit 1.
set +e
"$ACCELMON" top --once --exporter.address "$address" >"$WORK/once.txt" 2>"$WORK/once.err"
rc=$?
set -e
[ $rc -eq 1 ] || fail "top --once with no exporter exited $rc, expected 1"
grep -qF "exporter $address unreachable:" "$WORK/once.err" ||
  fail "top --once with no exporter said: $(cat "$WORK/once.err")"

# --local: this host's collectors, no exporter.
"$ACCELMON" top --local --once --sim 2 --node.name top-local >"$WORK/local.txt" 2>"$WORK/local.err" ||
  fail "top --local --once exited $?: $(cat "$WORK/local.err")"
grep -q '^nodes 1 (1 live, 0 stale)  devices 2  ' "$WORK/local.txt" ||
  fail "top --local: $(cat "$WORK/local.txt")"
local_devices=$(awk '/^NODE +IDX / { devices = 1; next } /^$/ { devices = 0 } devices' \
  "$WORK/local.txt" | grep -c '^top-local ')
[ "$local_devices" -eq 2 ] || fail "top --local lists $local_devices devices, expected 2"

for node in alpha bravo charlie; do stop "agent_$node"; done
echo "top_test: ok"
