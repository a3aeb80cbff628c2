#!/usr/bin/env python3
"""Finds pipes into a reader that may stop before its input ends, in every shell test and script
and every runnable docs block (`<!-- runnable -->` before a ```sh fence).

Under `set -o pipefail` (every e2e test, every runnable block) `producer | grep -q`, `| grep -m N`
or `| head` fails whenever the reader exits while the producer still writes: the producer dies
of SIGPIPE (exit 141; curl says 23), and a test fails or a wait times out although the line was
there. tests/e2e/lib.sh has the forms that read the whole output first (output_has, first_line,
nth_port; or a here-string: `grep -q X <<<"$(cmd)"`). A pipe that is right as it is says why
on its line with `# pipe-ok: REASON`.

Usage: check_pipe_close.py REPO_ROOT. Exits 1 and lists FILE:LINE for each one found.
"""
import pathlib
import re
import sys

# A pipe (not ||) into head, or into grep with -q/-m (alone or among other short flags).
EARLY_READER = re.compile(r"(?<![|])\|(?![|])\s*(head\b|grep\s+(?:-[A-Za-z]*[qm]|[^|]*\s-[A-Za-z]*[qm]))")


def code_lines_of_runnable_blocks(path):
    marked = inside = False
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if inside:
            if line.startswith("```"):
                inside = False
            else:
                yield number, line
        elif re.match(r"^<!-- runnable -->\s*$", line):
            marked = True
        else:
            inside = marked and re.match(r"^```(sh|bash)\s*$", line) is not None
            marked = False


def shell_lines(path):
    yield from enumerate(path.read_text(encoding="utf-8").splitlines(), 1)


def main(root):
    root = pathlib.Path(root)
    sources = []
    for pattern in ("tests/**/*.sh", "scripts/*.sh", "bench/*.sh", ".ci/run", "deploy/**/*.sh"):
        sources += [(p, shell_lines) for p in sorted(root.glob(pattern))]
    for doc in [root / "README.md", *sorted((root / "docs").glob("*.md"))]:
        sources.append((doc, code_lines_of_runnable_blocks))
    found = []
    for path, lines in sources:
        for number, line in lines(path):
            code = line.split(" #", 1)[0] if not line.lstrip().startswith("#") else ""
            if EARLY_READER.search(code) and "# pipe-ok:" not in line:
                found.append(f"{path.relative_to(root)}:{number}: {line.strip()}")
    if found:
        print("Pipes into a reader that may exit early (see tests/e2e/lib.sh, output_has):")
        print("\n".join("  " + f for f in found))
        return 1
    print(f"no early-exit pipes in {len(sources)} shell files and docs")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
