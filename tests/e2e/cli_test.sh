#!/usr/bin/env bash
# The command line: help, version, and bad input that stops start-up with a reason and exit 2.
source "$(dirname "$0")/lib.sh"

output_has "standalone" "$ACCELMON" --help || fail "--help does not list the subcommands"
for cmd in agent exporter standalone; do
  "$ACCELMON" "$cmd" --help >"$WORK/help.txt" || fail "$cmd --help exited non-zero"
  grep -q -- "--" "$WORK/help.txt" || fail "$cmd --help lists no flags"
done
# Help is read from a file: `accelmon ... | grep -q` fails under pipefail when grep exits before
# the rest of the help is written (SIGPIPE).
"$ACCELMON" standalone --help >"$WORK/help.txt"
grep -q -- "--web.listen-address" "$WORK/help.txt" || fail "missing flag in help"
"$ACCELMON" agent --help >"$WORK/help.txt"
grep -q -- "--exporter.address" "$WORK/help.txt" || fail "missing flag in help"
# One pair of flags per host collector, node_exporter's style.
for cmd in agent standalone; do
  "$ACCELMON" "$cmd" --help >"$WORK/help.txt"
  grep -q -- "--no-collector.meminfo" "$WORK/help.txt" ||
    fail "$cmd --help does not list --no-collector.meminfo"
done
output_has '^accelmon [0-9]+\.[0-9]+\.[0-9]+' "$ACCELMON" --version || fail "--version"

# expect_usage_error "WHAT THE MESSAGE SAYS" ARGS...: exit 2 and one line naming the problem.
expect_usage_error() {
  local expected=$1
  shift
  set +e
  "$ACCELMON" "$@" >"$WORK/out.txt" 2>"$WORK/err.txt"
  local rc=$?
  set -e
  [ $rc -eq 2 ] || fail "'accelmon $*' exited $rc, expected 2"
  grep -q -- "$expected" "$WORK/err.txt" || fail "'accelmon $*' said: $(cat "$WORK/err.txt")"
  [ "$(wc -l <"$WORK/err.txt")" -eq 1 ] || fail "'accelmon $*' printed more than one line"
}

expect_usage_error "bogus" agent --bogus
expect_usage_error "required" ""
expect_usage_error "not expected: --no-collector.bogus" agent --no-collector.bogus
expect_usage_error "expected host:port" exporter --web.listen-address foo
expect_usage_error "port must be a number" exporter --grpc.listen-address :99999
expect_usage_error "a host is needed" agent --exporter.address :9478
expect_usage_error "is not a duration" agent --collect.interval 10
expect_usage_error "greater than 0" standalone --collect.interval 0s
expect_usage_error "is not a directory" agent --path.procfs /nonexistent/proc
# `--name=` is an empty value, never the next argument (tests/unit/empty_values_test.cc: all).
expect_usage_error "not expected: --bogus-flag" agent --push.socket= --bogus-flag
expect_usage_error "node.name: needs a value" agent --node.name= --push.socket=
expect_usage_error "is not a duration" exporter --node.expire-after=
expect_usage_error "takes no value" exporter --no-diagnostics=
expect_usage_error "not in range" standalone --sim 65
expect_usage_error "debug,info,warn,error" --log.level loud standalone
expect_usage_error "must be from 4KiB to 1GiB" exporter --grpc.max-recv-msg-size 1KiB
expect_usage_error "is not a size" exporter --grpc.max-recv-msg-size lots
expect_usage_error "not in range" exporter --grpc.max-devices-per-node 0
expect_usage_error "not in range" standalone --grpc.max-reports-per-second 0
expect_usage_error "not in range" agent --push.max-processes-per-device 0
expect_usage_error "is not a duration" agent --push.expire-after soon
# A socket set on the command line that cannot be served stops start-up, naming the path.
expect_usage_error "on $WORK/missing/agent.sock: directory $WORK/missing does not exist" \
  agent --push.socket "$WORK/missing/agent.sock"
expect_usage_error "is not a duration" exporter --grpc.max-clock-skew soon
# A bad diagnostics config stops start-up naming the file and line (exporter and standalone).
printf 'rules:\n  memory_fragmentation:\n    ratio: 7\n' >"$WORK/bad.yaml"
expect_usage_error "$WORK/bad.yaml:3: rules.memory_fragmentation.ratio" \
  exporter --diagnostics.config "$WORK/bad.yaml"
expect_usage_error "$WORK/bad.yaml:3:" standalone --diagnostics.config "$WORK/bad.yaml"
expect_usage_error "$WORK/missing.yaml: does not exist" \
  exporter --diagnostics.config "$WORK/missing.yaml"

# A port already taken is a runtime failure (exit 1) with a reason, not a hang.
start first exporter --web.listen-address 127.0.0.1:0 --grpc.listen-address 127.0.0.1:0
web_port=$(wait_for_log first 'metrics on 127.0.0.1:0 \(port [0-9]+' | grep -Eo '[0-9]+$')
wait_for_log first 'diagnostics: [0-9]+ rules \(.*link_down.*\) with config built-in defaults' >/dev/null
set +e
timeout 20 "$ACCELMON" exporter --web.listen-address "127.0.0.1:$web_port" \
  --grpc.listen-address 127.0.0.1:0 >"$WORK/out.txt" 2>"$WORK/err.txt"
