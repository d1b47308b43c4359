#!/usr/bin/env python3
"""Checks that the README's tour shows what the demo prints.

Usage: scripts/check-tour.py DEMO_OUTPUT [README]

Every fenced block of the README section "A tour (real output of
`scripts/demo.sh`)" is split at lines that hold only `...` into fragments;
each fragment must appear in DEMO_OUTPUT (what `scripts/demo.sh` printed) as
consecutive lines, the fragments of a block in order. Whitespace is
normalised (runs of blanks become one space, lines are trimmed), so psql's
column padding does not matter. The tour shows only parts of the demo that
are the same on every run (the seeded ones, before the secret key comes in).
Exits 1 and names every fragment it did not find.
"""

import pathlib
import re
import sys

SECTION = "## A tour (real output of `scripts/demo.sh`)"


def norm(line):
    return " ".join(line.split())


def tour_blocks(readme):
    lines = readme.splitlines()
    try:
        start = lines.index(SECTION)
    except ValueError:
        sys.exit(f"check-tour: the README has no section {SECTION!r}")
    blocks, block = [], None
    for line in lines[start + 1:]:
        if block is None and line.startswith("## "):
            break
        if line.startswith("```"):
            if block is None:
                block = []
            else:
                blocks.append(block)
                block = None
        elif block is not None:
            block.append(line)
    if not blocks:
        sys.exit("check-tour: the README's tour shows no output block")
    return blocks


def fragments(block):
    frags, cur = [], []
    for line in block:
        if line.strip() == "...":
            frags.append(cur)
            cur = []
        elif line.strip():
            cur.append(norm(line))
    frags.append(cur)
    return [f for f in frags if f]


def find(out, frag, start):
    """The index just after `frag` in `out` at or after `start`, or None."""
    n = len(frag)
    for i in range(start, len(out) - n + 1):
        if out[i:i + n] == frag:
            return i + n
    return None


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    out = [norm(l) for l in pathlib.Path(sys.argv[1]).read_text().splitlines()]
    readme_path = sys.argv[2] if len(sys.argv) == 3 else pathlib.Path(__file__).parent.parent / "README.md"
    blocks = tour_blocks(pathlib.Path(readme_path).read_text())
    missing, checked = [], 0
    for b, block in enumerate(blocks, 1):
        at = 0
        for frag in fragments(block):
            checked += 1
            end = find(out, frag, at)
            if end is None:
                missing.append((b, frag))
            else:
                at = end
    if missing:
        for b, frag in missing:
            print(f"check-tour: block {b}: not in the demo's output (or out of order):", file=sys.stderr)
            for line in frag:
                print(f"    {line}", file=sys.stderr)
        print(f"check-tour: {len(missing)} of {checked} fragments of the README's tour differ from the demo; "
              "rerun scripts/demo.sh and copy its output into the README", file=sys.stderr)
        sys.exit(1)
    print(f"README tour ok ({len(blocks)} blocks, {checked} fragments found in the demo's output)")


if __name__ == "__main__":
    main()
