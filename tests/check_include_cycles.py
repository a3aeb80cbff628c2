#!/usr/bin/env python3
"""Finds circles in the project's own #include graph: two files that include each other, or a
longer loop (a.h -> b.h -> c.h -> a.h), in the product's C++ (collectors/, daemon/, diagnostics/,
recording/, proto/, bench/, tests/).

A circle means neither file can be read, moved or tested without the other: a declaration that
both want belongs in a header of its own (e.g. daemon/exporter/exporter_flags.h,
recording/segment_names.h). A .cc file counts as the header it implements (x.cc with x.h), so
`a.cc includes b.h` and `b.cc includes a.h` is a circle too.

Usage: check_include_cycles.py REPO_ROOT. Exits 1 and prints each circle found.
"""
import pathlib
import re
import sys

ROOMS = ("collectors", "daemon", "diagnostics", "recording", "proto", "bench", "tests")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)


def unit_of(path):
    """x.h and x.cc are one unit: the header and the code that implements it."""
    return str(path.with_suffix(""))


def main(root):
    root = pathlib.Path(root)
    files = [p for room in ROOMS for p in (root / room).rglob("*")
             if p.suffix in (".h", ".cc") and p.is_file()]
    units = {unit_of(p.relative_to(root)) for p in files}
    edges = {}
    for path in files:
        me = unit_of(path.relative_to(root))
        for target in INCLUDE.findall(path.read_text(encoding="utf-8", errors="replace")):
            other = unit_of(pathlib.Path(target))
            if other in units and other != me:
                edges.setdefault(me, set()).add(other)

    # Tarjan's strongly connected components: every component of more than one unit is a circle.
    index, low, stack, on_stack, circles = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    sys.setrecursionlimit(10000)
    for v in sorted(units):
        if v not in index:
            visit(v)
    for component in circles:
        links = [f"{a} -> {b}" for a in component for b in sorted(edges.get(a, ())) if b in component]
        print("include circle: " + ", ".join(component) + "\n  " + "\n  ".join(links))
    return 1 if circles else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
