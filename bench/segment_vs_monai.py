#!/usr/bin/env python3
"""`tessera segment` against MONAI's own pipeline: one CT, the same GPU, the same
recipe, the same random fs48 14-class BTCV SwinUNETR weights.

In one call:
  1. writes MONAI SwinUNETR(in_channels=1, out_channels=14, feature_size=48, use_v2=False)'s
     state dict (seed 0) to WORK/model.pt, which both load;
  2. takes --ct, or makes a clinical-size phantom CT with `tessera make-samples --ct-size`
     (default 512x512x300);
  3. MONAI, each run in a fresh Python process as a user starts it: LoadImage → EnsureChannelFirst → Orientation(RAS) → Spacing(pixdim,
     bilinear) → ScaleIntensityRange(-175, 250 → 0, 1, clip) → sliding_window_inference(roi 96³,
     overlap, mode, sw_batch) under autocast → softmax → Invertd (bilinear) → argmax → save
     NIfTI; the process's wall time (interpreter, torch and MONAI imports, CUDA start-up, weights,
     file read and written), the same run inside the process (weights loaded to file written),
     the sliding window alone, and the peak GPU memory; first in fp32, whose labels are the
     reference, then in each --precision (bf16 / fp16 autocast);
  4. `tessera segment` with the same recipe (configs/swin_unetr_btcv.yaml's inference section,
     --mode and --precision as here) as a subprocess, timed the same way (process wall time;
     its --json gives the sliding window's time, the seconds of its stages and peak GPU memory);
  5. the fraction of voxels whose label equals MONAI fp32's, for each run;
  6. one Markdown table (date, commit, device, command), printed and written to --out.

MONAI 1.5's PatchMerging is the fixed one, so tessera runs the BTCV config with `downsample:
merging` (its merging_legacy is for checkpoints trained with MONAI <= 1.4): both compute the
same function. MONAI reads, reorients and writes NIfTI through nibabel; MONAI and nibabel
come from .carry/pylib (tools/gpu/make_monai_carry.sh), put on PYTHONPATH.

GPU machine: `tools/gpu/gpu_apps.sh --segment-vs-monai` builds tessera there and runs this.
Here, on the CPU, a tiny case to show it works (einops, which MONAI's SwinUNETR imports, must
be importable):
  PYTHONPATH=.carry/pylib python3 bench/segment_vs_monai.py --device cpu --precision fp32 \
      --feature-size 12 --ct-size 96x96x48 --out /tmp/seg_bench.md
"""
import argparse
import datetime
import json
import os
import pathlib
import platform
import shlex
import subprocess
import sys
import time

import numpy as np
import torch

# Debian 12's nibabel 5.0 (what .carry/pylib holds) reads two names numpy 2 removed.
if not hasattr(np, "sctypes"):
    np.sctypes = {"int": [np.int8, np.int16, np.int32, np.int64], "uint": [np.uint8, np.uint16, np.uint32, np.uint64],
                  "float": [np.float16, np.float32, np.float64, np.longdouble],
                  "complex": [np.complex64, np.complex128, np.clongdouble], "others": [bool, object, bytes, str, np.void]}
if not hasattr(np, "maximum_sctype"):
    np.maximum_sctype = lambda t: {"f": np.longdouble, "c": np.clongdouble, "i": np.int64, "u": np.uint64}.get(np.dtype(t).kind, t)

try:  # numpy 2 removed numpy.compat, whose asstr nibabel 5.0 imports
    import numpy.compat.py3k  # noqa: F401
except ImportError:
    import types
    _py3k = types.ModuleType("numpy.compat.py3k")
    _py3k.asstr = lambda s: s.decode("latin1") if isinstance(s, bytes) else str(s)
    _compat = types.ModuleType("numpy.compat")
    _compat.py3k = _py3k
    sys.modules["numpy.compat"], sys.modules["numpy.compat.py3k"] = _compat, _py3k

import monai  # noqa: E402
import nibabel  # noqa: E402
from monai.inferers import sliding_window_inference  # noqa: E402
from monai.networks.nets import SwinUNETR  # noqa: E402
from monai.transforms import (Activationsd, AsDiscreted, Compose, EnsureChannelFirstd, EnsureTyped,  # noqa: E402
                              Invertd, LoadImaged, Orientationd, SaveImage, ScaleIntensityRanged, Spacingd)

