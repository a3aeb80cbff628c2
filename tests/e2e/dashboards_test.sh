#!/usr/bin/env bash
# The dashboards and alerting rules of dashboards/ against Debian's real Prometheus: standalone
# --sim 8 plays a fault scenario (a link down, old firmware, an XID), Prometheus scrapes it every
# second with dashboards/prometheus/{alerts,recording}.yml loaded, and then
#   - the alerts the scenario trips reach "firing" (diagnosis alerts and the raw link-down alert);
#   - every query of every panel of every dashboard returns data (variables set to a real node and
#     device), except the few panels dashboards/generate.py marks "No data is normal when ...";
#   - the node and device variables' label queries list the node and its devices, the job
#     variable's a job the simulated devices belong to (the Job dashboard's panels use it);
#   - a scrape passes `promtool check metrics` and every family in it is in docs/metrics.md.
source "$(dirname "$0")/lib.sh"
FIXTURES=${FIXTURES:?set FIXTURES to tests/fixtures}
REPO=$(cd "$(dirname "$0")/../.." && pwd)
PY=/usr/bin/python3
for tool in prometheus promtool curl "$PY"; do
  command -v "$tool" >/dev/null || fail "$tool not found (scripts/install-deps.sh test installs it)"
done

# Faults that open findings at once (after the links were seen up), all on node e2e-node.
cat >"$WORK/scenario.yaml" <<'YAML'
faults:
  - {at: 5s, fault: link_down, device: 0, link: nvlink0}
  - {at: 2s, fault: firmware, device: 1, version: 0.9.0}
  - {at: 2s, fault: xid, device: 2, code: 79}
YAML

NODE=e2e-node
DEVICE=0
start standalone standalone --sim 8 --sim.scenario "$WORK/scenario.yaml" --node.name "$NODE" \
  --collect.interval 1s --web.listen-address 127.0.0.1:0 --record.dir "$WORK/recording" --push.socket "" \
  --path.procfs "$FIXTURES/host/proc" --path.sysfs "$FIXTURES/host/sys"
