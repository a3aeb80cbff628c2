#!/usr/bin/python3
"""Google Benchmark JSON (stdin) -> one Markdown table: CPU time and every user counter.

With repetitions, only the median rows are kept; counters are printed with SI prefixes as
Google Benchmark's console does, so the table reads like its console output. With $BENCH_RESULTS
set, each row's CPU time in nanoseconds is also appended there as "gbench:NAME" (bench/goals.py).
"""
import json
import os
import sys

NANOSECONDS = {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}


def si(value):
    for factor, prefix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return f"{value / factor:.3g}{prefix}"
    return f"{value:.3g}"


def main():
    runs = json.load(sys.stdin)["benchmarks"]
    if any(r.get("aggregate_name") for r in runs):
        runs = [r for r in runs if r.get("aggregate_name") == "median"]
    skip = {"name", "run_name", "run_type", "repetitions", "repetition_index", "threads",
            "iterations", "real_time", "cpu_time", "time_unit", "aggregate_name",
            "aggregate_unit", "family_index", "per_family_instance_index", "label",
            "error_occurred", "error_message"}
    counters = []
    for r in runs:
        for key in r:
            if key not in skip and key not in counters and isinstance(r[key], (int, float)):
                counters.append(key)
    print("| benchmark | CPU time | " + " | ".join(counters) + " |")
    print("| --- | --- |" + " --- |" * len(counters))
    for r in runs:
        name = r["run_name"] if "run_name" in r else r["name"]
        cells = [si(r[c]) if c in r else "" for c in counters]
        cpu = r["cpu_time"]
        cpu_text = f"{cpu:,.0f}" if cpu >= 100 else f"{cpu:.3g}"
        print(f"| `{name}` | {cpu_text} {r['time_unit']} | " + " | ".join(cells) + " |")
    if os.environ.get("BENCH_RESULTS"):
        with open(os.environ["BENCH_RESULTS"], "a", encoding="utf-8") as results:
            for r in runs:
                name = r["run_name"] if "run_name" in r else r["name"]
                ns = r["cpu_time"] * NANOSECONDS[r["time_unit"]]
                results.write(f"gbench:{name}\t{ns:.0f}\n")


if __name__ == "__main__":
    main()
