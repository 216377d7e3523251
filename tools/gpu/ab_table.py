#!/usr/bin/env python3
"""Per-row A / B of bench/attention_cuda_bench.py tables: Tessera's ms in each pass of each side,
and the ratio of the sides' medians (after / before; > 1: after is slower). Rows off by more than
the tolerance are marked; cuDNN's ms of the same calls show how far the GPU itself moved.

  tools/gpu/ab_table.py before=run1.md after=run1.md before=run2.md after=run2.md [--tol 0.02]
"""
import argparse
import re
import statistics
import sys


def rows(path):
    """{(case, pass): (tessera ms, cudnn ms or None)} of one table."""
    out = {}
    for line in open(path):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 4 or cells[0] in ("case", "") or cells[0].startswith("---"):
            continue
        try:
            ms = float(cells[2])
        except ValueError:
            continue  # a failed case
        m = re.search(r"\(([\d.]+) ms\)", cells[7]) if len(cells) > 7 else None  # the cudnn/tessera cell
        cudnn = float(m.group(1)) if m else None
        out[(cells[0], cells[1])] = (ms, cudnn)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("runs", nargs="+", help="SIDE=FILE, SIDE before or after")
    ap.add_argument("--tol", type=float, default=0.02)
    a = ap.parse_args()
    sides = {"before": [], "after": []}
    for r in a.runs:
        side, _, path = r.partition("=")
        if side not in sides or not path:
            sys.exit(f"ab_table.py: '{r}': expected before=FILE or after=FILE")
        sides[side].append(rows(path))
    if not sides["before"] or not sides["after"]:
        sys.exit("ab_table.py: needs at least one table of each side")
    keys = [k for k in sides["after"][0] if all(k in t for s in sides.values() for t in s)]
    print("| case | pass | before ms | after ms | after / before | cuDNN ms before / after |")
    print("|---|---|---|---|---|---|")
    worst = 0.0
    for k in keys:
        b = [t[k][0] for t in sides["before"]]
        f = [t[k][0] for t in sides["after"]]
        ratio = statistics.median(f) / statistics.median(b)
        worst = max(worst, abs(ratio - 1))
        cb = [t[k][1] for t in sides["before"] if t[k][1]]
        ca = [t[k][1] for t in sides["after"] if t[k][1]]
        cud = f"{statistics.median(cb):.3f} / {statistics.median(ca):.3f}" if cb and ca else "—"
        mark = " **" if abs(ratio - 1) > a.tol else ""
        print(f"| {k[0]} | {k[1]} | {' / '.join(f'{x:.3f}' for x in b)} | {' / '.join(f'{x:.3f}' for x in f)} "
              f"| {ratio:.3f}{mark} | {cud} |")
    print(f"\n{len(keys)} rows; largest |after / before - 1| = {worst:.3f} (tolerance {a.tol}; ** marks rows beyond it)")


if __name__ == "__main__":
    main()
