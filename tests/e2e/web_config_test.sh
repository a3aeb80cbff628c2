#!/usr/bin/env bash
# /metrics over HTTPS with basic auth from an exporter-toolkit web config file, checked with
# curl against the real binary; a malformed file stops start-up with exit 2 and FILE:LINE.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/tls_lib.sh"

make_ca
issue web exporter.test "DNS:exporter.test,IP:127.0.0.1"
issue scraper prometheus "DNS:prometheus"
# bcrypt of "s3cret" (htpasswd -nbBC 10 prom s3cret).
HASH='$2b$10$NnsHlhQwajJo/X76XOb1.OV0p7Xe0eWlXNdxMX2HNxKEvAqt.yeAq'

# Paths relative to the file's own folder, as in exporter-toolkit.
cat >"$CERTS/web.yml" <<YAML
tls_server_config:
  cert_file: web.crt
  key_file: web.key
basic_auth_users:
  prom: '$HASH'
YAML
start web_exporter exporter --web.listen-address 127.0.0.1:0 --grpc.listen-address 127.0.0.1:0 \
  --web.config.file "$CERTS/web.yml"
exporter_ports web_exporter
base="https://127.0.0.1:$web_port"

code() { curl -sS -o "$WORK/body.txt" -w '%{http_code}' --cacert "$CERTS/ca.crt" "$@" || true; }
[ "$(code -u prom:s3cret "$base/metrics")" = 200 ] || fail "right password: not 200"
grep -q '^accelmon_exporter_streams_active' "$WORK/body.txt" || fail "no metrics in the answer"
[ "$(code -u prom:wrong "$base/metrics")" = 401 ] || fail "wrong password: not 401"
[ "$(code -u nobody:s3cret "$base/metrics")" = 401 ] || fail "unknown user: not 401"
[ "$(code "$base/metrics")" = 401 ] || fail "no credentials: not 401"
[ "$(code "$base/healthz")" = 200 ] || fail "/healthz should stay open"
# Plain HTTP to the HTTPS port gets no metrics.
[ "$(curl -s -o /dev/null -w '%{http_code}' -u prom:s3cret "http://127.0.0.1:$web_port/metrics" || true)" != 200 ] ||
  fail "plain HTTP served /metrics"
stop web_exporter

# Client certificates on /metrics (RequireAndVerifyClientCert).
cat >"$CERTS/mtls.yml" <<YAML
tls_server_config:
  cert_file: $CERTS/web.crt
  key_file: $CERTS/web.key
  client_auth_type: RequireAndVerifyClientCert
  client_ca_file: $CERTS/ca.crt
YAML
start mtls_web exporter --web.listen-address 127.0.0.1:0 --grpc.listen-address 127.0.0.1:0 \
  --web.config.file "$CERTS/mtls.yml"
exporter_ports mtls_web
base="https://127.0.0.1:$web_port"
[ "$(code --cert "$CERTS/scraper.crt" --key "$CERTS/scraper.key" "$base/metrics")" = 200 ] ||
  fail "client certificate: not 200"
[ "$(code "$base/metrics")" != 200 ] || fail "no client certificate yet /metrics answered"
stop mtls_web

# expect_config_error FILE_CONTENT LINE WHAT: exit 2 with "FILE:LINE: ...WHAT".
expect_config_error() {
  local content=$1 line=$2 what=$3
  printf '%s\n' "$content" >"$WORK/bad.yml"
  set +e
  timeout 20 "$ACCELMON" exporter --web.listen-address 127.0.0.1:0 \
    --grpc.listen-address 127.0.0.1:0 --web.config.file "$WORK/bad.yml" >/dev/null 2>"$WORK/err.txt"
  local rc=$?
  set -e
  [ $rc -eq 2 ] || fail "bad web config exited $rc, expected 2: $(cat "$WORK/err.txt")"
  grep -qF "$WORK/bad.yml:$line: " "$WORK/err.txt" && grep -qF -- "$what" "$WORK/err.txt" ||
    fail "expected '$WORK/bad.yml:$line: ...$what', got: $(cat "$WORK/err.txt")"
  [ "$(wc -l <"$WORK/err.txt")" -eq 1 ] || fail "more than one line: $(cat "$WORK/err.txt")"
}
expect_config_error $'tls_server_config:\n  cert_file: x\n  keyfile: y' 3 \
  "unknown key tls_server_config.keyfile"
expect_config_error $'basic_auth_users:\n  prom: [unclosed' 3 "end of sequence flow not found"
expect_config_error $'# users\nbasic_auth_users:\n  prom: plaintext' 3 "not a bcrypt hash"
expect_config_error $'tls_server_config:\n  cert_file: /nonexistent.crt\n  key_file: /nonexistent.key' 2 \
  "cannot be read"
expect_config_error $'http_server_config:\n  http2: false' 1 "not supported by accelmon"
echo "web_config_test: ok"
