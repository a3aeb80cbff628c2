#!/usr/bin/env bash
# Version and build info: `accelmon --version` carries the git revision of this checkout
# (`git rev-parse --short HEAD`), accelmon_build_info on /metrics carries the same, and the
# generator (daemon/common/git_revision.cmake) marks a dirty tree, says "unknown" outside git (or
# in a tree unpacked inside another repository), and leaves its output untouched when nothing
# changed (so a rebuild recompiles nothing).
source "$(dirname "$0")/lib.sh"
REPO=$(cd "$(dirname "$0")/../.." && pwd)
CMAKE=${CMAKE:-cmake}
GENERATOR="$REPO/daemon/common/git_revision.cmake"

line=$("$ACCELMON" --version)
[[ "$line" =~ ^accelmon\ ([0-9]+\.[0-9]+\.[0-9]+)\ \(revision\ ([0-9a-f]+(-dirty)?|unknown)\)$ ]] ||
  fail "--version said: $line"
version=${BASH_REMATCH[1]} revision=${BASH_REMATCH[2]}
if git -C "$REPO" rev-parse --git-dir >/dev/null 2>&1; then
  head=$(git -C "$REPO" rev-parse --short HEAD)
  [ "${revision%-dirty}" = "$head" ] || fail "--version revision $revision, git HEAD is $head"
fi

# accelmon_build_info carries the same version and revision.
start exporter exporter --web.listen-address 127.0.0.1:0 --grpc.listen-address 127.0.0.1:0
port=$(wait_for_log exporter 'metrics on 127.0.0.1:0 \(port [0-9]+' | grep -Eo '[0-9]+$')
scrape "http://127.0.0.1:$port/metrics" >"$WORK/metrics.txt" || fail "cannot scrape"
grep -qxF "accelmon_build_info{version=\"$version\",revision=\"$revision\"} 1" "$WORK/metrics.txt" ||
  fail "build_info: $(grep build_info "$WORK/metrics.txt")"

# The generator over a scratch repository: clean, dirty, and not a repository at all.
generate() { "$CMAKE" -DSOURCE_DIR="$1" -DOUTPUT="$2" -P "$GENERATOR" || fail "generator failed"; }
revision_in() { grep -Eo 'kRevision\[\] = "[^"]*"' "$1" | cut -d'"' -f2; }
repo="$WORK/repo"
git init -q "$repo"
echo a >"$repo/file"
git -C "$repo" add file
git -C "$repo" -c user.name=t -c user.email=t@t commit -qm first
short=$(git -C "$repo" rev-parse --short HEAD)
generate "$repo" "$WORK/clean.cc"
[ "$(revision_in "$WORK/clean.cc")" = "$short" ] || fail "clean tree: $(cat "$WORK/clean.cc")"
touch -d '2001-01-01' "$WORK/clean.cc"
stamp=$(stat -c %Y "$WORK/clean.cc")
generate "$repo" "$WORK/clean.cc"
[ "$(stat -c %Y "$WORK/clean.cc")" = "$stamp" ] || fail "an unchanged revision rewrote the file"
touch "$repo/file"  # touched, not changed: still clean
generate "$repo" "$WORK/touched.cc"
[ "$(revision_in "$WORK/touched.cc")" = "$short" ] || fail "a touched file read as dirty"
echo b >"$repo/file"
generate "$repo" "$WORK/dirty.cc"
[ "$(revision_in "$WORK/dirty.cc")" = "$short-dirty" ] || fail "dirty tree: $(cat "$WORK/dirty.cc")"
mkdir "$WORK/plain"
generate "$WORK/plain" "$WORK/plain.cc"
[ "$(revision_in "$WORK/plain.cc")" = "unknown" ] || fail "outside git: $(cat "$WORK/plain.cc")"
# A source tree unpacked inside another repository is not that repository's revision.
mkdir "$repo/unpacked"
generate "$repo/unpacked" "$WORK/nested.cc"
[ "$(revision_in "$WORK/nested.cc")" = "unknown" ] || fail "nested tree: $(cat "$WORK/nested.cc")"

echo "version_test: ok"
