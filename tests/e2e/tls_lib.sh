# Certificates for the TLS tests, made with the openssl CLI into $CERTS (under $WORK).
# Usage: source lib.sh, then this file; make_ca; issue NAME CN [SAN].
command -v openssl >/dev/null || fail "openssl CLI not found (install the openssl package)"
CERTS=$WORK/certs
mkdir -p "$CERTS"

make_ca() {
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
    -subj "/CN=accelmon test CA" -keyout "$CERTS/ca.key" -out "$CERTS/ca.crt" 2>/dev/null ||
    fail "openssl could not make the CA"
}

# issue NAME CN [SAN]: NAME.key and NAME.crt signed by the CA; SAN like "DNS:a,IP:127.0.0.1".
issue() {
  local name=$1 cn=$2 san=${3:-}
  {
    echo "basicConstraints=CA:FALSE"
    echo "extendedKeyUsage=serverAuth,clientAuth"
    [ -z "$san" ] || echo "subjectAltName=$san"
  } >"$CERTS/$name.ext"
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "/CN=$cn" \
    -keyout "$CERTS/$name.key" -out "$CERTS/$name.csr" 2>/dev/null ||
    fail "openssl could not make $name's key"
  openssl x509 -req -in "$CERTS/$name.csr" -CA "$CERTS/ca.crt" -CAkey "$CERTS/ca.key" \
    -CAcreateserial -days 2 -extfile "$CERTS/$name.ext" -out "$CERTS/$name.crt" 2>/dev/null ||
    fail "openssl could not sign $name's certificate"
}

# exporter_ports NAME: sets grpc_port and web_port from the exporter's start-up line.
exporter_ports() {
  local line
  line=$(wait_for_log "$1" 'ingest on [^ ]+ \(port [0-9]+\), metrics on [^ ]+ \(port [0-9]+')
  grpc_port=$(nth_port "$line" 1)
  web_port=$(echo "$line" | grep -Eo 'port [0-9]+' | tail -1 | grep -Eo '[0-9]+')
}
