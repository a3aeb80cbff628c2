#!/bin/sh
# Re-runs a generator of committed files into a scratch directory and diffs the result against
# the committed files: `dashboards` (dashboards/generate.py: Grafana JSON, alerting and recording
# rules, their generated promtool tests, deploy/kubernetes/prometheusrule.yaml) or `catalog`
# (dashboards/metrics_catalog.py: docs/metrics.md). On a difference: run the generator named in
# the message and commit its output.
set -eu
repo=$(cd "$(dirname "$0")/../.." && pwd)
py=/usr/bin/python3
out=$(mktemp -d "${TMPDIR:-/tmp}/accelmon-generated.XXXXXX")
trap 'rm -rf "$out"' EXIT
case ${1:?usage: generated_up_to_date.sh dashboards|catalog} in
  dashboards)
    "$py" "$repo/dashboards/generate.py" --out "$out"
    gen="$py dashboards/generate.py" ;;
  catalog)
    mkdir -p "$out/docs"
    "$py" "$repo/dashboards/metrics_catalog.py" --out "$out/docs/metrics.md"
    gen="$py dashboards/metrics_catalog.py" ;;
  *) echo "unknown generator: $1" >&2; exit 2 ;;
esac
status=0
for f in $(cd "$out" && find . -type f | sort); do
  diff -u "$repo/$f" "$out/$f" || status=1
done
[ $status -eq 0 ] || echo "committed files differ from what the generator writes: run '$gen' in the repository" >&2
exit $status
