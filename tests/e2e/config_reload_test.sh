#!/usr/bin/env bash
# Reload without a restart, against the real binary: an exporter started with --config.file
# takes a new diagnostics threshold on SIGHUP while agents stream, without losing a report or a
# scrape; a broken file and a change that needs a restart keep the old config (and say so in
# accelmon_config_last_reload_successful); POST /-/reload with --web.enable-lifecycle swaps the
# web config's basic auth and certificate; without the flag it is refused. The agent reloads its
# log level.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/tls_lib.sh"

make_ca
issue web exporter.test "DNS:exporter.test,IP:127.0.0.1"
issue rotated rotated.test "DNS:rotated.test,IP:127.0.0.1"
# bcrypt of "s3cret" (htpasswd -nbBC 10 prom s3cret), as in web_config_test.sh.
HASH='$2b$10$NnsHlhQwajJo/X76XOb1.OV0p7Xe0eWlXNdxMX2HNxKEvAqt.yeAq'

cd "$WORK"
write_diagnostics() {
  printf 'rules:\n  firmware_below_minimum:\n    minimums:\n      - {vendor: sim, firmware: %s}\n' \
    "$1" >diagnostics.yaml
}
write_config() {
  cat >accelmon.yaml <<YAML
log.level: info
exporter:
  web.listen-address: "127.0.0.1:${1:-0}"
  grpc.listen-address: "127.0.0.1:0"
  web.config.file: web.yml
  web.enable-lifecycle: true
  diagnostics.config: diagnostics.yaml
  node.expire-after: 10m
YAML
}
write_diagnostics 1.0.0
write_config
printf 'tls_server_config:\n  cert_file: %s\n  key_file: %s\n' "$CERTS/web.crt" "$CERTS/web.key" >web.yml

start exporter exporter --config.file accelmon.yaml
exporter_ports exporter
base="https://127.0.0.1:$web_port"
export CURL_CA_BUNDLE=$CERTS/ca.crt
url="$base/metrics"
value() { scrape "$url" | awk -v m="$1" '$1 == m { print $2 }'; }

# Three simulated nodes, 10 reports a second each, for the whole test.
start loadgen loadgen --exporter.address "127.0.0.1:$grpc_port" --nodes 3 --devices 2 \
  --interval 100ms --duration 25s
wait_for_metric "$url" '^accelmon_node_up\{node="loadgen-00002"\} 1$'
[ "$(value accelmon_config_last_reload_successful)" = 1 ] || fail "start-up: reload_successful not 1"
started=$(value accelmon_config_last_reload_success_timestamp_seconds)
! grep -q '^accelmon_diagnosis_active{rule="firmware_below_minimum"' <<<"$(scrape "$url")" ||
  fail "firmware 1.0.0-sim is not below 1.0.0, yet a finding is open"

# Scrape the whole time of the reload, as Prometheus would: every scrape answers, with every node.
scrapes() {
  while [ ! -f stop_scraping ]; do
    if body=$(curl -fsS "$url" 2>/dev/null); then
      echo "$(grep -c '^accelmon_node_up{node="loadgen-0000[0-2]"} 1$' <<<"$body")"
    else
      echo failed
    fi
  done >scrapes.txt
}
scrapes &
scraper=$!
scrape_count() { [ -f scrapes.txt ] && wc -l <scrapes.txt || echo 0; }
at_least_scrapes() { [ "$(scrape_count)" -ge "$1" ]; }
# Scrapes before the reload and after it, counted rather than timed: a loaded CI host can
# answer the reload before a slow TLS scrape returns.
wait_until 30 "two scrapes before the reload" at_least_scrapes 2

# A stricter threshold in the file the config names, then SIGHUP: the rule uses it at once.
write_diagnostics 2.0.0
kill -HUP "$exporter_PID"
wait_for_log exporter 'reload \(SIGHUP\): configuration applied' >/dev/null
wait_for_metric "$url" '^accelmon_diagnosis_active\{rule="firmware_below_minimum",node="loadgen-00002",device="1"'
[ "$(value accelmon_config_last_reload_successful)" = 1 ] || fail "after SIGHUP: not successful"
now=$(value accelmon_config_last_reload_success_timestamp_seconds)
awk -v a="$started" -v b="$now" 'BEGIN { exit !(b > a) }' || fail "success timestamp $now not after $started"
before_stop=$(scrape_count)
wait_until 30 "two scrapes after the reload" at_least_scrapes $((before_stop + 2))
touch stop_scraping
wait "$scraper"
[ "$(wc -l <scrapes.txt)" -ge 4 ] || fail "too few scrapes around the reload: $(wc -l <scrapes.txt)"
grep -vqx 3 scrapes.txt && fail "a scrape during the reload failed or missed a node: $(sort scrapes.txt | uniq -c)"

