#!/usr/bin/env python3
"""`tessera video` against the Python pipeline a user would write, on hours of 1080p footage, one GPU, one call.

For each length in --minutes (default 10 and 60):
  1. a generated endoscopy-like video, 1920x1080, 30 fps, H.264 (`tessera make-samples --only video
     --video-size 1920 1080 --video-seconds S --video-fps 30 --video-codec libx264`);
  2. `tessera video VIDEO --model WORK/videomae_base --fps 16 --device cuda --precision bf16 --decode D
     [--decode-readers R]` for each arm D[:R] of --decode (cuda: NVDEC, cpu: FFmpeg's threads; R decoders on
     keyframe-aligned stretches at once, default tessera's own choice): a Hugging Face
     VideoMAE-B folder (random weights, seed 0, transformers' own save_pretrained), one 16-frame clip per
     second; the process's wall time, its peak resident memory (wait4) and its peak GPU memory (--json);
  3. the Python pipeline, same clips, same weights: OpenCV decodes (its FFmpeg backend, threaded; PyAV, the
     usual choice, is not on the GPU machine) on a thread of its own feeding a bounded queue, every frame
     grabbed, the frames at k/16 s retrieved, converted to RGB, resized (short side 224, bilinear) and
     centre-cropped; batches of --batch clips through transformers' VideoMAEModel in bf16 (SDPA attention),
     the clip embedding the mean of its tokens; wall time, peak resident memory (getrusage) and GPU memory;
  4. per-second cosine between the two pipelines' embeddings (they resize with different libraries);
then one Markdown table (date, commit, GPU, command): throughput as video-hours per GPU-hour and the
speed-up, printed and written to --out.

GPU machine (the CLI built against the carried io prefix, see tools/gpu/README.md):
  python3 bench/video_vs_python.py --tessera BUILD/apps/tessera --tessera-library-path LIBS --work /tmp/vvp \\
      --out $OUT/video_vs_python.md
"""
import argparse
import datetime
import json
import os
import pathlib
import queue
import resource
import shlex
import subprocess
import sys
import threading
import time

import numpy as np
import torch

ROOT = pathlib.Path(__file__).resolve().parent.parent
MEAN = np.array([0.485, 0.456, 0.406], np.float32)  # ImageNet's, as VideoMAEImageProcessor's
STD = np.array([0.229, 0.224, 0.225], np.float32)


def tessera_env(a):
    env = dict(os.environ)
    if a.tessera_library_path:
        env["LD_LIBRARY_PATH"] = a.tessera_library_path + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    return env


def make_model_folder(path):
    """A random VideoMAE-B (transformers' defaults are videomae-base's sizes) saved as the Hub lays it out."""
    from transformers import VideoMAEConfig, VideoMAEModel
    torch.manual_seed(0)
    model = VideoMAEModel(VideoMAEConfig(use_mean_pooling=True))
    model.save_pretrained(str(path), safe_serialization=True)
    return model


def make_video(a, minutes, work):
    d = work / f"video_{minutes}min"
    video = d / "endoscopy.mp4"
    if not video.exists():
        t0 = time.perf_counter()
        subprocess.run([a.tessera, "make-samples", str(d), "--only", "video", "--video-size", "1920", "1080",
                        "--video-seconds", str(minutes * 60), "--video-fps", "30", "--video-codec", "libx264"],
                       check=True, stdout=subprocess.DEVNULL, env=tessera_env(a))
        print(f"{minutes} min video made in {time.perf_counter() - t0:.1f} s ({video.stat().st_size / 2**20:.0f} MiB)",
              flush=True)
    return video


def run_tessera(a, video, folder, out_dir, arm):
    decode, _, readers = arm.partition(":")
    cmd = [a.tessera, "video", str(video), "-o", str(out_dir), "--model", str(folder), "--fps", str(a.fps),
           "--device", "cuda", "--precision", "bf16", "--decode", decode, "--json", "-q"]
    if readers:
        cmd += ["--decode-readers", readers]
    subprocess.run(["rm", "-rf", str(out_dir)], check=True)
    log = out_dir.with_suffix(".log")
    with open(log.with_suffix(".json"), "w+") as out, open(log, "w+") as err:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, env=tessera_env(a), stdout=out, stderr=err)
        _, status, usage = os.wait4(p.pid, 0)  # reaps it with its own rusage (peak resident memory)
        p.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - t0
        out.seek(0), err.seek(0)
        if p.returncode != 0:
            sys.exit(f"video_vs_python: tessera failed: {err.read().strip()[-2000:]}\n{shlex.join(cmd)}")
        summary = json.load(out)
        run = summary["run"]
        if summary.get("decoder") != decode:
            sys.exit(f"video_vs_python: tessera decoded on {summary.get('decoder')}, not {decode}: {err.read().strip()[-500:]}")
    from safetensors.torch import load_file
    emb = load_file(str(out_dir / f"{video.stem}_embeddings.safetensors"))
    return {"decode": decode, "readers": summary.get("decode_readers"), "wall_s": wall, "cpu_s": cpu_seconds(usage),
            "command_s": run["seconds"], "stages": run.get("stage_seconds", {}),
            "decoded": summary.get("frames_decoded"), "sampled": summary.get("frames_sampled"), "rss_gib": usage.ru_maxrss / 2**20,
            "gpu_gib": (run.get("peak_gpu_bytes") or 0) / 2**30, "seconds": emb["seconds"].long().tolist(),
            "emb": emb["embeddings"].float()}


