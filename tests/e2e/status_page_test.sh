#!/usr/bin/env bash
# The status page at / in a real headless Chromium (tests/browser/status_page_test.js): node
# count and a device's memory as /metrics has them, a finding from a --sim.scenario appearing and
# leaving within two collection intervals, nothing asked of anyone but the exporter, and basic
# auth refusing the page without credentials. Skipped (exit 77) when no chromium is installed.
# With ACCELMON_SCREENSHOT_DIR set it also writes status-page.png there (make screenshots).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/tls_lib.sh"

CHROMIUM=${CHROMIUM:-$(command -v chromium || true)}
if [ -z "$CHROMIUM" ]; then
  echo "SKIP: no chromium on PATH (scripts/install-deps.sh test installs it where the machine allows)"
  exit 77
fi
node -e 'require("playwright-core")' 2>/dev/null ||
  fail "playwright-core is not in NODE_PATH='${NODE_PATH:-}' (the ctest setup browser_npm_install puts it there)"

# A link that goes down a few seconds in and comes back a few seconds later.
cat >"$WORK/scenario.yaml" <<'YAML'
faults:
  - at: 4s
    fault: link_down
    device: 1
    link: nvlink0
    duration: 6s
YAML
start standalone standalone --sim 4 --collect.interval 1s --web.listen-address 127.0.0.1:0 \
  --node.name e2e-node --sim.scenario "$WORK/scenario.yaml"
url=$(wait_for_log standalone 'http://[^ ]+/metrics')
base=${url%/metrics}

# The same page behind basic auth (bcrypt of "s3cret", as web_config_test.sh).
cat >"$WORK/web.yml" <<'YAML'
basic_auth_users:
  prom: '$2b$10$NnsHlhQwajJo/X76XOb1.OV0p7Xe0eWlXNdxMX2HNxKEvAqt.yeAq'
YAML
start auth_exporter exporter --web.listen-address 127.0.0.1:0 --grpc.listen-address 127.0.0.1:0 \
  --web.config.file "$WORK/web.yml"
exporter_ports auth_exporter

screenshot=""
[ -n "${ACCELMON_SCREENSHOT_DIR:-}" ] && screenshot="$ACCELMON_SCREENSHOT_DIR/status-page.png"
BASE=$base NODE=e2e-node INTERVAL_S=1 AUTH_BASE="http://127.0.0.1:$web_port" CHROMIUM=$CHROMIUM \
  SCREENSHOT=$screenshot node "$(dirname "$0")/../browser/status_page_test.js" ||
  fail "the browser test failed (above)"
