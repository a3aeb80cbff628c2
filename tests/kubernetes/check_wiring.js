#!/usr/bin/node
// What a schema cannot see in the rendered manifests (kubectl kustomize deploy/kubernetes): that
// the agent's and exporter's flags point at what is mounted, that the Services, probes and the
// ServiceMonitor name ports that exist, and that everything is in one namespace. One line per
// broken link, exit 1 on any.
//   NODE_PATH=DIR/node_modules node tests/kubernetes/check_wiring.js rendered.yaml
"use strict";
const fs = require("fs");
const yaml = require("js-yaml");

const objects = yaml.loadAll(fs.readFileSync(process.argv[2] === "-" ? 0 : process.argv[2], "utf8")).filter(Boolean);
const problems = [];
const problem = (what) => problems.push(what);
const find = (kind, name) => objects.find((o) => o.kind === kind && o.metadata.name === name);

function flag(container, name) {
  const prefix = `--${name}=`;
  const arg = (container.args || []).find((a) => a.startsWith(prefix));
  return arg === undefined ? undefined : arg.slice(prefix.length);
}

// The volume mounted at the longest mountPath that holds path, with its volume.
function mountOf(pod, container, path) {
  let best;
  for (const m of container.volumeMounts || []) {
    if ((path === m.mountPath || path.startsWith(m.mountPath.replace(/\/$/, "") + "/")) &&
        (!best || m.mountPath.length > best.mountPath.length)) {
      best = m;
    }
  }
  if (!best) return undefined;
  const volume = (pod.volumes || []).find((v) => v.name === best.name);
  return { mount: best, volume };
}

// flag NAME of container names a path under a hostPath HOST (at the same relative place).
function expectHostPath(what, pod, container, name, hostPath, readOnly) {
  const value = flag(container, name);
  if (value === undefined) return problem(`${what}: no --${name}`);
  const m = mountOf(pod, container, value);
  if (!m || !m.volume) return problem(`${what}: --${name}=${value} is on no mounted volume`);
  const host = m.volume.hostPath && m.volume.hostPath.path;
  const rel = value.slice(m.mount.mountPath.length);
  if (host === undefined || host.replace(/\/$/, "") + rel !== hostPath) {
    problem(`${what}: --${name}=${value} is ${host === undefined ? "not a hostPath" : host + rel} on the host, not ${hostPath}`);
  }
  if (readOnly !== undefined && Boolean(m.mount.readOnly) !== readOnly) {
    problem(`${what}: --${name}=${value} is mounted ${m.mount.readOnly ? "read-only" : "read-write"}`);
  }
}

const ns = objects.find((o) => o.kind === "Namespace");
for (const o of objects) {
  if (o.kind !== "Namespace" && (!ns || o.metadata.namespace !== ns.metadata.name)) {
    problem(`${o.kind}/${o.metadata.name}: namespace ${o.metadata.namespace}, not the Namespace object's`);
  }
}

