#!/usr/bin/env bash
# The schema validator (validate.js) catches what it is there for: each deliberately broken copy
# of a shipped manifest (a wrong type, a missing required field, a bad duration, an unknown
# kind) fails and names the field, while the unbroken file passes. Without this, a validator
# that accepted everything would let e2e_kubernetes_manifests_test pass on anything.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
require_validator
deploy=$repo/deploy/kubernetes
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=0

# expect_rejected NAME WANT: $work/NAME.yaml fails validation with WANT in the output.
expect_rejected() {
  local name=$1 want=$2
  if validate "$work/$name.yaml" >"$work/$name.out"; then
    echo "FAIL: $name: accepted"; cat "$work/$name.out"; failed=1
  elif ! grep -qF -- "$want" "$work/$name.out"; then
    echo "FAIL: $name: rejected, but without '$want':"; cat "$work/$name.out"; failed=1
  else
    echo "ok: $name: $(grep -F -- "$want" "$work/$name.out")"
  fi
}

# break_copy NAME SOURCE SED: a copy of a shipped manifest with one edit, which must apply.
break_copy() {
  sed "$3" "$deploy/$2" >"$work/$1.yaml"
  if cmp -s "$deploy/$2" "$work/$1.yaml"; then echo "FAIL: $1: the edit '$3' changed nothing in $2"; failed=1; fi
}

for f in agent-daemonset exporter-statefulset exporter-service servicemonitor prometheusrule; do
  validate "$deploy/$f.yaml" >"$work/$f.out" || { echo "FAIL: $f.yaml is rejected:"; cat "$work/$f.out"; failed=1; }
done

break_copy replicas_string exporter-statefulset.yaml 's/^  replicas: 1$/  replicas: "one"/'
expect_rejected replicas_string "StatefulSet/accelmon-exporter: data/spec/replicas must be integer"

break_copy container_port_string exporter-statefulset.yaml 's/containerPort: 9477/containerPort: "9477"/'
expect_rejected container_port_string "containers/0/ports/0/containerPort must be integer"

break_copy run_as_user_name agent-daemonset.yaml 's/runAsUser: 0/runAsUser: root/'
expect_rejected run_as_user_name "DaemonSet/accelmon-agent: data/spec/template/spec/securityContext/runAsUser must be integer"

break_copy container_without_name agent-daemonset.yaml 's/^        - name: agent$/        - stdin: false/'
expect_rejected container_without_name "containers/0 must have required property name"

break_copy servicemonitor_port_number servicemonitor.yaml 's/^    - port: http$/    - port: 9477/'
expect_rejected servicemonitor_port_number "ServiceMonitor/accelmon-exporter: data/spec/endpoints/0/port must be string"

break_copy rule_bad_duration prometheusrule.yaml '0,/^          for: /s/^          for: .*/          for: ten minutes/'
expect_rejected rule_bad_duration "/for must match pattern"

break_copy rule_without_expr prometheusrule.yaml '0,/^          expr: /s/^          expr: /          exprr: /'
expect_rejected rule_without_expr "PrometheusRule/accelmon: data/spec/groups/0/rules/0 must have required property expr"

break_copy kind_typo agent-daemonset.yaml 's/^kind: DaemonSet$/kind: DeamonSet/'
expect_rejected kind_typo "DeamonSet/accelmon-agent: no schema for apps/v1 DeamonSet"

printf 'kind: [a\n' >"$work/not_yaml.yaml"
expect_rejected not_yaml "not YAML"

: >"$work/empty.yaml"
expect_rejected empty "no objects to validate"

[[ $failed -eq 0 ]] && echo "PASS: every broken copy rejected, the shipped files accepted"
exit $failed
