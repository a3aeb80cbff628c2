#!/usr/bin/env bash
# Diagnosis accuracy (issue 24): every shipped scenario (tests/fixtures/scenarios/*.yaml) is
# simulated into a recording and `accelmon diagnose --score`d against its own `expect:` list.
# Prints one Markdown table, a row per rule over all scenarios, then each miss and false finding.
#   bench/diagnosis_accuracy.sh [BUILD_DIR]
# As tests/unit/diagnostics_scenario_test.cc plays them: 8 devices a node, one node (four for the
# job_* scenarios and the job near miss, else as many as the scenario names), a report every
# 10 s, for DURATION (default 75m: the faults' 35m onsets, the longest wait of a rule,
# memory_leak's 31 minutes, and a few minutes more for anything that should not open);
# healthy_fleet for its 24 hours. Environment overrides: DURATION, INTERVAL, SCENARIOS.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
accelmon=$build/accelmon
scenarios=${SCENARIOS:-$root/tests/fixtures/scenarios}
duration=${DURATION:-75m}
interval=${INTERVAL:-10s}
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
need_binary "$accelmon"
for scenario in "$scenarios"/*.yaml; do
  name=$(basename "$scenario" .yaml)
  if ! grep -q '^expect:' "$scenario"; then
    echo "$name" >>"$work/unscored"
    continue
  fi
  # As many nodes as the scenario names (sim-N), at least one; a job across nodes on four.
  nodes=$(grep -o 'sim-[0-9]*' "$scenario" | cut -d- -f2 | sort -n | tail -n 1 || true)
  nodes=$((${nodes:--1} + 1))
  [ "$nodes" -ge 1 ] || nodes=1
  play=$duration
  case $name in
    job_* | near_miss_job_uniformly_slow) nodes=4 ;;
    healthy_fleet) play=24h ;;  # an ordinary day of 16 nodes: nothing may open
  esac
  "$accelmon" simulate --nodes "$nodes" --sim 8 --interval "$interval" --duration "$play" \
    --start 2026-12-02T00:00:00Z --scenario "$scenario" --record.dir "$work/$name" \
    >>"$work/simulate.log" 2>&1 || { cat "$work/simulate.log" >&2; exit 1; }
  "$accelmon" diagnose "$work/$name" --score "$scenario" --format json -o "$work/$name.json" \
    2>>"$work/diagnose.log" || { cat "$work/diagnose.log" >&2; exit 1; }
done

/usr/bin/python3 - "$work/unscored" "$work"/*.json <<'PY'
import json, os, statistics, sys

rows, notes = {}, []
unscored = open(sys.argv[1]).read().split() if os.path.exists(sys.argv[1]) else []
for path in sys.argv[2:]:
    doc = json.load(open(path))
    name = os.path.basename(doc["expectations"])
    for m in doc["matches"]:
        r = rows.setdefault(m["rule"], {"expected": 0, "found": 0, "missed": 0, "false": 0,
                                        "allowed": 0, "errors": [], "delays": []})
        if m["found"]:
            r["expected"] += 1
            r["found"] += 1
            r["errors"].append(m["onset_error_s"])
            if m["detection_delay_s"] is not None:
                r["delays"].append(m["detection_delay_s"])
        elif not m["optional"]:
            r["expected"] += 1
            r["missed"] += 1
            notes.append(f"missed: {m['rule']} on {m['node']} {m['device']} {m['link']} ({name})")
    for kind in ("false_findings", "allowed"):
        for f in doc[kind]:
            r = rows.setdefault(f["rule"], {"expected": 0, "found": 0, "missed": 0, "false": 0,
                                            "allowed": 0, "errors": [], "delays": []})
            r["false" if kind == "false_findings" else "allowed"] += 1
            if kind == "false_findings":
                where = " ".join(x for x in (f["node"], f["device"], f["link"]) if x)
                notes.append(f"false: {f['rule']} on {where} from {f['start']} ({name})")

def seconds(v, sign=False):
    if v is None:
        return "–"
    v = round(v, 1)
    text = f"{v:+g}" if sign and v != 0 else f"{v:g}"
    return text + " s"

def worst(values):
    return max(values, key=abs) if values else None

print("| rule | expected | found | missed | false | allowed | onset error median (abs) | onset error worst | detection delay median |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
total = {"expected": 0, "found": 0, "missed": 0, "false": 0, "allowed": 0, "errors": [], "delays": []}
for rule in sorted(rows):
    r = rows[rule]
    for k in total:
        total[k] += r[k]
    print(f"| {rule} | {r['expected']} | {r['found']} | {r['missed']} | {r['false']} | {r['allowed']} | "
          f"{seconds(statistics.median(map(abs, r['errors'])) if r['errors'] else None)} | "
          f"{seconds(worst(r['errors']), True)} | "
          f"{seconds(statistics.median(r['delays']) if r['delays'] else None)} |")
t = total
print(f"| **all** | {t['expected']} | {t['found']} | {t['missed']} | {t['false']} | {t['allowed']} | "
      f"{seconds(statistics.median(map(abs, t['errors'])) if t['errors'] else None)} | "
      f"{seconds(worst(t['errors']), True)} | "
      f"{seconds(statistics.median(t['delays']) if t['delays'] else None)} |")
print()
print(f"{len(sys.argv) - 2} scenarios; recall {t['found']}/{t['expected']}, {t['false']} false findings.")
if unscored:
    print(f"Not scored (no expect: list): {', '.join(unscored)}.")
for n in notes:
    print(f"- {n}")
PY
