# Shared by the Kubernetes tests: NODE_PATH names the node_modules kubernetes_npm_install filled.
# validate FILE...: tests/kubernetes/validate.js under Debian's node.
kubernetes_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$kubernetes_dir/../.." && pwd)
NODE=${NODE:-/usr/bin/node}

require_validator() {
  if [[ ! -x $NODE ]]; then echo "FAIL: no $NODE (scripts/install-deps.sh test installs nodejs)" >&2; exit 1; fi
  if [[ ! -d ${NODE_PATH:-}/kubernetes-models ]]; then
    echo "FAIL: the pinned validator is not in '${NODE_PATH:-}' (the ctest setup kubernetes_npm_install puts it there)" >&2
    exit 1
  fi
}

validate() { "$NODE" "$kubernetes_dir/validate.js" "$@"; }
