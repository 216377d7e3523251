"""Makes tests/cli/data/monai_recipe_fs12_labels.nii.gz, the labels MONAI 1.5's own
pipeline gives with the BTCV bundle's recipe (bench/segment_vs_monai.py's monai_segment:
Orientation, Spacing, ScaleIntensityRange, sliding window, softmax, Invertd, argmax) for the
swin_unetr_fs12 fixture's weights on `tessera make-samples --only ct --ct-size 48 40 16`'s CT.
cli_segment_recipe checks `tessera segment` against it. Needs MONAI, nibabel and einops:
  PYTHONPATH=.carry/pylib python3 tests/cli/make_monai_reference.py TESSERA_BINARY
"""
import json
import pathlib
import shutil
import struct
import subprocess
import sys
import tempfile
import types

import numpy as np
import torch

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
from segment_vs_monai import monai_segment  # noqa: E402

FIX = ROOT.parent / "shared/fixtures"
OUT = ROOT / "tests/cli/data/monai_recipe_fs12_labels.nii.gz"


def read_safetensors(path):
    raw = pathlib.Path(path).read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    header.pop("__metadata__", None)
    out = {}
    for name, info in header.items():
        assert info["dtype"] == "F32", (name, info["dtype"])
        lo, hi = info["data_offsets"]
        out[name] = torch.from_numpy(np.frombuffer(raw[8 + n + lo:8 + n + hi], dtype=np.float32).reshape(info["shape"]).copy())
    return out


def main():
    tessera = sys.argv[1]
    work = pathlib.Path(tempfile.mkdtemp())
    try:
        state = {}
        for shard in sorted(FIX.glob("swin_unetr_fs12_weights-*of2.safetensors")):
            state.update(read_safetensors(shard))
        state = {k: v.long() if k.endswith("relative_position_index") else v for k, v in state.items()}
        torch.save(state, work / "fs12.pt")
        subprocess.run([tessera, "make-samples", str(work / "s"), "--only", "ct", "--ct-size", "48", "40", "16"], check=True,
                       stdout=subprocess.DEVNULL)
        recipe = types.SimpleNamespace(feature_size=12, roi=[96, 96, 96], sw_batch=4, overlap=0.5, mode="constant")
        OUT.parent.mkdir(parents=True, exist_ok=True)
        r = monai_segment(work / "s/ct_phantom.nii.gz", work / "labels.nii.gz", work / "fs12.pt", recipe, torch.device("cpu"), "fp32")
        shutil.copy(work / "labels.nii.gz", OUT)
        print(f"{OUT}: labels {np.bincount(r['labels'].ravel()).tolist()}")
    finally:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
