#!/usr/bin/env bash
# The real binary over the fixture root: every accelmon_host_* series it serves on /metrics,
# diffed against tests/golden/host_e2e.prom. To accept an intended change:
#   ACCELMON_UPDATE_GOLDEN=1 ctest --test-dir build -R e2e_host_golden_test   (then review the diff)
source "$(dirname "$0")/lib.sh"
FIXTURES=${FIXTURES:?set FIXTURES to tests/fixtures}
GOLDEN="$(dirname "$0")/../golden/host_e2e.prom"

start standalone standalone --node.name fixture --path.procfs "$FIXTURES/host/proc" \
  --path.sysfs "$FIXTURES/host/sys" --collect.interval 200ms --web.listen-address 127.0.0.1:0
url=$(wait_for_log standalone 'http://[^ ]+/metrics')
wait_for_metric "$url" '^accelmon_host_power_watts\{'
curl -fsS "$url" >"$WORK/all.prom"
awk '
  /^# (HELP|TYPE) accelmon_host_/ { print; next }
  /^accelmon_host_/ { print }' "$WORK/all.prom" >"$WORK/host.prom"

# Every host collector read the fixture root: the list is the binary's own (--help).
collectors=$("$ACCELMON" standalone --help | grep -Eo -- '--no-collector\.[a-z_]+' | cut -d. -f2)
[ "$(echo "$collectors" | wc -l)" -ge 8 ] || fail "standalone --help lists: $collectors"
for c in $collectors; do
  grep -q "^accelmon_agent_collector_success{node=\"fixture\",collector=\"$c\"} 1" "$WORK/all.prom" ||
    fail "collector $c did not succeed over the fixture root"
done
promtool check metrics <"$WORK/host.prom" >"$WORK/promtool.log" 2>&1 ||
  fail "promtool: $(cat "$WORK/promtool.log")"

if [ -n "${ACCELMON_UPDATE_GOLDEN:-}" ]; then
  cp "$WORK/host.prom" "$GOLDEN"
  echo "host_golden_test: rewrote $GOLDEN"
else
  diff -u "$GOLDEN" "$WORK/host.prom" || fail "/metrics differs from $GOLDEN (see diff above)"
fi
stop standalone
echo "host_golden_test: ok"
