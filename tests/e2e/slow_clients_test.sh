#!/usr/bin/env bash
# 200 clients that send their request header one byte a second must not take /metrics down, on
# plain HTTP and on HTTPS: every scrape meanwhile answers within 1 s, and --web.read-timeout
# closes the slow connections (they connect again, as a scanner would).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/tls_lib.sh"

ulimit -n 4096 2>/dev/null || true  # 200 client sockets and the server's, in one test

start plain exporter --web.listen-address 127.0.0.1:0 --grpc.listen-address 127.0.0.1:0 \
  --web.read-timeout 3s
exporter_ports plain
python3 "$(dirname "$0")/slow_clients.py" "http://127.0.0.1:$web_port/metrics" \
  --clients 200 --seconds 10 >"$WORK/plain.out" 2>&1 || { cat "$WORK/plain.out"; fail "plain HTTP"; }
cat "$WORK/plain.out"
grep -Eq "[1-9][0-9]* closed by the server" "$WORK/plain.out" ||
  fail "the read timeout closed no slow connection"
stop plain

make_ca
issue web exporter.test "DNS:exporter.test,IP:127.0.0.1"
cat >"$CERTS/web.yml" <<YAML
tls_server_config:
  cert_file: web.crt
  key_file: web.key
YAML
start tls exporter --web.listen-address 127.0.0.1:0 --grpc.listen-address 127.0.0.1:0 \
  --web.read-timeout 3s --web.config.file "$CERTS/web.yml"
exporter_ports tls
python3 "$(dirname "$0")/slow_clients.py" "https://127.0.0.1:$web_port/metrics" \
  --cafile "$CERTS/ca.crt" --clients 200 --seconds 10 >"$WORK/tls.out" 2>&1 ||
  { cat "$WORK/tls.out"; fail "HTTPS"; }
cat "$WORK/tls.out"
grep -Eq '[1-9][0-9]* closed by the server' "$WORK/tls.out" ||
  fail "the read timeout closed no slow TLS connection"
stop tls
echo "PASS: 200 slow clients on HTTP and HTTPS, /metrics answered within 1 s throughout"
