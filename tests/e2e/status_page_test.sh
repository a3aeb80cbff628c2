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
  skip "no chromium on PATH (scripts/install-deps.sh test installs it where the machine allows)"
fi
node -e 'require("playwright-core")' 2>/dev/null ||
  fail "playwright-core is not in NODE_PATH='${NODE_PATH:-}' (the ctest setup browser_npm_install puts it there)"

# A link that goes down for 6 s every 15 s. Repeated, because the browser takes from a few to
# more than ten seconds to start on a loaded machine: one early fault could come and go before
# the test looks (CI 2026-12-05), and the test waits for whichever one it catches.
{
  echo "faults:"
  for at in 4 19 34 49 64 79 94 109; do
    printf '  - at: %ss\n    fault: link_down\n    device: 1\n    link: nvlink0\n    duration: 6s\n' "$at"
  done
} >"$WORK/scenario.yaml"
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
