#!/usr/bin/env python3
"""The Markdown table of tools/gpu/gpu_apps.sh from its runs (one JSON object a line).

  apps_table.py RUNS.jsonl --device cpu|cuda --machine TEXT [--json ALL.json]

Wall time is the whole process (LibTorch loading and CUDA start-up included); "in command" and
the throughput come from the command's --json "run" (from its start to its outputs written).
Peak GPU memory is LibTorch's caching-allocator peak of allocated bytes (tensors only).
"""
import argparse
import datetime
import json
import os

UNITS = {"segment": ("voxels", "voxels/s"), "embed-wsi": ("tiles", "tiles/s"), "video": ("video_seconds", "video-s/s")}


def size_and_result(r, s):
    """What went in and what came out, in the command's own terms."""
    if r["command"] == "segment":
        x, y, z = s["size"]
        dice = [l["dice"] for l in s["labels"] if l["label"] > 0 and l.get("dice") is not None]
        found = sum(1 for l in s["labels"] if l["label"] > 0 and l["voxels"] > 0)
        result = f"mean Dice {sum(dice) / len(dice):.3f}" if dice else f"{found} labels found"
        return f"{x}×{y}×{z} voxels", result
    if r["command"] == "embed-wsi":
        done = [x for x in s["slides"] if x.get("status") == "done"]
        tiles = sum(x["tiles"] for x in done)
        return f"{tiles} tiles", f"{tiles} × {done[0]['dim'] if done else 0} features"
    return f"{s['run']['video_seconds']:.1f} s of video", f"{s['seconds']} seconds embedded, {s['clips']} clips"


def row(r):
    s = r["summary"]
    name = f"`{r['command']}` {os.path.basename(r['input'])}"
    if r["exit"] != 0 or not s or "run" not in s:
        return f"| {name} | | | | {r['wall_s']:.1f} | failed (exit {r['exit']}) | | | |"
    run = s["run"]
    unit, label = UNITS[r["command"]]
    size, result = size_and_result(r, s)
    peak = run.get("peak_gpu_bytes")
    peak = f"{peak / 2**30:.2f} GiB" if peak is not None else "–"
    return (f"| {name} | {size} | {run['device']} | {run['precision']} | {r['wall_s']:.1f} | {run['seconds']:.2f} | "
            f"{run[unit + '_per_s']:,.0f} {label} | {peak} | {result} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs")
    ap.add_argument("--device", required=True)
    ap.add_argument("--machine", required=True)
    ap.add_argument("--json")
    a = ap.parse_args()
    runs = [json.loads(line) for line in open(a.runs) if line.strip()]
    if a.json:
        json.dump(runs, open(a.json, "w"), indent=1)
    print(f"Apps end to end, --device {a.device}, {a.machine}, {datetime.date.today().isoformat()}\n")
    print("| command, input | size | device | precision | wall s | in command s | throughput | peak GPU memory | result |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in runs:
        print(row(r))


if __name__ == "__main__":
    main()