const agent = find("DaemonSet", "accelmon-agent");
const exporter = find("StatefulSet", "accelmon-exporter");
const service = find("Service", "accelmon-exporter");
const monitor = find("ServiceMonitor", "accelmon-exporter");
if (!agent || !exporter || !service || !monitor || !find("PrometheusRule", "accelmon")) {
  problem("missing one of DaemonSet accelmon-agent, StatefulSet accelmon-exporter, Service accelmon-exporter, ServiceMonitor, PrometheusRule");
} else {
  const apod = agent.spec.template.spec;
  const a = apod.containers[0];
  expectHostPath("agent", apod, a, "path.procfs", "/proc", true);
  expectHostPath("agent", apod, a, "path.sysfs", "/sys", true);
  expectHostPath("agent", apod, a, "kubelet.pod-resources-socket", "/var/lib/kubelet/pod-resources/kubelet.sock", true);
  expectHostPath("agent", apod, a, "push.socket", "/run/accelmon/agent.sock", false);
  expectHostPath("agent", apod, a, "spool.dir", "/var/lib/accelmon/spool", false);
  if (!apod.hostPID) problem("agent: not in the host's PID namespace (hostPID), but reads host pids in /proc");
  if (!apod.hostNetwork) problem("agent: not in the host's network namespace, but reads /proc/net/dev");
  if (apod.hostNetwork && apod.dnsPolicy !== "ClusterFirstWithHostNet") {
    problem("agent: hostNetwork without dnsPolicy ClusterFirstWithHostNet cannot resolve the exporter's Service");
  }
  if (!(apod.tolerations || []).some((t) => t.key === "nvidia.com/gpu")) problem("agent: no toleration for nvidia.com/gpu");
  if (!a.readinessProbe) problem("agent: no readiness probe");
  const address = flag(a, "exporter.address") || "";
  const [host, port] = address.split(":");
  const grpc = (service.spec.ports || []).find((p) => p.name === "grpc");
  if (host !== service.metadata.name || !grpc || String(grpc.port) !== port) {
    problem(`agent: --exporter.address=${address} is not the Service ${service.metadata.name}'s grpc port`);
  }

  const epod = exporter.spec.template.spec;
  const e = epod.containers[0];
  const ports = Object.fromEntries((e.ports || []).map((p) => [p.name, p.containerPort]));
  const listen = (name) => Number((flag(e, name) || "").split(":").pop());
  if (listen("web.listen-address") !== ports.http) problem("exporter: --web.listen-address is not the container's http port");
  if (listen("grpc.listen-address") !== ports.grpc) problem("exporter: --grpc.listen-address is not the container's grpc port");
  for (const [probe, path] of [["readinessProbe", "/readyz"], ["livenessProbe", "/healthz"]]) {
    const p = e[probe] && e[probe].httpGet;
    if (!p || p.path !== path || !(p.port in ports)) problem(`exporter: ${probe} is not GET ${path} on a named port`);
  }
  const config = flag(e, "config.file");
  const cm = config && mountOf(epod, e, config);
  const cmName = cm && cm.volume && cm.volume.configMap && cm.volume.configMap.name;
  const configMap = cmName && objects.find((o) => o.kind === "ConfigMap" && o.metadata.name === cmName);
  if (!configMap || !(config.split("/").pop() in (configMap.data || {}))) {
    problem(`exporter: --config.file=${config} is not a key of a rendered ConfigMap`);
  }
  const record = flag(e, "record.dir");
  const rm = record && mountOf(epod, e, record);
  if (!rm || rm.volume || !(exporter.spec.volumeClaimTemplates || []).some((t) => t.metadata.name === rm.mount.name)) {
    problem(`exporter: --record.dir=${record} is not on a volumeClaimTemplate`);
  }
  const sc = epod.securityContext || {};
  if (!sc.runAsNonRoot || !sc.runAsUser) problem("exporter: may run as root");
  if (exporter.spec.serviceName && !find("Service", exporter.spec.serviceName)) {
    problem(`exporter: serviceName ${exporter.spec.serviceName} is no Service`);
  }

  for (const s of objects.filter((o) => o.kind === "Service")) {
    for (const p of s.spec.ports) {
      if (!(p.targetPort in ports)) problem(`Service/${s.metadata.name}: targetPort ${p.targetPort} is no exporter port`);
    }
    const labels = exporter.spec.template.metadata.labels;
    if (!Object.entries(s.spec.selector).every(([k, v]) => labels[k] === v)) {
      problem(`Service/${s.metadata.name}: its selector does not match the exporter's pods`);
    }
  }
  const selected = objects.filter((o) => o.kind === "Service" &&
    Object.entries(monitor.spec.selector.matchLabels).every(([k, v]) => (o.metadata.labels || {})[k] === v));
  if (selected.length !== 1 || selected[0] !== service) {
    problem(`ServiceMonitor: selects ${selected.map((s) => s.metadata.name).join(", ") || "no Service"}, not exactly ${service.metadata.name}`);
  }
  for (const ep of monitor.spec.endpoints) {
    if (!service.spec.ports.some((p) => p.name === ep.port)) problem(`ServiceMonitor: port ${ep.port} is not the Service's`);
  }
}

for (const p of problems) console.log(p);
if (problems.length === 0) console.log(`wiring ok: ${objects.length} objects`);
process.exit(problems.length ? 1 : 0);
