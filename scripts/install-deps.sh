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
  libdeflate-dev             # gzip'd /metrics, about twice zlib's speed
  libncurses-dev             # accelmon top's terminal UI
  libssl-dev libcrypt-dev    # TLS (also civetweb's HTTPS, which loads libcrypto.so), bcrypt
  libgtest-dev libgmock-dev libbenchmark-dev
  libsnappy-dev              # bench: Prometheus remote write into VictoriaMetrics, the ingest peer
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
  tmux                       # a terminal for accelmon top's end-to-end test (tests/e2e/top_test.sh)
)
# Installed where the machine allows (a mirror without it, an architecture it is not built
# for): a test that needs one says plainly that it was skipped.
OPTIONAL_TEST=(
  chromium                   # a real headless browser for the status page (tests/e2e/status_page_test.sh)
)
# A command another package already provides (kubectl from Kubernetes' own apt repository,
# node and npm from NodeSource's) satisfies these: installing Debian's beside it would clash
# over the same file.
declare -A PROVIDED_BY_COMMAND=([kubernetes-client]=kubectl [nodejs]=node [npm]=npm)

case "$profile" in
  build) PACKAGES=("${BUILD[@]}"); OPTIONAL=() ;;
  test) PACKAGES=("${BUILD[@]}" "${TEST[@]}"); OPTIONAL=("${OPTIONAL_TEST[@]}") ;;
  *) echo "usage: $0 [build|test]" >&2; exit 2 ;;
esac

# not_installed PACKAGE...: prints those not installed (nor provided by another package's command).
not_installed() {
  for p in "$@"; do
    [[ -n ${PROVIDED_BY_COMMAND[$p]:-} ]] && command -v "${PROVIDED_BY_COMMAND[$p]}" >/dev/null && continue
    status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
    [[ "$status" == "install ok installed" ]] || echo "$p"
  done
}
mapfile -t missing < <(not_installed "${PACKAGES[@]}")
mapfile -t optional_missing < <(not_installed "${OPTIONAL[@]}")
[[ ${#missing[@]} -eq 0 && ${#optional_missing[@]} -eq 0 ]] && exit 0

echo "install-deps: installing ${missing[*]} ${optional_missing[*]}" >&2
SUDO=""
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  SUDO=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# --no-install-recommends: the prometheus package would otherwise pull a web UI stack we never use.
if [[ ${#missing[@]} -gt 0 ]]; then
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
for p in "${optional_missing[@]}"; do
  $SUDO apt-get install -y -qq --no-install-recommends "$p" >/dev/null ||
    echo "install-deps: could not install $p; the tests that need it will say they were skipped" >&2
done
echo "install-deps: done" >&2
