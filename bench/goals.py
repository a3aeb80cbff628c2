#!/usr/bin/python3
"""Issue 22's goals as one Markdown table: ours, the anchor, the ratio, the goal, met or missed.

  bench/goals.py RESULTS

RESULTS holds "KEY<TAB>VALUE" lines written in the same run by bench/ingest_vs_echo.sh,
bench/lone_node_recording.sh and gbench_table.py (render_bench), via $BENCH_RESULTS. A goal whose
values are not there is printed as "not measured", never as met.
"""
import sys

SERIES = 100000  # the render and scrape goals are at 100 k series


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

    def render_ns(name):
        ns = v.get(f"gbench:{name}/{SERIES}")
        return ns / SERIES if ns is not None else None

    def gbench_ms(name):
        ns = v.get(f"gbench:{name}/{SERIES}")
        return ns / 1e6 if ns is not None else None

    integer = lambda x: f"{x:,.0f}"
    row(1, "ingest at saturation, reports/s (anchor: bare gRPC echo)",
        v.get("exporter_reports_per_second"), v.get("echo_reports_per_second"),
        lambda o, a: f"{100 * o / a:.0f} %", "≥ 50 %", lambda o, a: o >= 0.5 * a, integer)
    row(1, "device-samples/s per exporter core (anchor: the goal)",
        v.get("exporter_samples_per_core"), 250000.0,
        lambda o, a: f"{o / a:.2f}×", "≥ 250 k", lambda o, a: o >= a, integer)
    row(1, "recording on, reports/s (anchor: recording off)",
        v.get("recording_reports_per_second"), v.get("exporter_reports_per_second"),
        lambda o, a: f"{a / o:.2f}× slower", "≤ 1.5× slower", lambda o, a: a <= 1.5 * o, integer)
    row(2, "a lone node's recording, bytes (anchor: Prometheus TSDB)",
        v.get("lone_node_recording_bytes"), v.get("lone_node_tsdb_bytes"),
        lambda o, a: f"{o / a:.2f}×", "≤ 1.5×", lambda o, a: o <= 1.5 * a, integer)
    row(3, "/metrics render, ns per series (anchor: prometheus-cpp)",
        render_ns("BM_RenderOurs"), render_ns("BM_RenderPeer"),
        lambda o, a: f"{o / a:.2f}×", "≤ 120 ns", lambda o, a: o <= 120, lambda x: f"{x:.0f}")
    row(3, "gzip'd scrape, ms (anchor: the plain render)",
        gbench_ms("BM_GzipScrapeOurs"), gbench_ms("BM_RenderOurs"),
        lambda o, a: f"{o / a:.2f}×", "≤ 2×", lambda o, a: o <= 2 * a, lambda x: f"{x:.1f}")
    row(4, "agent at 1 Hz, millicores (anchor: node_exporter)",
        v.get("agent_millicores"), v.get("node_exporter_millicores"),
        lambda o, a: f"{a / o:.1f}× less", "≤ 1 mc", lambda o, a: o <= 1.0, lambda x: f"{x:.2f}")
    row(4, "agent CPU against node_exporter's on the same host work",
        v.get("agent_millicores"), v.get("node_exporter_millicores"),
        lambda o, a: f"{a / o:.1f}× less", "≥ 5× less", lambda o, a: a >= 5 * o,
        lambda x: f"{x:.2f} mc")

    print("| goal | measure | ours | anchor | ratio | target | |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