rc=$?
set -e
[ $rc -eq 1 ] || fail "exporter on a taken port exited $rc, expected 1"
grep -q "cannot listen for HTTP on 127.0.0.1:$web_port" "$WORK/err.txt" ||
  fail "no clear reason for the taken port: $(cat "$WORK/err.txt")"
stop first

# --no-collector.meminfo: the other host collectors run, and no meminfo series is served.
start nomem standalone --no-collector.meminfo --node.name fixture \
  --path.procfs "$FIXTURES/host/proc" --path.sysfs "$FIXTURES/host/sys" \
  --collect.interval 200ms --web.listen-address 127.0.0.1:0
url=$(wait_for_log nomem 'http://[^ ]+/metrics')
wait_for_metric "$url" '^accelmon_agent_collector_success\{node="fixture",collector="vmstat"\} 1'
curl -fsS "$url" >"$WORK/nomem.prom"
grep -q '^accelmon_host_oom_kills_total{' "$WORK/nomem.prom" || fail "no vmstat series"
# The meminfo families are those of its golden file (tests/golden/collectors/meminfo.prom).
grep -Eo '^accelmon_[a-z_]+' "$(dirname "$0")/../golden/collectors/meminfo.prom" | sort -u |
  sed 's/$/[{ ]/; s/^/^/' >"$WORK/meminfo_families.txt"
[ -s "$WORK/meminfo_families.txt" ] || fail "no meminfo families in its golden file"
if grep -f "$WORK/meminfo_families.txt" "$WORK/nomem.prom" >"$WORK/found.txt" ||
  grep -q 'collector="meminfo"' "$WORK/nomem.prom"; then
  fail "meminfo series with --no-collector.meminfo: $(head -n 3 "$WORK/found.txt")"
fi
stop nomem
# --- the config file: check config (exit 0/1) and a bad file at start-up (FILE:LINE, exit 2)
"$ACCELMON" config defaults >"$WORK/defaults.yaml"
"$ACCELMON" check config "$WORK/defaults.yaml" >"$WORK/check.txt" ||
  fail "check config rejects config defaults: $(cat "$WORK/check.txt")"
grep -qx "$WORK/defaults.yaml: SUCCESS" "$WORK/check.txt" || fail "check config said: $(cat "$WORK/check.txt")"
printf 'exporter:\n  node.expire-afer: 5m\n  record.retention: 5x\n  grpc.max-devices-per-node: [1]\n' \
  >"$WORK/bad.yaml"
set +e
"$ACCELMON" check config "$WORK/bad.yaml" >"$WORK/check.txt" 2>&1
rc_check=$?
"$ACCELMON" exporter --config.file="$WORK/bad.yaml" --web.listen-address 127.0.0.1:0 \
  --grpc.listen-address 127.0.0.1:0 >"$WORK/start.txt" 2>&1
rc_start=$?
set -e
[ $rc_check -eq 1 ] || fail "check config of a bad file exited $rc_check"
[ $rc_start -eq 2 ] || fail "exporter with a bad config file exited $rc_start: $(cat "$WORK/start.txt")"
for line in 2 3 4; do
  grep -q "^ *$WORK/bad.yaml:$line: " "$WORK/check.txt" || fail "check config missed line $line: $(cat "$WORK/check.txt")"
  grep -q "^$WORK/bad.yaml:$line: " "$WORK/start.txt" || fail "start-up missed line $line: $(cat "$WORK/start.txt")"
done
# Config paths that are not files stop start-up with the flag, the path and why (exit 2), as any
# bad flag does: a directory, an empty file, and a file that cannot be read (/proc/self/mem:
# open succeeds, read fails, even for root, as a file on a failing disk does).
mkdir -p "$WORK/confdir"
: >"$WORK/empty.yaml"
PORTS=(--web.listen-address 127.0.0.1:0 --grpc.listen-address 127.0.0.1:0)
for flag in --config.file --web.config.file --diagnostics.config; do
  expect_usage_error "$flag $WORK/confdir: is a directory, not a file" exporter "$flag" "$WORK/confdir" "${PORTS[@]}"
  expect_usage_error "$flag $WORK/empty.yaml: is empty" exporter "$flag" "$WORK/empty.yaml" "${PORTS[@]}"
  expect_usage_error "$flag /proc/self/mem: cannot be read: Input/output error" exporter "$flag" /proc/self/mem "${PORTS[@]}"
  expect_usage_error "$flag $WORK/missing.yaml: does not exist" exporter "$flag" "$WORK/missing.yaml" "${PORTS[@]}"
done
expect_usage_error "--diagnostics.config $WORK/confdir: is a directory" standalone --sim 1 \
  --diagnostics.config "$WORK/confdir" --push.socket "" "${PORTS[@]}"
# One rule for both directories the daemon writes: one it cannot create is a usage error.
printf 'x' >"$WORK/a-file"
expect_usage_error "--record.dir $WORK/a-file/rec: cannot create it" exporter --record.dir "$WORK/a-file/rec" "${PORTS[@]}"
expect_usage_error "$WORK/a-file/spool" agent --spool.dir "$WORK/a-file/spool" --exporter.address 127.0.0.1:1
set +e
"$ACCELMON" check config "$WORK/confdir" >"$WORK/check.txt" 2>&1
rc_check=$?
set -e
[ $rc_check -eq 1 ] && grep -q "$WORK/confdir: is a directory" "$WORK/check.txt" ||
  fail "check config of a directory exited $rc_check: $(cat "$WORK/check.txt")"

echo "cli_test: ok"
