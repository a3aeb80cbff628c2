#!/usr/bin/python3
"""Writes docs/metrics.md, the catalog of every metric family accelmon serves on /metrics, from
Prometheus text expositions (never by hand, so it cannot drift from the code).

    /usr/bin/python3 dashboards/metrics_catalog.py                 # rewrites docs/metrics.md
    /usr/bin/python3 dashboards/metrics_catalog.py --out FILE      # writes it elsewhere (CI diffs)
    /usr/bin/python3 dashboards/metrics_catalog.py --reduce SCRAPE # a scrape, reduced to the
        HELP and TYPE of each family and one sample per distinct label set (values zeroed):
        what tests/dashboards/standalone.prom holds
    /usr/bin/python3 dashboards/metrics_catalog.py --check SCRAPE  # fails when a family, type,
        help text or label of SCRAPE is not in the catalog's inputs

The inputs, merged (a family's labels are the union over its samples; HELP and TYPE must agree):
  tests/golden/render.prom         the renderer's golden output for a full report (a unit test
                                   keeps it equal to what the code renders): device, process and
                                   agent families with every label
  tests/golden/host_e2e.prom,      the host collectors over the fixture tree and the three device
  tests/golden/devices/*.prom      collectors over their fakes (tests keep them current too)
  tests/dashboards/standalone.prom a reduced scrape of `accelmon standalone --sim 8` over the host
                                   fixture tree with a fault scenario and a recording: exporter
                                   self-metrics and diagnosis families.
                                   tests/e2e/dashboards_test.sh runs --check on a live scrape, so
                                   a new family or label in the code fails the e2e until this
                                   file is refreshed (its failure message says how).
  tests/dashboards/conditional.prom the few families no run above shows (they appear only after
                                   an event, such as a rejected report); kept by hand, and the
                                   catalog's unit test fails when a name quoted in
                                   daemon/exporter/metrics_renderer.cc is in none of the inputs.
Standard library only.
"""
import argparse
import os
import re
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INPUTS = ["tests/golden/render.prom", "tests/golden/host_e2e.prom", "tests/golden/devices/amdgpu.prom",
          "tests/golden/devices/dcmi.prom", "tests/golden/devices/nvml.prom",
          "tests/dashboards/standalone.prom", "tests/dashboards/conditional.prom"]
RENDERER = "daemon/exporter/metrics_renderer.cc"
SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')

SECTIONS = [
    ("Nodes and agents", ("accelmon_node_", "accelmon_agent_", "accelmon_build_")),
    ("Host", ("accelmon_host_",)),
    ("Devices", ("accelmon_device_",)),
    ("Processes (pushed allocator statistics and steps)", ("accelmon_process_",)),
    ("Jobs (the exporter's view over every node; docs/jobs.md)", ("accelmon_job_",)),
    ("Diagnostics", ("accelmon_diagnosis_",)),
    ("Exporter self-metrics", ("accelmon_exporter_", "accelmon_config_")),
]


def parse(text):
    """{name: {"help", "type", "labels": [names in first-seen order], "samples": [lines]}}"""
    fams = {}

    def fam(name):
        return fams.setdefault(name, {"help": None, "type": None, "labels": [], "samples": {}})

    for line in text.splitlines():
        if line.startswith("# HELP "):
            _, _, name, *rest = line.split(" ", 3)
            fam(name)["help"] = rest[0] if rest else ""
        elif line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            fam(name)["type"] = kind
        elif line and not line.startswith("#"):
            m = SAMPLE.match(line)
            if not m:
                continue
            name = m.group(1)
            f = fam(name)
            names = tuple(k for k, _ in LABEL.findall(m.group(2) or ""))
            for k in names:
                if k not in f["labels"]:
                    f["labels"].append(k)
            f["samples"].setdefault(names, "%s%s 0" % (name, "{%s}" % m.group(2) if m.group(2) else ""))
    return fams


