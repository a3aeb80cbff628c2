#!/usr/bin/env bash
# The one place that names the Debian packages accelmon needs.
#   install-deps.sh build   what `make run` needs: compilers and libraries
#   install-deps.sh test    also the real peers the tests run (promtool, node_exporter,
#                           VictoriaMetrics, clang's libFuzzer) — installing prometheus,
#                           node_exporter or victoria-metrics on a systemd host also enables their
#                           services, so `make run` does not ask for them
# Idempotent: installs only what is missing, and does nothing (no apt-get update) when all is there.
set -euo pipefail

profile=${1:-test}
BUILD=(
  cmake ninja-build g++ make pkg-config
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  prometheus-cpp-dev libcivetweb-dev libspdlog-dev libfmt-dev libyaml-cpp-dev libcli11-dev
  libzstd-dev
  libssl-dev libcrypt-dev    # TLS (also civetweb's HTTPS, which loads libcrypto.so), bcrypt
  libgtest-dev libgmock-dev libbenchmark-dev
  curl
  dpkg-dev                   # make deb: dpkg-shlibdeps finds the package's library dependencies
)
TEST=(
  prometheus                 # promtool, and a real Prometheus for end-to-end tests
  victoria-metrics           # remote-write target of the scale-out test (docs/scaling.md)
  prometheus-node-exporter   # the peer the host collectors are compared with
  clang libclang-rt-14-dev   # libFuzzer for the parser fuzz targets
  clang-format
  openssl                    # the CLI: certificates for the TLS tests
  python3-grpcio python3-protobuf   # the Python push helper (clients/python) and its tests
  kubernetes-client          # kubectl kustomize renders deploy/kubernetes in the tests
  nodejs npm                 # the tests' pinned Kubernetes schema validator (tests/kubernetes)
  systemd                    # systemd-analyze verify and systemd-sysusers over deploy/systemd
  lintian                    # the Debian package's checks (tests/e2e/deb_package_test.sh)
)
# A command another package already provides (kubectl from Kubernetes' own apt repository,
# node and npm from NodeSource's) satisfies these: installing Debian's beside it would clash
# over the same file.
declare -A PROVIDED_BY_COMMAND=([kubernetes-client]=kubectl [nodejs]=node [npm]=npm)

case "$profile" in
  build) PACKAGES=("${BUILD[@]}") ;;
  test) PACKAGES=("${BUILD[@]}" "${TEST[@]}") ;;
  *) echo "usage: $0 [build|test]" >&2; exit 2 ;;
esac

missing=()
for p in "${PACKAGES[@]}"; do
  [[ -n ${PROVIDED_BY_COMMAND[$p]:-} ]] && command -v "${PROVIDED_BY_COMMAND[$p]}" >/dev/null && continue
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

echo "install-deps: installing ${missing[*]}" >&2
SUDO=""
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  SUDO=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# --no-install-recommends: the prometheus package would otherwise pull a web UI stack we never use.
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done" >&2