def cpu_seconds(usage):
    """User + system CPU time of an rusage: how many cores a pipeline kept busy, times its wall time."""
    return usage.ru_utime + usage.ru_stime


def decode_clips(path, fps, frames, size, q, stop):
    """OpenCV's decoder: the frames at k / fps s (the first at or after each time), short side `size`,
    centre crop, RGB uint8, grouped `frames` to a clip; (second, clip) into q, None at the end."""
    import cv2
    cap = cv2.VideoCapture(str(path), cv2.CAP_FFMPEG)
    if not cap.isOpened():
        q.put(RuntimeError(f"{path}: OpenCV cannot open it"))
        return
    native = cap.get(cv2.CAP_PROP_FPS) or 30.0
    k, clip = 0, []
    while not stop.is_set() and cap.grab():
        t = cap.get(cv2.CAP_PROP_POS_MSEC) / 1000.0
        if t + 0.5 / native < k / fps:  # --fps at most the video's: each sample time takes the next frame
            continue
        k += 1
        ok, bgr = cap.retrieve()
        if not ok:
            break
        h, w = bgr.shape[:2]
        s = size / min(h, w)
        img = cv2.resize(bgr, (max(size, round(w * s)), max(size, round(h * s))), interpolation=cv2.INTER_LINEAR)
        y, x = (img.shape[0] - size) // 2, (img.shape[1] - size) // 2
        clip.append(cv2.cvtColor(img[y:y + size, x:x + size], cv2.COLOR_BGR2RGB))
        if len(clip) == frames:
            q.put((int((k - frames) // fps), np.stack(clip)))
            clip = []
    if clip:  # the last partial clip, padded by repeating its last frame (as tessera does)
        clip += [clip[-1]] * (frames - len(clip))
        q.put((int((k - 1) // fps), np.stack(clip)))
    q.put(None)


def run_python(a, video, model):
    """The Python pipeline; returns wall time, memory and the per-second embeddings."""
    dev = torch.device("cuda")
    torch.cuda.reset_peak_memory_stats(dev)
    mean = torch.tensor(MEAN, device=dev).view(1, 1, 3, 1, 1)
    std = torch.tensor(STD, device=dev).view(1, 1, 3, 1, 1)
    t0, cpu0 = time.perf_counter(), cpu_seconds(resource.getrusage(resource.RUSAGE_SELF))
    q, stop = queue.Queue(maxsize=4 * a.batch), threading.Event()
    th = threading.Thread(target=decode_clips, args=(video, a.fps, 16, 224, q, stop), daemon=True)
    th.start()
    seconds, embs, done = [], [], False
    with torch.inference_mode():
        while not done:
            batch = []
            while len(batch) < a.batch:
                item = q.get()
                if item is None:
                    done = True
                    break
                if isinstance(item, Exception):
                    raise item
                batch.append(item)
            if not batch:
                break
            x = torch.from_numpy(np.stack([c for _, c in batch])).to(dev, non_blocking=True)  # [B, T, H, W, 3] uint8
            x = ((x.permute(0, 1, 4, 2, 3).float() / 255 - mean) / std).to(torch.bfloat16)
            embs.append(model(pixel_values=x).last_hidden_state.mean(1).float().cpu())
            seconds += [s for s, _ in batch]
    stop.set()
    th.join()
    torch.cuda.synchronize(dev)
    wall = time.perf_counter() - t0
    cpu = cpu_seconds(resource.getrusage(resource.RUSAGE_SELF)) - cpu0
    return {"wall_s": wall, "cpu_s": cpu, "rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
            "gpu_gib": torch.cuda.max_memory_allocated(dev) / 2**30, "seconds": seconds, "emb": torch.cat(embs)}


def agreement(t, p):
    """Mean cosine of the two pipelines' embeddings over the seconds both have."""
    pi = {s: i for i, s in enumerate(p["seconds"])}
    pairs = [(i, pi[s]) for i, s in enumerate(t["seconds"]) if s in pi]
    if not pairs:
        return float("nan"), 0
    ti, pj = zip(*pairs)
    cos = torch.nn.functional.cosine_similarity(t["emb"][list(ti)], p["emb"][list(pj)], dim=1)
    return float(cos.mean()), len(pairs)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tessera", required=True, help="the tessera program")
    ap.add_argument("--tessera-library-path", default="", help="LD_LIBRARY_PATH for tessera (the carried io prefix)")
    ap.add_argument("--work", required=True, help="scratch folder (model, videos, outputs)")
    ap.add_argument("--out", required=True, help="the Markdown table")
    ap.add_argument("--minutes", default="10,60", help="video lengths, comma-separated")
    ap.add_argument("--fps", type=float, default=16, help="frames sampled per second (16: one clip per second)")
    ap.add_argument("--batch", type=int, default=8, help="clips per forward pass of the Python pipeline")
    ap.add_argument("--no-python", action="store_true", help="tessera only (memory over lengths)")
    ap.add_argument("--decode", default="cpu:1,cpu",
                    help="tessera's arms, comma-separated: --decode cuda (NVDEC) or cpu, each with :R for --decode-readers R")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("video_vs_python: no CUDA device")
    work = pathlib.Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    folder = work / "videomae_base"
    model = make_model_folder(folder)
    model = model.to("cuda", torch.bfloat16).eval()

    rows = []
    for minutes in [int(m) for m in a.minutes.split(",") if m]:
        video = make_video(a, minutes, work)
        ts = []
        for arm in [d for d in a.decode.split(",") if d]:
            ts.append(run_tessera(a, video, folder, work / f"out_{minutes}min_{arm.replace(':', '_')}", arm))
            print(f"{minutes} min: tessera --decode {arm} {ts[-1]['wall_s']:.1f} s", flush=True)
        p = None if a.no_python else run_python(a, video, model)
        if p:
            print(f"{minutes} min: python {p['wall_s']:.1f} s", flush=True)
        rows.append((minutes, ts, p))

    commit = subprocess.run(["git", "-C", str(ROOT), "describe", "--always", "--dirty"], capture_output=True, text=True).stdout.strip()
    gpu = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"], capture_output=True,
                         text=True).stdout.strip().splitlines()[0]
    import transformers
    try:
        import cv2
        opencv = cv2.__version__
    except ImportError:
        opencv = "absent"
    lines = [f"- When: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC. Commit: `{commit or 'unknown'}`.",
             f"- GPU: {gpu}; {os.cpu_count()} CPU threads; torch {torch.__version__}, transformers {transformers.__version__}, "
             f"OpenCV {opencv}.",
             f"- Command: `python3 bench/video_vs_python.py {shlex.join(sys.argv[1:])}`",
             f"- Video: generated 1920x1080 30 fps H.264; VideoMAE-B (random weights), {a.fps:g} frames/s sampled, 16-frame "
             f"clips, one per second, bf16. Python: OpenCV decode thread + transformers VideoMAEModel, batch {a.batch}.",
             "",
             f"- CPU s: user + system CPU time (cores busy = CPU s / wall s, of {os.cpu_count()}).",
             "",
             "| video | pipeline | wall s | CPU s | video-h per GPU-h | peak host GiB | peak GPU GiB | tessera / Python | cosine to Python (seconds) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for minutes, ts, p in rows:
        vs = minutes * 60
        for t in ts:
            speedup = f"{p['wall_s'] / t['wall_s']:.2f}x" if p else ""
            cos, n = agreement(t, p) if p else (float("nan"), 0)
            vs_python = f"{cos:.4f} ({n})" if p else ""
            lines.append(f"| {minutes} min | tessera video --decode {t['decode']} --decode-readers {t['readers']} | {t['wall_s']:.1f} | {t['cpu_s']:.0f} | {vs / t['wall_s']:.1f} | "
                         f"{t['rss_gib']:.2f} | {t['gpu_gib']:.2f} | {speedup} | {vs_python} |")
        if p:
            lines.append(f"| {minutes} min | OpenCV + transformers | {p['wall_s']:.1f} | {p['cpu_s']:.0f} | {vs / p['wall_s']:.1f} | "
                         f"{p['rss_gib']:.2f} | {p['gpu_gib']:.2f} | | |")
    lines.append("")
    for minutes, ts, _ in rows:
        for t in ts:
            stages = ", ".join(f"{k} {v:.2f}" for k, v in t["stages"].items())
            lines.append(f"- {minutes} min, --decode {t['decode']} --decode-readers {t['readers']}: {t['command_s']:.2f} s in the "
                         f"command of {t['wall_s']:.2f} s wall; seconds per stage (load_model on its own thread): {stages}; "
                         f"{t['decoded']} frames decoded for {t['sampled']} sampled.")
    for minutes, ts, _ in rows:
        if len(ts) == 2:
            cos, n = agreement(ts[0], ts[1])
            lines.append(f"\n{minutes} min: per-second cosine between tessera's --decode {ts[0]['decode']} "
                         f"--decode-readers {ts[0]['readers']} and {ts[1]['decode']} --decode-readers {ts[1]['readers']}: "
                         f"{cos:.6f} ({n} seconds).")
    text = "\n".join(lines) + "\n"
    print(text)
    pathlib.Path(a.out).write_text(text)


if __name__ == "__main__":
    main()
