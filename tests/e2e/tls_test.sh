#!/usr/bin/env bash
# Agent <-> exporter over TLS and mutual TLS, as real processes on loopback: who gets in, who is
# refused, and certificate rotation without a restart.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/tls_lib.sh"
FIXTURES=${FIXTURES:?set FIXTURES to tests/fixtures}

make_ca
issue server exporter-1 "DNS:exporter.test,IP:127.0.0.1"
issue server2 exporter-2 "DNS:exporter.test,IP:127.0.0.1"
issue node_a other-cn "DNS:node-a"  # the SAN, not the CN, is what counts
issue node_c node-c                 # no SAN: the CN counts
issue reader dashboards "DNS:dashboards"  # may read the Query API (--grpc.reader-names)

agent() {  # agent NAME NODE ARGS...: a fast-ticking agent reading the fixture procfs
  local name=$1 node=$2
  shift 2
  start "$name" agent --exporter.address "127.0.0.1:$grpc_port" --node.name "$node" \
    --collect.interval 100ms --path.procfs "$FIXTURES/host/proc" "$@"
}

# Usage errors: halves of a key pair, a key that is not the certificate's.
set +e
"$ACCELMON" exporter --grpc.tls-cert "$CERTS/server.crt" 2>"$WORK/err.txt"
rc=$?
"$ACCELMON" agent --exporter.tls-cert "$CERTS/node_a.crt" --exporter.tls-key "$CERTS/node_c.key" \
  2>"$WORK/err2.txt"
rc2=$?
set -e
[ $rc -eq 2 ] && grep -q "go together" "$WORK/err.txt" || fail "cert without key: $rc $(cat "$WORK/err.txt")"
[ $rc2 -eq 2 ] && grep -q "does not belong to certificate" "$WORK/err2.txt" ||
  fail "mismatched key: $rc2 $(cat "$WORK/err2.txt")"

# --- TLS: the agent verifies the exporter; a plain-text agent gets nowhere.
cp "$CERTS/server.crt" "$CERTS/live.crt"
cp "$CERTS/server.key" "$CERTS/live.key"
start tls_exporter exporter --web.listen-address 127.0.0.1:0 --grpc.listen-address 127.0.0.1:0 \
  --grpc.tls-cert "$CERTS/live.crt" --grpc.tls-key "$CERTS/live.key"
exporter_ports tls_exporter
url="http://127.0.0.1:$web_port/metrics"
wait_for_log tls_exporter 'ingest TLS, /metrics plain HTTP' >/dev/null

agent tls_agent tls-node --exporter.tls-ca "$CERTS/ca.crt"
wait_for_metric "$url" '^accelmon_node_up\{node="tls-node"\} 1'
# Another name than the address, as behind a load balancer.
agent named_agent named-node --exporter.tls-ca "$CERTS/ca.crt" \
  --exporter.tls-server-name exporter.test
wait_for_metric "$url" '^accelmon_node_up\{node="named-node"\} 1'

agent plain_agent plain-node
wait_for_log plain_agent 'exporter 127.0.0.1:[0-9]+ unreachable' >/dev/null
agent wrong_name_agent wrong-name-node --exporter.tls-ca "$CERTS/ca.crt" \
  --exporter.tls-server-name elsewhere.test
wait_for_log wrong_name_agent 'exporter 127.0.0.1:[0-9]+ unreachable' >/dev/null
# ... and says why, from a handshake of its own (gRPC's message does not).
wait_for_log wrong_name_agent 'TLS with exporter .* certificate does not verify against .*ca.crt for "elsewhere.test": hostname mismatch' >/dev/null
body=$(curl -fsS "$url") || fail "scrape failed"
! grep -Eq 'node="(plain-node|wrong-name-node)"' <<<"$body" ||
  fail "a plain-text or misverifying agent got its reports in"

