#!/usr/bin/node
// Validates every object of one or more multi-document YAML files (`-`: stdin) against the
// Kubernetes OpenAPI schemas of the pinned npm `kubernetes-models` package, and the Prometheus
// operator's CRDs (ServiceMonitor, PrometheusRule) of `@kubernetes-models/prometheus-operator`.
// An object whose apiVersion/kind has no schema there is an error too, so nothing passes unseen.
// Prints one line per object, `FILE: KIND/NAME: what is wrong` for each failure; exit 1 on any.
//   NODE_PATH=DIR/node_modules node tests/kubernetes/validate.js rendered.yaml
"use strict";
const fs = require("fs");
const yaml = require("js-yaml");

// The API groups a package holds schemas for; the core group ("v1") is kubernetes-models'.
const PACKAGES = [
  { test: (group) => group === "monitoring.coreos.com", name: "@kubernetes-models/prometheus-operator" },
  { test: () => true, name: "kubernetes-models" },
];

function modelFor(apiVersion, kind) {
  const slash = apiVersion.lastIndexOf("/");
  const group = slash < 0 ? "" : apiVersion.slice(0, slash);
  const version = apiVersion.slice(slash + 1);
  const pkg = PACKAGES.find((p) => p.test(group)).name;
  const path = `${pkg}/${group ? group + "/" : ""}${version}/${kind}`;
  if (!/^[A-Za-z0-9.\/@_-]+$/.test(path)) return null;
  try {
    const mod = require(path);
    return mod[kind] || null;
  } catch (e) {
    if (e.code === "MODULE_NOT_FOUND") return null;
    throw e;
  }
}

function validateObject(doc) {
  if (doc === null || typeof doc !== "object" || Array.isArray(doc)) return "not a mapping";
  if (typeof doc.apiVersion !== "string" || typeof doc.kind !== "string") {
    return "no apiVersion or kind";
  }
  const Model = modelFor(doc.apiVersion, doc.kind);
  if (!Model) return `no schema for ${doc.apiVersion} ${doc.kind}`;
  try {
    new Model(doc).validate();
  } catch (e) {
    return e.message.replace(/\s+/g, " ").trim();
  }
  return null;
}

let failures = 0;
let objects = 0;
const files = process.argv.slice(2);
if (files.length === 0) {
  console.error("usage: validate.js FILE... (- for stdin)");
  process.exit(2);
}
for (const file of files) {
  const text = fs.readFileSync(file === "-" ? 0 : file, "utf8");
  let docs;
  try {
    docs = yaml.loadAll(text);
  } catch (e) {
    console.log(`${file}: not YAML: ${e.message.split("\n")[0]}`);
    failures++;
    continue;
  }
  for (const doc of docs) {
    if (doc === null || doc === undefined) continue;  // an empty document between `---`
    objects++;
    const name = `${doc && doc.kind}/${doc && doc.metadata && doc.metadata.name}`;
    const error = validateObject(doc);
    if (error) {
      failures++;
      console.log(`${file}: ${name}: ${error}`);
    } else {
      console.log(`${file}: ${name}: valid`);
    }
  }
}
if (objects === 0) {
  console.log("no objects to validate");
  process.exit(1);
}
process.exit(failures ? 1 : 0);
