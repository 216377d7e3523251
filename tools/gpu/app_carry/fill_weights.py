#!/usr/bin/env python3
"""Random weights with a fixture's names and shapes, so a run needs only the fixture's header.

The ViT-tiny and VideoMAE-tiny fixtures (../shared/fixtures) are randomly initialised networks;
`embed-wsi` and `video` speed does not depend on the values. Their 19 MB do not fit in a device
call beside the rest, their headers (names, shapes) do. Standard library only.

  fill_weights.py --header-of FIXTURE.safetensors > HEADER.json   the weights' entries of a fixture
  fill_weights.py --fill HEADER.json --out W.safetensors           N(0, 0.02) float32 values, seed 0
"""
import argparse
import array
import json
import os
import random
import struct
import sys


def header_of(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        h = json.loads(f.read(n))
    # Only the network: the fixtures also hold reference inputs and outputs.
    return {k: {"dtype": v["dtype"], "shape": v["shape"]} for k, v in h.items() if k.startswith("weights.")}


def fill(header, out):
    rng = random.Random(0)
    meta, blobs, offset = {}, [], 0
    for name in sorted(header):
        entry = header[name]
        if entry["dtype"] != "F32":
            raise SystemExit(f"fill_weights: {name}: only F32 tensors, got {entry['dtype']}")
        count = 1
        for d in entry["shape"]:
            count *= d
        blob = array.array("f", (rng.gauss(0.0, 0.02) for _ in range(count))).tobytes()
        meta[name] = {"dtype": "F32", "shape": entry["shape"], "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(meta, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the data starts 8-byte aligned
    with open(out + ".tmp", "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for b in blobs:
            f.write(b)
    os.replace(out + ".tmp", out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--header-of")
    ap.add_argument("--fill")
    ap.add_argument("--out")
    a = ap.parse_args()
    if a.header_of:
        json.dump(header_of(a.header_of), sys.stdout, indent=1)
        print()
    elif a.fill and a.out:
        fill(json.load(open(a.fill)), a.out)
    else:
        ap.error("give --header-of FIXTURE, or --fill HEADER --out FILE")


if __name__ == "__main__":
    main()
