#!/usr/bin/env python3
"""The end of `make test`: how many tests each phase ran, and every skipped test with its reason.

Usage: test_summary.py PHASE=CTEST_JUNIT_XML...  (ctest --output-junit writes the files)
A skip is never silent: its reason is the test's own "SKIP: ..." line, or the message that
gtest printed after "Skipped".
"""
import sys
import xml.etree.ElementTree as ET


def skip_reason(case):
    out = (case.findtext("system-out") or "").splitlines()
    for i, line in enumerate(out):
        if line.startswith("SKIP: "):
            return line[len("SKIP: "):]
        if line.rstrip().endswith(": Skipped") and i + 1 < len(out) and out[i + 1].strip():
            return out[i + 1].strip()
    skipped = case.find("skipped")
    return skipped.get("message", "no reason given") if skipped is not None else "no reason given"


def main(args):
    skipped = []
    for arg in args:
        phase, _, path = arg.partition("=")
        try:
            suite = ET.parse(path).getroot()
        except (OSError, ET.ParseError) as e:
            print(f"  {phase:<20} no results ({e})")
            continue
        cases = suite.findall("testcase")
        ran = [c for c in cases if c.get("status") == "run"]
        phase_skips = [c for c in cases if c.find("skipped") is not None]
        print(f"  {phase:<20} {len(cases)} tests: {len(ran)} ran, {len(phase_skips)} skipped")
        skipped += [(phase, c.get("name"), skip_reason(c)) for c in phase_skips]
    if skipped:
        print(f"\nSkipped ({len(skipped)}):")
        for phase, name, reason in skipped:
            print(f"  [{phase}] {name}: {reason}")
    else:
        print("\nSkipped: none")


if __name__ == "__main__":
    main(sys.argv[1:])
