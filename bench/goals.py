#!/usr/bin/python3
"""The core path's goals (issue 39) as one Markdown table: ours, the anchor, the ratio, the goal,
met or missed.

  bench/goals.py RESULTS

RESULTS holds "KEY<TAB>VALUE" lines written in the same run by bench/ingest_vs_echo.sh,
bench/ingest_vs_vm.sh, bench/scrape_encodings.sh and gbench_table.py (render_bench,
parse_bench), via $BENCH_RESULTS. A goal whose values are not there is printed as "not measured",
never as met.
"""
import sys


def load(path):
    values = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            key, _, value = line.rstrip("\n").partition("\t")
            if value:
                values[key] = float(value)  # a later run of the same key wins
    return values


def main():
    v = load(sys.argv[1])
    rows = []

    def row(goal, what, ours, anchor, ratio, target, met, fmt):
        if None in (ours, anchor):
            rows.append(f"| {goal} | {what} | not measured | | | {target} | not measured |")
            return
        rows.append(f"| {goal} | {what} | {fmt(ours)} | {fmt(anchor)} | {ratio(ours, anchor)} | "
                    f"{target} | {'met' if met(ours, anchor) else 'missed'} |")

    def gbench(name, scale=1.0):
        ns = v.get(f"gbench:{name}")
        return ns / scale if ns is not None else None

    def add(*values):
        return None if None in values else sum(values)

    ns = lambda x: f"{x:,.0f} ns"
    us = lambda x: f"{x:,.1f} µs"
    integer = lambda x: f"{x:,.0f}"
    times = lambda o, a: f"{o / a:.2f}×"
    faster = lambda o, a: f"{a / o:.1f}× faster"

    render = gbench("BM_RenderOurs/100000", 100000)  # ns per series, in process
    row(1, "plain scrape over HTTP at 100 k series, ns/series (anchor: the in-process render)",
        v.get("scrape_plain_ns_100000"), render, times, "≤ 1.5×", lambda o, a: o <= 1.5 * a, ns)
    for series in (50000, 100000):
        row(1, f"plain scrape at {series // 1000} k series, ns/series (anchor: prometheus-cpp's "
            "Exposer, curl)", v.get(f"scrape_plain_ns_{series}"), v.get(f"scrape_peer_ns_{series}"),
            faster, "≥ 15× faster", lambda o, a: a >= 15 * o, ns)
    row(1, "gzip'd scrape over HTTP at 100 k series, ns/series (anchor: the plain render)",
        v.get("scrape_gzip_ns_100000"), render, times, "≤ 2×", lambda o, a: o <= 2 * a, ns)

    echo = v.get("echo_cpu_us_per_report")
    parse = gbench("BM_ParseReportOnArena", 1000)  # µs
    row(2, "exporter CPU per report at saturation (anchor: the floor, echo's CPU per report "
        "+ protobuf's arena parse)", v.get("exporter_cpu_us_per_report"), add(echo, parse), times,
        "≤ 1.5×", lambda o, a: o <= 1.5 * a, us)
    row(2, "4000 nodes at 1 Hz, report → visible p99, ms (anchor: the goal)",
        v.get("fleet_4000_p99_ms"), 10.0, times, "≤ 10 ms", lambda o, a: o <= a,
        lambda x: f"{x:,.2f} ms")

    row(3, "device-samples/s per core, with diagnosis (anchor: VictoriaMetrics by remote write)",
        v.get("exporter_samples_per_core"), v.get("vm_device_samples_per_core"), times,
        "≥ 3×", lambda o, a: o >= 3 * a, integer)

    mc = lambda x: f"{x:.2f} mc"
    less = lambda o, a: f"{a / o:.1f}× less"
    row(4, "agent at 1 Hz over the fixture tree, CPU (anchor: node_exporter, same tree)",
        v.get("agent_millicores"), v.get("node_exporter_millicores"), less, "≥ 5× less",
        lambda o, a: a >= 5 * o, mc)
    row(4, "agent at 1 Hz over this host's /proc and /sys, CPU (anchor: node_exporter, same host)",
        v.get("agent_real_millicores"), v.get("node_exporter_real_millicores"), less,
        "≥ 5× less", lambda o, a: a >= 5 * o, mc)

    print("| goal | measure | ours | anchor | ratio | target | |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
