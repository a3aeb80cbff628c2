#!/usr/bin/python3
"""Replaces the generated block of one section of bench/README.md with stdin.

    update_readme.py README SECTION < tables.md

The block is everything between `<!-- bench:SECTION -->` and `<!-- /bench:SECTION -->`; the
prose around it (method, goals, where the time goes) is kept as written.
"""
import sys


def main():
    path, section = sys.argv[1], sys.argv[2]
    begin, end = f"<!-- bench:{section} -->", f"<!-- /bench:{section} -->"
    text = open(path, encoding="utf-8").read()
    if begin not in text or end not in text:
        sys.exit(f"{path}: no {begin} ... {end} block to rewrite")
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    body = sys.stdin.read().strip()
    with open(path, "w", encoding="utf-8") as out:
        out.write(f"{head}{begin}\n{body}\n{end}{tail}")


if __name__ == "__main__":
    main()