def merge(paths):
    out = {}
    for p in paths:
        with open(p, encoding="utf-8") as f:
            for name, f2 in parse(f.read()).items():
                f1 = out.setdefault(name, {"help": None, "type": None, "labels": [], "samples": {}})
                for key in ("help", "type"):
                    if f1[key] is None:
                        f1[key] = f2[key]
                    elif f2[key] is not None and f2[key] != f1[key]:
                        sys.exit("%s: %s of %s differs between inputs: %r vs %r" % (p, key, name, f1[key], f2[key]))
                for k in f2["labels"]:
                    if k not in f1["labels"]:
                        f1["labels"].append(k)
    return out


def reduce(text):
    lines = []
    for name, f in parse(text).items():
        if f["help"] is not None:
            lines.append("# HELP %s %s" % (name, f["help"]))
        if f["type"] is not None:
            lines.append("# TYPE %s %s" % (name, f["type"]))
        lines.extend(f["samples"][k] for k in f["samples"])
    return "\n".join(lines) + "\n"


def markdown(fams):
    out = [
        "# Metrics",
        "",
        "<!-- Generated by dashboards/metrics_catalog.py from the expositions it lists (goldens and a",
        "     reduced standalone scrape); do not edit. A ctest unit test keeps it current. -->",
        "",
        "Every metric family accelmon's exporter (and `standalone`) serves on `/metrics`. Device series",
        "carry `node`, `device` (the index), `uuid`, `vendor`, `model`; versions and PCI ids live on",
        "`accelmon_device_info` only. A value a source does not report is absent, never a fake zero.",
        "The naming contract is in [architecture.md](architecture.md); the alerts and dashboards",
        "built on these names are in `dashboards/` ([dashboards.md](dashboards.md)).",
        "",
    ]
    done = set()
    for title, prefixes in SECTIONS + [("Other", ("",))]:
        names = sorted(n for n in fams if n.startswith(prefixes) and n not in done)
        if not names:
            continue
        out += ["## %s" % title, "", "| name | type | labels | help |", "| --- | --- | --- | --- |"]
        for n in names:
            f = fams[n]
            labels = ", ".join("`%s`" % k for k in f["labels"]) or "—"
            help_ = (f["help"] or "").replace("|", "\\|")
            out.append("| `%s` | %s | %s | %s |" % (n, f["type"] or "untyped", labels, help_))
            done.add(n)
        out.append("")
    return "\n".join(out)


def check(scrape_text, fams):
    problems = []
    for name, f in parse(scrape_text).items():
        c = fams.get(name)
        if c is None:
            problems.append("family %s is not in the catalog" % name)
            continue
        for key in ("help", "type"):
            if f[key] is not None and f[key] != c[key]:
                problems.append("%s of %s: %r, catalog has %r" % (key, name, f[key], c[key]))
        for k in f["labels"]:
            if k not in c["labels"]:
                problems.append("label %s of %s is not in the catalog" % (k, name))
    return problems


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(REPO, "docs", "metrics.md"))
    ap.add_argument("--reduce", metavar="SCRAPE")
    ap.add_argument("--check", metavar="SCRAPE")
    args = ap.parse_args()
    if args.reduce:
        with open(args.reduce, encoding="utf-8") as f:
            sys.stdout.write(reduce(f.read()))
        return
    fams = merge([os.path.join(REPO, p) for p in INPUTS])
    with open(os.path.join(REPO, RENDERER), encoding="utf-8") as f:
        named = set(re.findall(r'"(accelmon_[a-z0-9_]+)"', f.read()))
    undocumented = sorted(named - set(fams))
    if undocumented:
        sys.exit("%s renders families the catalog's inputs lack: %s (add them to "
                 "tests/dashboards/standalone.prom or conditional.prom)" % (RENDERER, ", ".join(undocumented)))
    if args.check:
        with open(args.check, encoding="utf-8") as f:
            problems = check(f.read(), fams)
        if problems:
            sys.exit("the metric catalog is out of date:\n  " + "\n  ".join(problems))
        return
    with open(args.out, "w", encoding="utf-8") as f:
        f.write(markdown(fams))


if __name__ == "__main__":
    main()
