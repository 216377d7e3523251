"""Writes a MONAI-bundle-style SwinUNETR checkpoint with torch.save: the tensor
names and shapes of safetensors files (a fixture of the same architecture),
the output head resized to --out-channels, random values from --seed (Swin's
relative_position_index buffers computed, int64), keys
prefixed as DataParallel saves them, either plain or under "state_dict".

usage: make_bundle_checkpoint.py OUT.pt --like A.safetensors [B.safetensors ...]
         [--out-channels 14] [--prefix module.] [--wrap state_dict|none] [--seed 0]
"""
import argparse
import collections
import json
import struct

import torch

DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16, "I64": torch.int64}


def header(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        h = json.loads(f.read(n))
    h.pop("__metadata__", None)
    return h


def relative_position_index(n):
    """Swin's index of a window of n**3 voxels (MONAI WindowAttention, 3-D), int64 as MONAI saves it."""
    w = round(n ** (1 / 3))
    coords = torch.stack(torch.meshgrid(torch.arange(w), torch.arange(w), torch.arange(w), indexing="ij")).flatten(1)
    rel = (coords[:, :, None] - coords[:, None, :]).permute(1, 2, 0) + (w - 1)
    return rel[:, :, 0] * (2 * w - 1) ** 2 + rel[:, :, 1] * (2 * w - 1) + rel[:, :, 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--like", nargs="+", required=True)
    ap.add_argument("--out-channels", type=int, default=14)
    ap.add_argument("--prefix", default="module.")
    ap.add_argument("--wrap", choices=["state_dict", "none"], default="state_dict")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    gen = torch.Generator().manual_seed(a.seed)
    sd = collections.OrderedDict()
    entries = sorted((k, v) for path in a.like for k, v in header(path).items())
    for name, info in entries:
        shape = list(info["shape"])
        if name.startswith("out."):  # UnetOutBlock: [out_channels, feature_size, 1, 1, 1] and [out_channels]
            shape[0] = a.out_channels
        dtype = DTYPES[info["dtype"]]
        if name.endswith("relative_position_index"):  # a buffer of fixed values, not weights
            sd[a.prefix + name] = relative_position_index(shape[0])
            continue
        if dtype.is_floating_point:
            t = torch.randn(shape, generator=gen) * 0.05
        else:
            t = torch.randint(0, 8, shape, generator=gen)
        sd[a.prefix + name] = t.to(dtype)
    torch.save({"state_dict": sd, "epoch": 1} if a.wrap == "state_dict" else sd, a.out)


if __name__ == "__main__":
    main()
