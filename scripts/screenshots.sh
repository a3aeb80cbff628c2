#!/usr/bin/env bash
# `make screenshots`: the README's pictures of the status page and of `accelmon top`, made by
# their own end-to-end tests against a simulated node (so they always show the current page and
# screen): docs/images/status-page.png by the browser test in headless Chromium, and
# docs/images/top.png from the tmux capture of the top test, drawn by Chromium as well.
#   scripts/screenshots.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
export ACCELMON=$PWD/$build/accelmon FIXTURES=$PWD/tests/fixtures
modules=$PWD/$build/browser-driver
sh tests/support/npm_install.sh tests/browser "$modules" >/dev/null
export NODE_PATH=$modules/node_modules
command -v chromium >/dev/null || { echo "screenshots: no chromium (scripts/install-deps.sh test)" >&2; exit 1; }

shots=$(mktemp -d)
trap 'rm -rf "$shots"' EXIT
export ACCELMON_SCREENSHOT_DIR=$shots
bash tests/e2e/status_page_test.sh >"$shots/status_page.log" 2>&1 ||
  { cat "$shots/status_page.log" >&2; exit 1; }
bash tests/e2e/top_test.sh >"$shots/top.log" 2>&1 || { cat "$shots/top.log" >&2; exit 1; }
node tests/browser/terminal_screenshot.js "$shots/top.ansi" "$shots/top.png"
mkdir -p docs/images
cp "$shots/status-page.png" "$shots/top.png" docs/images/
echo "screenshots: docs/images/status-page.png docs/images/top.png"