url=$(wait_for_log standalone 'http://[^ ]+/metrics')
[[ $url =~ :([0-9]+)/ ]] && [ "${BASH_REMATCH[1]}" != 0 ] || fail "printed URL has no real port: $url"
target=${url#http://}
target=${target%/metrics}
wait_for_metric "$url" '^accelmon_device_link_up\{.*device="0".*link="nvlink0".*\} 0' 30

cat >"$WORK/prometheus.yml" <<YAML
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
  - $REPO/dashboards/prometheus/alerts.yml
  - $REPO/dashboards/prometheus/recording.yml
  - $REPO/dashboards/prometheus/jobs.yml
scrape_configs:
  - job_name: accelmon
    static_configs:
      - targets: ["$target"]
YAML
promtool check config "$WORK/prometheus.yml" >"$WORK/promtool-config.log" 2>&1 ||
  fail "promtool rejects the config: $(cat "$WORK/promtool-config.log")"
prometheus --config.file "$WORK/prometheus.yml" --storage.tsdb.path "$WORK/prom-data" \
  --web.listen-address 127.0.0.1:0 >"$WORK/prometheus.log" 2>&1 &
PIDS+=($!)
# Prometheus picks its port and logs it.
prom_address=$(wait_for_log prometheus 'msg="Listening on" address=127\.0\.0\.1:[0-9]+' 60)
PROM="http://${prom_address##*address=}"

# The scrape itself: linted by promtool, every family documented in docs/metrics.md.
curl -fsS "$url" >"$WORK/scrape.txt" || fail "cannot scrape $url"
promtool check metrics <"$WORK/scrape.txt" >"$WORK/promtool-metrics.log" 2>&1 ||
  fail "promtool check metrics: $(cat "$WORK/promtool-metrics.log")"
"$PY" "$REPO/dashboards/metrics_catalog.py" --check "$WORK/scrape.txt" >"$WORK/catalog.log" 2>&1 ||
  fail "$(cat "$WORK/catalog.log")
  refresh it: $PY dashboards/metrics_catalog.py --reduce SCRAPE > tests/dashboards/standalone.prom (SCRAPE: a
  scrape of the standalone this test starts) and $PY dashboards/metrics_catalog.py"

# Alerts: poll Prometheus until each expected alert fires (AccelmonDeviceLinkDown has `for: 1m`).
expected="AccelmonLinkDown AccelmonFirmwareBelowMinimum AccelmonXidError AccelmonDeviceLinkDown"
deadline=$((SECONDS + 150))
while :; do
  curl -fsS "$PROM/api/v1/alerts" >"$WORK/alerts.json" 2>/dev/null || echo '{}' >"$WORK/alerts.json"
  missing=$("$PY" - "$WORK/alerts.json" $expected <<'PY'
import json, sys
try:
    alerts = json.load(open(sys.argv[1]))["data"]["alerts"]
except Exception:
    alerts = []
firing = {a["labels"]["alertname"] for a in alerts if a["state"] == "firing"}
print(" ".join(n for n in sys.argv[2:] if n not in firing))
PY
)
  [ -z "$missing" ] && break
  [ $SECONDS -lt $deadline ] || fail "alerts not firing after 150s: $missing; Prometheus has: $(cat "$WORK/alerts.json")"
  sleep 2
done
# The firing alerts carry the finding's labels and a runbook link that exists in docs/runbooks.md.
"$PY" - "$WORK/alerts.json" "$REPO/docs/runbooks.md" "$NODE" <<'PY' || fail "alert labels or annotations wrong"
import json, re, sys
alerts = [a for a in json.load(open(sys.argv[1]))["data"]["alerts"] if a["state"] == "firing"]
anchors = {h.strip().lower() for h in re.findall(r"^## (.+)$", open(sys.argv[2]).read(), re.M)}
want = {"AccelmonLinkDown": ("0", "critical"), "AccelmonXidError": ("2", "critical"),
        "AccelmonFirmwareBelowMinimum": ("1", "warning")}
bad = []
for a in alerts:
    l, name = a["labels"], a["labels"]["alertname"]
    anchor = a["annotations"].get("runbook_url", "").rsplit("#", 1)[-1]
    if anchor not in anchors:
        bad.append("%s: runbook anchor %r not in docs/runbooks.md" % (name, anchor))
    if not a["annotations"].get("summary") or "{{" in a["annotations"]["summary"]:
        bad.append("%s: summary %r" % (name, a["annotations"].get("summary")))
    if name in want and (l.get("node"), l.get("device"), l.get("severity")) != (sys.argv[3],) + want[name]:
        bad.append("%s: labels %s" % (name, l))
if bad:
    sys.exit("\n".join(bad))
PY

# Variables: the node and device label queries (label_values) list what the standalone serves.
curl -fsS "$PROM/api/v1/label/node/values" --data-urlencode 'match[]=accelmon_node_up' -G |
  grep -q "\"$NODE\"" || fail "label_values(accelmon_node_up, node) lacks $NODE"
devices=$(curl -fsS "$PROM/api/v1/label/device/values" -G \
  --data-urlencode "match[]=accelmon_device_info{node=~\"$NODE\"}" | "$PY" -c 'import json,sys; print(len(json.load(sys.stdin)["data"]))')
[ "$devices" -eq 8 ] || fail "label_values(accelmon_device_info, device) lists $devices devices, not 8"
# The Job dashboard's variable: label_values(accelmon_job_devices, job_id); its first job is the
# one the panel queries below are filled with.
JOB=$(curl -fsS "$PROM/api/v1/label/job_id/values" -G --data-urlencode 'match[]=accelmon_job_devices' |
  "$PY" -c 'import json,sys; print((json.load(sys.stdin)["data"] or [""])[0])')
[ -n "$JOB" ] || fail "label_values(accelmon_job_devices, job_id) lists no job: the simulated devices have no holder with a job"

# Every panel query, with $node, $device, $job and Grafana's interval variables filled in.
"$PY" "$REPO/dashboards/generate.py" --list-queries --out "$REPO" >"$WORK/queries.jsonl" ||
  fail "dashboards/generate.py --list-queries"
"$PY" - "$WORK/queries.jsonl" "$PROM" "$NODE" "$DEVICE" "$JOB" <<'PY' || fail "dashboard queries without data (above)"
import json, sys, time, urllib.parse, urllib.request
path, prom, node, device, job = sys.argv[1:6]
queries = [json.loads(l) for l in open(path)]
def fill(expr):
    for k, v in (("${node}", node), ("$node", node), ("${device}", device), ("$device", device),
                 ("${job}", job), ("$job", job),
                 ("$__rate_interval", "1m"), ("$__interval", "15s"), ("$__range", "1h")):
        expr = expr.replace(k, v)
    return expr
def query(expr):
    u = prom + "/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(u, timeout=10) as r:
        d = json.load(r)
    if d.get("status") != "success":
        raise RuntimeError(d)
    return d["data"]["result"]
pending = list(queries)
deadline = time.time() + 60  # recording rules and rate windows fill within seconds
while True:
    failed, errors = [], []
    for q in pending:
        try:
            if not query(fill(q["expr"])) and not q["empty_ok"]:
                failed.append(q)
        except Exception as e:  # a query Prometheus rejects is a bug whatever the data
            errors.append("%s / %s: %s: %s" % (q["dashboard"], q["panel"], fill(q["expr"]), e))
    if errors:
        sys.exit("\n".join(errors))
    pending = failed
    if not pending or time.time() > deadline:
        break
    time.sleep(2)
for q in pending:
    print("no data: %s / %s: %s" % (q["dashboard"], q["panel"], fill(q["expr"])), file=sys.stderr)
exempt = sum(1 for q in queries if q["empty_ok"])
print("dashboards: %d queries, %d with data required, %d allowed empty, %d failed"
      % (len(queries), len(queries) - exempt, exempt, len(pending)))
sys.exit(1 if pending else 0)
PY

stop standalone
echo "dashboards_test: ok"