# A broken file: refused with FILE:LINE, the old config (and its finding) kept.
cp accelmon.yaml good.yaml
printf 'exporter:\n  node.expire-after: [10m\n' >accelmon.yaml
kill -HUP "$exporter_PID"
wait_for_metric "$url" '^accelmon_config_last_reload_successful 0$'
wait_for_log exporter 'reload \(SIGHUP\) failed, the configuration stays as it was: accelmon.yaml:[0-9]+: ' >/dev/null
grep -q '^accelmon_diagnosis_active{rule="firmware_below_minimum"' <<<"$(scrape "$url")" ||
  fail "a failed reload lost the thresholds it had"

# POST /-/reload: the good file again.
code() { curl -sS -o body.txt -w '%{http_code}' "$@" || true; }
cp good.yaml accelmon.yaml
[ "$(code -X POST "$base/-/reload")" = 200 ] || fail "POST /-/reload: not 200: $(cat body.txt)"
[ "$(value accelmon_config_last_reload_successful)" = 1 ] || fail "after POST: not successful"
[ "$(code "$base/-/reload")" = 405 ] || fail "GET /-/reload: not 405"

# A listen address cannot change live: refused, naming the key; still served where it was.
write_config 1
[ "$(code -X POST "$base/-/reload")" = 500 ] || fail "a new listen address was not refused"
grep -q 'web.listen-address changed, which needs a restart' body.txt || fail "refusal: $(cat body.txt)"
[ "$(value accelmon_config_last_reload_successful)" = 0 ] || fail "refused reload counted successful"
cp good.yaml accelmon.yaml

# The web config: a new certificate and basic auth, live.
printf 'tls_server_config:\n  cert_file: %s\n  key_file: %s\nbasic_auth_users:\n  prom: %s\n' \
  "$CERTS/rotated.crt" "$CERTS/rotated.key" "'$HASH'" >web.yml
[ "$(code -X POST "$base/-/reload")" = 200 ] || fail "reload with a new web config: $(cat body.txt)"
[ "$(code "$url")" = 401 ] || fail "no credentials after basic auth was added: not 401"
[ "$(code -u prom:s3cret "$url")" = 200 ] || fail "right password after the reload: not 200"
[ "$(code -X POST "$base/-/reload")" = 401 ] || fail "POST /-/reload without credentials: not 401"
subject=$(openssl s_client -connect "127.0.0.1:$web_port" -CAfile "$CERTS/ca.crt" </dev/null 2>/dev/null |
  openssl x509 -noout -subject)
grep -q 'rotated.test' <<<"$subject" || fail "the new certificate is not served: $subject"
# Turning TLS off needs a restart.
printf 'basic_auth_users:\n  prom: %s\n' "'$HASH'" >web.yml
[ "$(code -u prom:s3cret -X POST "$base/-/reload")" = 500 ] || fail "TLS turned off live"
grep -q 'needs a restart' body.txt || fail "TLS off refusal: $(cat body.txt)"
[ "$(code -u prom:s3cret "$url")" = 200 ] || fail "still HTTPS with the old web config: not 200"

# Every report the simulated agents had acknowledged was applied, once: none lost to a reload.
wait "$loadgen_PID" || fail "loadgen failed"
acks=$(grep -Eo '\(([0-9]+) acks\)' "$WORK/loadgen.log" | grep -Eo '[0-9]+')
ingested=$(curl -fsS -u prom:s3cret "$url" | awk '$1 == "accelmon_exporter_reports_ingested_total" { print $2 }')
[ -n "$acks" ] && [ "$acks" -gt 100 ] || fail "loadgen acknowledged too few: $acks"
[ "$ingested" = "$acks" ] || fail "ingested $ingested reports, loadgen had $acks acknowledged"
stop exporter

# Without --web.enable-lifecycle: POST /-/reload is refused; SIGHUP still reloads.
start plain exporter --web.listen-address 127.0.0.1:0 --grpc.listen-address 127.0.0.1:0
exporter_ports plain
[ "$(code -X POST "http://127.0.0.1:$web_port/-/reload")" = 403 ] || fail "lifecycle off: not 403"
grep -q 'Lifecycle API is not enabled' body.txt || fail "403 body: $(cat body.txt)"
kill -HUP "$plain_PID"
wait_for_log plain 'reload \(SIGHUP\): configuration applied' >/dev/null

# The agent: SIGHUP takes a new log level; any other change needs a restart.
printf 'log.level: info\nagent:\n  collect.interval: 1s\n' >agent.yaml
start agent agent --config.file agent.yaml --exporter.address "127.0.0.1:$grpc_port" \
  --node.name node-a --path.procfs "$FIXTURES/host/proc" --sim 1
wait_for_log agent 'agent streaming to' >/dev/null
printf 'log.level: debug\nagent:\n  collect.interval: 1s\n' >agent.yaml
kill -HUP "$agent_PID"
wait_for_log agent 'reload \(SIGHUP\): log level debug' >/dev/null
printf 'log.level: debug\nagent:\n  collect.interval: 2s\n' >agent.yaml
kill -HUP "$agent_PID"
wait_for_log agent 'collect.interval changed, which needs a restart' >/dev/null
stop agent
stop plain
echo "config_reload_test: ok"
