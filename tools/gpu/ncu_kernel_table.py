#!/usr/bin/env python3
"""Per-kernel GPU time of several programs, side by side, from Nsight Compute CSV
(`ncu --metrics gpu__time_duration.sum --csv --print-units base PROGRAM > FILE.csv`):
launches, total and mean microseconds per kernel name, the largest first. Used by
tools/gpu/gpu_check.sh (step vit-kernels) to find where the C++ ViT and the same
model in plain PyTorch spend different time.

  tools/gpu/ncu_kernel_table.py LABEL=FILE.csv [LABEL=FILE.csv ...] [--top 40]
"""
import argparse
import csv
import sys
from collections import defaultdict


def kernel_times(path):
    """{kernel name: [launches, total ns]} from one ncu CSV (other lines ignored)."""
    with open(path, newline="", errors="replace") as f:
        lines = [line for line in f if line.startswith('"')]
    times = defaultdict(lambda: [0, 0.0])
    for row in csv.DictReader(lines):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        value = float(row["Metric Value"].replace(",", ""))
        unit = row.get("Metric Unit", "nsecond")
        scale = {"nsecond": 1.0, "ns": 1.0, "usecond": 1e3, "us": 1e3, "msecond": 1e6, "ms": 1e6}.get(unit)
        if scale is None:
            sys.exit(f"{path}: unknown time unit {unit!r}")
        entry = times[row["Kernel Name"]]
        entry[0] += 1
        entry[1] += value * scale
    if not times:
        sys.exit(f"{path}: no gpu__time_duration.sum rows (did ncu run?)")
    return times


def short(name, width=90):
    return name if len(name) <= width else name[: width - 3] + "..."


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("runs", nargs="+", help="LABEL=FILE.csv")
    ap.add_argument("--top", type=int, default=40)
    args = ap.parse_args()
    runs = []
    for spec in args.runs:
        label, _, path = spec.partition("=")
        if not path:
            sys.exit(f"expected LABEL=FILE.csv, got {spec!r}")
        runs.append((label, kernel_times(path)))
    names = set().union(*(t.keys() for _, t in runs))
    order = sorted(names, key=lambda n: -max(t.get(n, [0, 0.0])[1] for _, t in runs))
    head = " | ".join(f"{label} launches | {label} total us | {label} mean us" for label, _ in runs)
    print(f"| kernel | {head} |")
    print("|---|" + "---|" * (3 * len(runs)))
    for n in order[: args.top]:
        cells = []
        for _, t in runs:
            c, ns = t.get(n, [0, 0.0])
            cells += [str(c), f"{ns / 1e3:.0f}", f"{ns / 1e3 / c:.1f}" if c else "—"]
        print(f"| {short(n)} | " + " | ".join(cells) + " |")
    print()
    for label, t in runs:
        total = sum(v[1] for v in t.values()) / 1e3
        print(f"{label}: {sum(v[0] for v in t.values())} launches, {total:.0f} us of kernels in all")


if __name__ == "__main__":
    main()