ROOT = pathlib.Path(__file__).resolve().parent.parent

PIXDIM = (1.5, 1.5, 2.0)


def sync(dev):
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def make_net(fs, out_channels=14):
    return SwinUNETR(in_channels=1, out_channels=out_channels, feature_size=fs, use_v2=False)


def monai_segment(ct, out_path, weights, a, dev, precision):
    """MONAI's pipeline on one file; returns timings, peak memory and the labels on the input's voxels."""
    if dev.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(dev)
    sync(dev)
    t0 = time.perf_counter()
    state = torch.load(weights, map_location="cpu")
    net = make_net(a.feature_size, state["out.conv.conv.bias"].shape[0])
    net.load_state_dict(state)
    net = net.to(dev).eval()
    pre = Compose([
        LoadImaged(keys="image", reader="NibabelReader", image_only=False),
        EnsureChannelFirstd(keys="image"),
        Orientationd(keys="image", axcodes="RAS"),
        Spacingd(keys="image", pixdim=PIXDIM, mode="bilinear"),
        ScaleIntensityRanged(keys="image", a_min=-175, a_max=250, b_min=0.0, b_max=1.0, clip=True),
        EnsureTyped(keys="image"),
    ])
    post = Compose([
        Activationsd(keys="pred", softmax=True),
        Invertd(keys="pred", transform=pre, orig_keys="image", nearest_interp=False, to_tensor=True),
        AsDiscreted(keys="pred", argmax=True),
    ])
    data = pre({"image": str(ct)})
    image = data["image"].unsqueeze(0).to(dev)
    sync(dev)
    t1 = time.perf_counter()
    half = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
    with torch.no_grad(), torch.autocast(device_type=dev.type, dtype=half or torch.bfloat16, enabled=half is not None):
        logits = sliding_window_inference(image, a.roi, a.sw_batch, net, overlap=a.overlap, mode=a.mode)
    sync(dev)
    model_s = time.perf_counter() - t1
    data["pred"] = logits[0].float()
    with torch.no_grad():
        data = post(data)
    pred = data["pred"]
    labels = pred[0].to(torch.uint8).cpu().numpy()
    SaveImage(output_dir=str(out_path.parent), output_postfix="", output_ext=".nii.gz", separate_folder=False,
              output_dtype=np.uint8, resample=False, print_log=False)(pred.to(torch.uint8).cpu(),
                                                                      filename=str(out_path).removesuffix(".nii.gz"))
    sync(dev)
    total_s = time.perf_counter() - t0
    peak = torch.cuda.max_memory_allocated(dev) if dev.type == "cuda" else None
    return {"total_s": total_s, "model_s": model_s, "peak_bytes": peak, "labels": labels}


def monai_process(ct, out_path, weights, a, precision):
    """monai_segment in a fresh Python process, as a user runs MONAI: returns its wall time beside the in-process one."""
    stats = out_path.parent / (out_path.name.removesuffix(".nii.gz") + ".json")
    cmd = [sys.executable, str(pathlib.Path(__file__).resolve()), "--monai-one", precision, "--ct", str(ct),
           "--monai-out", str(out_path), "--monai-weights", str(weights), "--out", str(stats), "--device", a.device,
           "--feature-size", str(a.feature_size), "--roi", *map(str, a.roi), "--overlap", str(a.overlap),
           "--mode", a.mode, "--sw-batch", str(a.sw_batch)]
    t0 = time.perf_counter()
    res = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if res.returncode != 0:
        sys.exit(f"segment_vs_monai: MONAI {precision} failed (exit {res.returncode}): {res.stderr.strip()[-2000:]}")
    r = json.loads(stats.read_text())
    r.update(in_process_s=r.pop("total_s"), total_s=wall, labels=np.asarray(nibabel.load(str(out_path)).dataobj))
    return r


