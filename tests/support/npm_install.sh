#!/bin/sh
# ctest setup (kubernetes_npm_install, browser_npm_install): installs the npm packages pinned in
# SRC/package-lock.json (npm ci: exact versions, integrity checked) into DEST/node_modules, the
# build tree's, never the source tree's. Once installed, a later run with the same lock file does
# nothing and needs no network. npm and node come from scripts/install-deps.sh test.
set -eu
src=$(cd "${1:?usage: npm_install.sh SRC DEST}" && pwd)
dest=${2:?usage: npm_install.sh SRC DEST}
name=$(basename "$src")
stamp="$dest/node_modules/.accelmon-package-lock.sha256"
want=$(sha256sum "$src/package-lock.json" | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  echo "$name packages: installed in $dest (package-lock.json unchanged)"
  exit 0
fi
command -v npm >/dev/null || { echo "FAIL: no npm (scripts/install-deps.sh test installs it)" >&2; exit 1; }
mkdir -p "$dest"
cp "$src/package.json" "$src/package-lock.json" "$dest/"
# --ignore-scripts: nothing from the registry runs. The packages come from npm's own cache
# (~/.npm, or $npm_config_cache) when it has them (--prefer-offline), so only the first run on a
# machine needs the registry; a fresh clone after that installs offline.
(cd "$dest" && npm ci --no-audit --no-fund --ignore-scripts --prefer-offline)
echo "$want" >"$stamp"
echo "$name packages: installed in $dest"
