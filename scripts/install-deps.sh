#!/usr/bin/env bash
# The one place that names the Debian packages accelmon needs to build, test and benchmark.
# Idempotent: installs only what is missing, and does nothing (no apt-get update) when all is present.
set -euo pipefail

PACKAGES=(
  # build
  cmake ninja-build g++ make pkg-config
  # libraries (found with find_package)
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  prometheus-cpp-dev libspdlog-dev libfmt-dev libyaml-cpp-dev libcli11-dev libzstd-dev
  # tests and benchmarks
  libgtest-dev libgmock-dev libbenchmark-dev
  # real peers for tests: promtool (prometheus), curl for scraping by hand
  prometheus curl
  # formatting
  clang-format
)

missing=()
for p in "${PACKAGES[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done

if [[ ${#missing[@]} -eq 0 ]]; then
  exit 0
fi

echo "install-deps: installing ${missing[*]}" >&2
SUDO=""
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  SUDO=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# --no-install-recommends keeps the prometheus package from pulling a web UI stack we do not use.
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done" >&2
