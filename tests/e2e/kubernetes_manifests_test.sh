#!/usr/bin/env bash
# deploy/kubernetes as `kubectl apply -k` would send it (docs/deployment.md "Kubernetes"):
#   - `kubectl kustomize` renders it: the Namespace, the config ConfigMap, both Services, the
#     exporter StatefulSet, the agent DaemonSet, the ServiceMonitor and the PrometheusRule;
#   - every object validates against the Kubernetes and Prometheus operator schemas
#     (tests/kubernetes/validate.js, the npm kubernetes-models packages pinned in
#     tests/kubernetes/package-lock.json; e2e/validator tests prove it rejects broken copies);
#   - the wiring a schema cannot see holds (tests/kubernetes/check_wiring.js): flags point at
#     the mounted host paths, the ConfigMap and the claim, ports and probes and the
#     ServiceMonitor name ports that exist, one namespace; and a copy with a flag pointing
#     nowhere fails that check;
#   - every flag the manifests pass is one the binary takes, and promtool accepts the
#     PrometheusRule's groups (the same as dashboards/prometheus/*.yml, dashboards_up_to_date).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/../kubernetes/lib.sh"
for tool in kubectl promtool; do
  command -v "$tool" >/dev/null || fail "$tool not found (scripts/install-deps.sh test installs it)"
done
require_validator

kubectl kustomize "$repo/deploy/kubernetes" >"$WORK/rendered.yaml" 2>"$WORK/kustomize.log" ||
  fail "kubectl kustomize deploy/kubernetes: $(cat "$WORK/kustomize.log")"
kinds=$(grep '^kind: ' "$WORK/rendered.yaml" | sort | tr '\n' ' ')
want="kind: ConfigMap kind: DaemonSet kind: Namespace kind: PrometheusRule kind: Service kind: Service kind: ServiceMonitor kind: StatefulSet "
[[ $kinds == "$want" ]] || fail "rendered kinds: '$kinds', want '$want'"

validate "$WORK/rendered.yaml" >"$WORK/validate.log" || fail "schema errors: $(grep -v ': valid$' "$WORK/validate.log")"
[[ $(grep -c ': valid$' "$WORK/validate.log") -eq 8 ]] || fail "not 8 valid objects: $(cat "$WORK/validate.log")"

"$NODE" "$kubernetes_dir/check_wiring.js" "$WORK/rendered.yaml" >"$WORK/wiring.log" ||
  fail "wiring: $(cat "$WORK/wiring.log")"
# The wiring check itself: a --path.procfs on no volume and an exporter address on the wrong
# port must each be caught.
sed 's|--path.procfs=/host/proc|--path.procfs=/hostproc|; s|--exporter.address=accelmon-exporter:9478|--exporter.address=accelmon-exporter:9477|' \
  "$WORK/rendered.yaml" >"$WORK/miswired.yaml"
if "$NODE" "$kubernetes_dir/check_wiring.js" "$WORK/miswired.yaml" >"$WORK/miswired.log"; then
  fail "the wiring check accepts a miswired copy"
fi
grep -q 'path.procfs=/hostproc is on no mounted volume' "$WORK/miswired.log" || fail "miswired procfs not named: $(cat "$WORK/miswired.log")"
grep -q 'exporter.address=accelmon-exporter:9477 is not' "$WORK/miswired.log" || fail "wrong exporter port not named: $(cat "$WORK/miswired.log")"

# Every --flag of the agent's and the exporter's args is in that subcommand's --help.
"$NODE" -e '
  const yaml = require("js-yaml");
  for (const o of yaml.loadAll(require("fs").readFileSync(process.argv[1], "utf8")))
    if (o && (o.kind === "DaemonSet" || o.kind === "StatefulSet"))
      for (const a of o.spec.template.spec.containers[0].args.slice(1))
        console.log(o.spec.template.spec.containers[0].args[0], a.split("=")[0]);' "$WORK/rendered.yaml" >"$WORK/flags.txt"
[[ -s $WORK/flags.txt ]] || fail "no flags found in the rendered args"
while read -r subcommand flag; do
  # The subcommand's flags and the global ones (--config.file, --log.level).
  { "$ACCELMON" "$subcommand" --help; "$ACCELMON" --help; } >"$WORK/help-$subcommand.txt"
  grep -q -- "$flag\b" "$WORK/help-$subcommand.txt" ||
    fail "accelmon $subcommand has no $flag (passed by deploy/kubernetes)"
done <"$WORK/flags.txt"

# The ConfigMap's file (deploy/kubernetes/accelmon.yaml) is a config file accelmon accepts.
"$ACCELMON" check config "$(dirname "$0")/../../deploy/kubernetes/accelmon.yaml" >"$WORK/check.log" 2>&1 ||
  fail "check config rejects deploy/kubernetes/accelmon.yaml: $(cat "$WORK/check.log")"

# The PrometheusRule's spec is a Prometheus rule file.
"$NODE" -e '
  const yaml = require("js-yaml");
  const rule = yaml.loadAll(require("fs").readFileSync(process.argv[1], "utf8")).find((o) => o && o.kind === "PrometheusRule");
  process.stdout.write(yaml.dump(rule.spec));' "$WORK/rendered.yaml" >"$WORK/rules.yml"
promtool check rules "$WORK/rules.yml" >"$WORK/promtool.log" 2>&1 || fail "promtool: $(cat "$WORK/promtool.log")"

echo "PASS: deploy/kubernetes renders, validates ($(grep -c ': valid$' "$WORK/validate.log") objects) and is wired"