def tessera_segment(ct, out_path, weights, config, a, precision):
    cmd = [a.tessera, "segment", str(ct), "-o", str(out_path), "--model", str(config), "--weights", str(weights),
           "--device", a.device, "--precision", precision, "--mode", a.mode, "--overlap", str(a.overlap),
           "--sw-batch", str(a.sw_batch), "--roi", *map(str, a.roi), "--json", "-q"]
    t0 = time.perf_counter()
    res = subprocess.run(cmd, capture_output=True, text=True, env=tessera_env(a))
    wall = time.perf_counter() - t0
    if res.returncode != 0:
        sys.exit(f"segment_vs_monai: tessera failed (exit {res.returncode}): {res.stderr.strip()}")
    run = json.loads(res.stdout)["run"]
    labels = np.asarray(nibabel.load(str(out_path)).dataobj)
    stages = run.get("stage_seconds", {})
    return {"total_s": wall, "in_process_s": sum(stages.values()) if stages else None,
            "model_s": run.get("sliding_window_seconds"), "peak_bytes": run.get("peak_gpu_bytes"),
            "labels": labels, "command": cmd, "stages": stages}


def tessera_env(a):
    """The environment of tessera's processes: --tessera-library-path on LD_LIBRARY_PATH for them alone."""
    env = dict(os.environ)
    if a.tessera_library_path:
        env["LD_LIBRARY_PATH"] = a.tessera_library_path
    return env


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tessera", default=str(ROOT / "build/apps/tessera"), help="the tessera binary")
    ap.add_argument("--tessera-library-path", default="", help="LD_LIBRARY_PATH for the tessera processes only")
    ap.add_argument("--ct", help="a CT volume (NIfTI); default: a generated phantom of --ct-size")
    ap.add_argument("--ct-size", default="512x512x300", help="size of the generated CT, XxYxZ")
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--precision", default="bf16",
                    help="MONAI's autocast and tessera's: bf16, fp16 or fp32, or several with commas (bf16,fp16); "
                         "the first is the one the speed-up line compares; fp32 always runs as the reference")
    ap.add_argument("--feature-size", type=int, default=48)
    ap.add_argument("--roi", type=int, nargs=3, default=[96, 96, 96])
    ap.add_argument("--overlap", type=float, default=0.5)
    ap.add_argument("--mode", default="gaussian", choices=["gaussian", "constant"])
    ap.add_argument("--sw-batch", type=int, default=4)
    ap.add_argument("--work", default="/tmp/segment_vs_monai", help="scratch folder")
    ap.add_argument("--out", required=True, help="Markdown table to write")
    ap.add_argument("--monai-one", choices=["bf16", "fp16", "fp32"], help=argparse.SUPPRESS)  # the child of monai_process
    ap.add_argument("--monai-out", help=argparse.SUPPRESS)
    ap.add_argument("--monai-weights", help=argparse.SUPPRESS)
    a = ap.parse_args()
    dev = torch.device(a.device)
    if a.monai_one:
        r = monai_segment(pathlib.Path(a.ct), pathlib.Path(a.monai_out), a.monai_weights, a, dev, a.monai_one)
        pathlib.Path(a.out).write_text(json.dumps({k: v for k, v in r.items() if k != "labels"}))
        return
    if dev.type == "cuda" and not torch.cuda.is_available():
        sys.exit("segment_vs_monai: --device cuda: no CUDA device")
    if not os.access(a.tessera, os.X_OK):
        sys.exit(f"segment_vs_monai: {a.tessera}: not an executable tessera binary")
    work = pathlib.Path(a.work)
    work.mkdir(parents=True, exist_ok=True)

    torch.manual_seed(0)
    weights = work / "model.pt"
    torch.save(make_net(a.feature_size).state_dict(), weights)
    config = work / "btcv_bench.yaml"
    text = (ROOT / "configs/swin_unetr_btcv.yaml").read_text()
    text = text.replace("downsample: merging_legacy", "downsample: merging")
    text = text.replace("feature_size: 48", f"feature_size: {a.feature_size}")
    config.write_text(text)
    if a.ct:
        ct = pathlib.Path(a.ct)
    else:
        size = a.ct_size.split("x")
        samples = work / "samples"
        subprocess.run([a.tessera, "make-samples", str(samples), "--only", "ct", "--ct-size", *size], check=True,
                       stdout=subprocess.DEVNULL, env=tessera_env(a))
        ct = samples / "ct_phantom.nii.gz"
    shape = nibabel.load(str(ct)).shape

    precisions = a.precision.split(",")
    for p in precisions:
        if p not in ("bf16", "fp16", "fp32"):
            sys.exit(f"segment_vs_monai: --precision {p}: expected bf16, fp16 or fp32")
    # MONAI fp32 first: the reference every run's labels are compared with.
    runs = [("MONAI 1.5", "fp32", monai_process(ct, work / "monai_fp32_mask.nii.gz", weights, a, "fp32"))]
    ref = runs[0][2]
    for p in precisions:
        if p != "fp32":
            runs.append(("MONAI 1.5", p, monai_process(ct, work / f"monai_{p}_mask.nii.gz", weights, a, p)))
    # With random weights many voxels are near ties that half precision flips (MONAI's own runs show how many):
    # tessera fp32 shows the match.
    for p in precisions + ([] if "fp32" in precisions else ["fp32"]):
        runs.append(("tessera segment", p, tessera_segment(ct, work / f"tessera_{p}_mask.nii.gz", weights, config, a, p)))

    gpu = torch.cuda.get_device_name(dev) if dev.type == "cuda" else f"CPU ({platform.processor() or platform.machine()}, {os.cpu_count()} threads)"
    try:
        commit = subprocess.run(["git", "-C", str(ROOT), "describe", "--always", "--dirty"], capture_output=True, text=True).stdout.strip()
    except OSError:
        commit = "?"
    fmt_gib = lambda b: "n/a" if b is None else f"{b / 2**30:.2f}"
    lines = [
        f"Segmentation of one CT ({'x'.join(map(str, shape))} voxels, {ct.name}): SwinUNETR fs{a.feature_size}, 14 classes, "
        f"random weights (seed 0); Orientation RAS, Spacing {PIXDIM} bilinear, window -175..250, sliding window "
        f"roi {'x'.join(map(str, a.roi))} overlap {a.overlap} {a.mode} sw_batch {a.sw_batch}, softmax, Invertd bilinear, argmax.",
        "",
        f"{datetime.date.today().isoformat()}, commit {commit}, {gpu}, torch {torch.__version__}, "
        f"MONAI {monai.__version__}, nibabel {nibabel.__version__}; command: `python3 bench/segment_vs_monai.py "
        f"{' '.join(shlex.quote(x) for x in sys.argv[1:])}`",
        "",
        "Whole run: the process's wall time, as a user waits for it (MONAI's includes the interpreter and its imports). "
        "In process: MONAI from loading the weights to the file written; tessera the sum of its stages.",
        "",
        "| pipeline | precision | whole run (s) | in process (s) | sliding window (s) | peak GPU (GiB) | voxels as MONAI fp32 |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, prec, r in runs:
        same = float((r["labels"] == ref["labels"]).mean()) if r["labels"].shape == ref["labels"].shape else float("nan")
        fmt_s = lambda v: "n/a" if v is None else f"{v:.2f}"
        lines.append(f"| {name} | {prec} | {r['total_s']:.2f} | {fmt_s(r.get('in_process_s'))} | {fmt_s(r['model_s'])} | "
                     f"{fmt_gib(r['peak_bytes'])} | {same:.6f} |")
    lines.append("")
    for p in precisions:
        mono = next(r for n, q, r in runs if n.startswith("MONAI") and q == p)
        t = next(r for n, q, r in runs if n.startswith("tessera") and q == p)
        window = f"; sliding window: {mono['model_s'] / t['model_s']:.2f}x" if t["model_s"] else ""
        inside = (f"; in process: {mono['in_process_s'] / t['in_process_s']:.2f}x" if t.get("in_process_s") else "")
        lines.append(f"tessera / MONAI ({p}) whole-run speed-up: {mono['total_s'] / t['total_s']:.2f}x{inside}{window}")
    for name, prec, r in runs:
        if r.get("stages"):
            lines.append(f"{name} {prec}, seconds per stage: " + ", ".join(f"{k} {v:.2f}" for k, v in r["stages"].items()))
    table = "\n".join(lines) + "\n"
    pathlib.Path(a.out).write_text(table)
    print(table)


if __name__ == "__main__":
    main()
