#!/usr/bin/env bash
# What `make run` starts: standalone with 8 simulated devices, scraped over HTTP and linted by
# the real promtool.
source "$(dirname "$0")/lib.sh"

start standalone standalone --sim 8 --collect.interval 200ms --web.listen-address 127.0.0.1:0 \
  --node.name e2e-node
url=$(wait_for_log standalone 'http://[^ ]+/metrics')
[[ $url =~ :([0-9]+)/ ]] && [ "${BASH_REMATCH[1]}" != 0 ] || fail "printed URL has no real port: $url"

wait_for_metric "$url" '^accelmon_device_memory_used_bytes\{.*device="7"'
curl -fsS "$url" >"$WORK/metrics.txt"

used=$(grep -c '^accelmon_device_memory_used_bytes{node="e2e-node"' "$WORK/metrics.txt")
[ "$used" -eq 8 ] || fail "expected 8 devices' memory used, found $used"
grep -Eq '^accelmon_host_memory_total_bytes\{node="e2e-node"\} [1-9][0-9]*' "$WORK/metrics.txt" ||
  fail "no host memory total"
grep -q '^accelmon_node_up{node="e2e-node"} 1' "$WORK/metrics.txt" || fail "node not up"
links=$(grep -c '^accelmon_device_link_transmit_bytes_total{' "$WORK/metrics.txt")
[ "$links" -eq 64 ] || fail "expected 8x8 link counters, found $links"

promtool check metrics <"$WORK/metrics.txt" >"$WORK/promtool.log" 2>&1 ||
  fail "promtool check metrics: $(cat "$WORK/promtool.log")"

# Counters move between scrapes: a later one (a few collections on) shows more energy.
first=$(grep '^accelmon_device_energy_joules_total{.*device="0"' "$WORK/metrics.txt" | awk '{print $2}')
energy_grew() {
  second=$(curl -fsS "$url" | grep '^accelmon_device_energy_joules_total{.*device="0"' | awk '{print $2}')
  awk -v a="$first" -v b="$second" 'BEGIN { exit !(b > a) }'
}
wait_until 20 "device 0's energy to grow past $first" energy_grew

base=${url%/metrics}
[ "$(curl -fsS "$base/healthz")" = "ok" ] || fail "/healthz"
[ "$(curl -fsS "$base/readyz")" = "ready" ] || fail "/readyz"

stop standalone
echo "standalone_test: ok"