# Rotation: new files on disk; within the refresh interval (10s) new connections get them.
serial() {
  openssl s_client -connect "127.0.0.1:$grpc_port" -alpn h2 -CAfile "$CERTS/ca.crt" \
    </dev/null 2>/dev/null | openssl x509 -noout -subject 2>/dev/null || true
}
output_has "exporter-1" serial || fail "exporter does not serve its first certificate: $(serial)"
cp "$CERTS/server2.key" "$CERTS/live.key.new" && mv "$CERTS/live.key.new" "$CERTS/live.key"
cp "$CERTS/server2.crt" "$CERTS/live.crt.new" && mv "$CERTS/live.crt.new" "$CERTS/live.crt"
serves_rotated() { output_has "exporter-2" serial; }
wait_until 40 "the rotated certificate (exporter-2) to be served" serves_rotated
agent rotated_agent rotated-node --exporter.tls-ca "$CERTS/ca.crt"
wait_for_metric "$url" '^accelmon_node_up\{node="rotated-node"\} 1'
for a in tls_agent named_agent plain_agent wrong_name_agent rotated_agent; do stop "$a"; done
stop tls_exporter

# --- Mutual TLS: a client certificate is required, and names the node.
start mtls_exporter exporter --web.listen-address 127.0.0.1:0 --grpc.listen-address 127.0.0.1:0 \
  --grpc.tls-cert "$CERTS/server.crt" --grpc.tls-key "$CERTS/server.key" \
  --grpc.tls-client-ca "$CERTS/ca.crt" --grpc.reader-names dashboards
exporter_ports mtls_exporter
url="http://127.0.0.1:$web_port/metrics"
wait_for_log mtls_exporter 'ingest mutual TLS' >/dev/null

agent node_a node-a --exporter.tls-ca "$CERTS/ca.crt" \
  --exporter.tls-cert "$CERTS/node_a.crt" --exporter.tls-key "$CERTS/node_a.key"
wait_for_metric "$url" '^accelmon_node_up\{node="node-a"\} 1'
agent node_c node-c --exporter.tls-ca "$CERTS/ca.crt" \
  --exporter.tls-cert "$CERTS/node_c.crt" --exporter.tls-key "$CERTS/node_c.key"
wait_for_metric "$url" '^accelmon_node_up\{node="node-c"\} 1'

# node-a's certificate cannot speak for node-b (nor for its own CN).
agent impostor node-b --exporter.tls-ca "$CERTS/ca.crt" \
  --exporter.tls-cert "$CERTS/node_a.crt" --exporter.tls-key "$CERTS/node_a.key"
wait_for_log impostor 'refused this agent: node "node-b" does not match the client certificate \("node-a"\)' >/dev/null
wait_for_log mtls_exporter 'refused agent stream from .*node "node-b" does not match' >/dev/null
wait_for_metric "$url" '^accelmon_exporter_reports_rejected_total\{reason="node_name_mismatch"\} [1-9]'
agent cn_impostor other-cn --exporter.tls-ca "$CERTS/ca.crt" \
  --exporter.tls-cert "$CERTS/node_a.crt" --exporter.tls-key "$CERTS/node_a.key"
wait_for_log cn_impostor 'refused this agent' >/dev/null

agent no_cert no-cert-node --exporter.tls-ca "$CERTS/ca.crt"
wait_for_log no_cert 'exporter 127.0.0.1:[0-9]+ unreachable' >/dev/null
# gRPC says only "Socket closed"; the agent says the exporter wants a client certificate.
wait_for_log no_cert "TLS with exporter .* refused this agent's TLS client certificate .*it requires one" >/dev/null
body=$(curl -fsS "$url") || fail "scrape failed"
! grep -Eq 'node="(node-b|other-cn|no-cert-node)"' <<<"$body" ||
  fail "a refused agent's reports reached /metrics"

# The Query API: an agent's certificate may not read the fleet; one --grpc.reader-names lists may.
watch() {
  /usr/bin/python3 "$(dirname "$0")/watch_findings.py" "127.0.0.1:$grpc_port" 3 \
    --ca "$CERTS/ca.crt" --server-name exporter.test "$@"
}
if watch --cert "$CERTS/node_a.crt" --key "$CERTS/node_a.key" 2>"$WORK/watch.err"; then
  fail "an agent's certificate read the Query API"
fi
grep -q 'PERMISSION_DENIED.*"node-a".*may not read.*--grpc.reader-names' "$WORK/watch.err" ||
  fail "refusal does not say why: $(cat "$WORK/watch.err")"
watch --cert "$CERTS/reader.crt" --key "$CERTS/reader.key" >/dev/null 2>"$WORK/watch.err" ||
  fail "the listed reader was refused: $(cat "$WORK/watch.err")"

for a in node_a node_c impostor cn_impostor no_cert; do stop "$a"; done
stop mtls_exporter
echo "tls_test: ok"
