#!/usr/bin/env python3
"""`tessera embed-wsi` end to end against the timm tile encoders alone, in one call on one GPU.

For each architecture (built exactly as its model card builds it: scripts/fixtures/make_encoder_fixtures.py):
  1. timm's model with random weights (seed 0) in bf16, saved to WORK/<name>.safetensors (timm key names);
  2. timm, model only: batches of random tiles already on the GPU (--batch, bf16 weights, inference mode),
     eager and under torch.compile, tiles/s (median of --reps timed loops of --iters batches), the GPU's
     utilisation sampled by nvidia-smi while it runs, and the peak GPU memory;
  3. `tessera embed-wsi SLIDE --model configs/<name>.yaml --weights WORK/<name>.safetensors --device cuda
     --precision bf16 --batch B` as a subprocess: the whole process timed (read the slide, tissue mask, tiles,
     decode, normalise, model, HDF5), tiles/s over the process's wall time and over the command's own time
     (its --json) and over the slides' device parts alone (their encode_seconds), the encoder's loading time,
     utilisation and peak memory likewise.
Then one Markdown table (date, commit, GPU, command), printed and written to --out.

The slide: --slide, or one made with `tessera make-samples --only slide --slide-size W H` (default 88000 x
88000 at 0.5 µm/px, ~52,000 tissue tiles of 224 px).

GPU machine (see tools/gpu/README.md for the build with the carried io prefix):
  python3 bench/encoders_vs_timm.py --tessera BUILD/apps/tessera --tessera-library-path LIBS --work /tmp/evt \\
      --out $OUT/encoders_vs_timm.md
"""
import argparse
import datetime
import json
import os
import pathlib
import shlex
import subprocess
import sys
import threading
import time

import torch

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts" / "fixtures"))
import make_encoder_fixtures  # noqa: E402  (the architectures, one definition)


class GpuSampler:
    """nvidia-smi's utilisation.gpu every 100 ms while in the `with` block; mean over the samples."""

    def __init__(self):
        self.samples, self._stop = [], threading.Event()

    def __enter__(self):
        def run():
            p = subprocess.Popen(["nvidia-smi", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits",
                                  "-lms", "100", "-i", os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0]],
                                 stdout=subprocess.PIPE, text=True)
            for line in p.stdout:
                if self._stop.is_set():
                    break
                if line.strip().isdigit():
                    self.samples.append(int(line))
            p.kill()
        self._t = threading.Thread(target=run, daemon=True)
        self._t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join(timeout=2)

    def mean(self):
        return sum(self.samples) / len(self.samples) if self.samples else float("nan")


def timm_model(name):
    import timm
    arch, kwargs, pool, _ = make_encoder_fixtures.timm_encoders()[name]
    torch.manual_seed(0)
    model = timm.create_model(arch, pretrained=False, **kwargs)
    return model.eval(), pool


def time_model(fn, x, iters, reps):
    with torch.inference_mode():
        for _ in range(3):
            fn(x)
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        rates = []
        with GpuSampler() as gs:
            for _ in range(reps):
                t0 = time.perf_counter()
                for _ in range(iters):
                    fn(x)
                torch.cuda.synchronize()
                rates.append(iters * x.shape[0] / (time.perf_counter() - t0))
    return sorted(rates)[len(rates) // 2], gs.mean(), torch.cuda.max_memory_allocated() / 2**30


def tessera_env(a):
    env = dict(os.environ)
    if a.tessera_library_path:
        env["LD_LIBRARY_PATH"] = a.tessera_library_path + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    return env


def bare_process_s(a):
    """Median wall time of `tessera --version`: the libraries loaded and unloaded, no CUDA (the part of 'outside the
    command' that any LibTorch program pays)."""
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        subprocess.run([a.tessera, "--version"], env=tessera_env(a), capture_output=True, check=True)
        times.append(time.perf_counter() - t0)
    return sorted(times)[1]


def run_tessera(a, name, weights, slide, out_dir):
    cmd = [a.tessera, "embed-wsi", str(slide), "-o", str(out_dir), "--model", str(ROOT / "configs" / f"{name}.yaml"),
           "--weights", str(weights), "--device", "cuda", "--precision", "bf16", "--batch", str(a.batch), "--json", "-q"]
    env = tessera_env(a)
    subprocess.run(["rm", "-rf", str(out_dir)], check=True)
    with GpuSampler() as gs:
        t0, launched = time.perf_counter(), time.time()
        p = subprocess.run(cmd, env=env, capture_output=True, text=True)
        wall, exited = time.perf_counter() - t0, time.time()
    if p.returncode != 0:
        sys.exit(f"encoders_vs_timm: tessera failed ({p.returncode}): {p.stderr.strip()[-2000:]}\n{shlex.join(cmd)}")
    summary = json.loads(p.stdout)
    run = summary["run"]
    # The slides' device parts alone (tiles read, normalised, encoded): the pipeline's steady rate, without the
    # encoder's loading and the last slide's rest (pooling, HDF5), which the whole-process figure includes.
    encode_s = sum(s.get("encode_seconds", 0) for s in summary["slides"])
    slides = summary["slides"]
    return {"tiles": run["tiles"], "wall_s": wall, "command_s": run["seconds"], "util": gs.mean(),
            "rest_s": slides[-1].get("rest_seconds", float("nan")) if slides else float("nan"),
            "encode_s": encode_s, "load_s": run.get("load_encoder_seconds", float("nan")),
            "load_parts": run.get("load_encoder_parts", {}),
            "peak_gib": (run.get("peak_gpu_bytes") or 0) / 2**30, "bare_s": bare_process_s(a), "cmd": shlex.join(cmd),
            # outside the command: from launch to its start (libraries, static set-up, options, CUDA), from its end
            # to the process's exit (the summary printed, LibTorch's and CUDA's teardown)
            "startup_s": run["started_unix"] - launched if "started_unix" in run else float("nan"),
            "exit_s": exited - run["ended_unix"] if "ended_unix" in run else float("nan")}


def parts(p):
    """The encoder's load in its parts (embed-wsi --json's load_encoder_parts)."""
    if not p:
        return "parts not reported"
    return (f"file read {p['read_seconds']:.2f} s beside the model built and its first batch run "
            f"{p['build_and_first_batch_seconds']:.2f} s (the batch {p.get('first_batch_seconds', float('nan')):.2f} s), "
            f"then copied in {p['apply_seconds']:.2f} s")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tessera", required=True, help="the tessera program")
    p.add_argument("--tessera-library-path", default="", help="LD_LIBRARY_PATH for tessera (the carried io prefix)")
    p.add_argument("--work", required=True, help="scratch folder (weights, slide, outputs)")
    p.add_argument("--out", required=True, help="the Markdown table")
    p.add_argument("--models", default="uni2_h,virchow2", help="configs/<name>.yaml names, comma-separated")
    p.add_argument("--slide", default="", help="a slide; default: make one with --slide-size")
    p.add_argument("--slide-size", default="88000x88000", help="W x H of the generated slide (level-0 pixels, 0.5 µm/px; the default's ~52,000 tissue tiles "
                   "clear the 50,000 that issue #38 asks for)")
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--iters", type=int, default=10, help="batches per timed loop of the model-only runs")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--no-compile", action="store_true", help="skip the torch.compile column")
    a = p.parse_args()
    work = pathlib.Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    dev = torch.device("cuda")
    torch.backends.cuda.matmul.allow_tf32 = True

    slide = pathlib.Path(a.slide) if a.slide else work / "slide" / "slide.svs"
    made = work / "slide" / "size.txt"  # a slide this script made, reused by a later call of the same size
    if not a.slide and not (slide.exists() and made.exists() and made.read_text() == a.slide_size):
        w, h = a.slide_size.lower().split("x")
        t0 = time.perf_counter()
        subprocess.run([a.tessera, "make-samples", str(work / "slide"), "--only", "slide", "--slide-size", w, h], check=True,
                       env=dict(os.environ, LD_LIBRARY_PATH=a.tessera_library_path) if a.tessera_library_path else None,
                       stdout=subprocess.DEVNULL)
        made.write_text(a.slide_size)
        print(f"slide {w}x{h} made in {time.perf_counter() - t0:.1f} s ({slide.stat().st_size / 2**20:.0f} MiB)", flush=True)

    rows = []
    for name in [m for m in a.models.split(",") if m]:
        from safetensors.torch import save_file
        model, pool = timm_model(name)
        weights = work / f"{name}.safetensors"
        save_file({k: v.detach().to(torch.bfloat16).contiguous() for k, v in model.state_dict().items()}, str(weights))
        model = model.to(dev, torch.bfloat16)
        x = torch.randn(a.batch, 3, 224, 224, device=dev, dtype=torch.bfloat16)
        eager = time_model(lambda t: pool(model(t)), x, a.iters, a.reps)
        print(f"{name}: timm eager {eager[0]:.0f} tiles/s", flush=True)
        compiled = (float("nan"),) * 3
        if not a.no_compile:
            cm = torch.compile(model)
            compiled = time_model(lambda t: pool(cm(t)), x, a.iters, a.reps)
            print(f"{name}: timm compiled {compiled[0]:.0f} tiles/s", flush=True)
            del cm
        del model, x
        torch._dynamo.reset()
        torch.cuda.empty_cache()
        t = run_tessera(a, name, weights, slide, work / f"out_{name}")
        print(f"{name}: tessera embed-wsi {t['tiles']} tiles in {t['wall_s']:.1f} s", flush=True)
        rows.append((name, eager, compiled, t))

    commit = subprocess.run(["git", "-C", str(ROOT), "describe", "--always", "--dirty"], capture_output=True, text=True).stdout.strip()
    gpu = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"], capture_output=True,
                         text=True).stdout.strip().splitlines()[0]
    lines = [f"- When: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC. Commit: `{commit or 'unknown'}`.",
             f"- GPU: {gpu}, torch {torch.__version__}, timm {__import__('timm').__version__}; {os.cpu_count()} CPU threads.",
             f"- Slide: `{slide.name}`, {rows[0][3]['tiles'] if rows else 0} tissue tiles of 224 px at 0.5 µm/px.",
             f"- Command: `python3 bench/encoders_vs_timm.py {shlex.join(sys.argv[1:])}`",
             f"- timm: model only, batch {a.batch} of random tiles on the GPU, bf16 weights, inference mode; tessera: "
             "the whole process (`embed-wsi ... --precision bf16`), the slide read, decoded and written as HDF5.",
             "",
             "| encoder | timm eager tiles/s | util % | timm compiled tiles/s | util % | tessera end to end tiles/s (process) "
             "| in command | slides' device parts | encoder load s | util % | peak GiB (timm / tessera) | tessera / compiled |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, e, c, t in rows:
        proc, cmd = t["tiles"] / t["wall_s"], t["tiles"] / t["command_s"]
        steady = t["tiles"] / t["encode_s"] if t["encode_s"] > 0 else float("nan")
        ref = c[0] if c[0] == c[0] else e[0]
        lines.append(f"| {name} | {e[0]:,.0f} | {e[1]:.0f} | {c[0]:,.0f} | {c[1]:.0f} | {proc:,.0f} | {cmd:,.0f} | {steady:,.0f} "
                     f"| {t['load_s']:.1f} | {t['util']:.0f} | {max(e[2], c[2] if c[2] == c[2] else 0):.1f} / {t['peak_gib']:.1f} "
                     f"| {proc / ref:.2f}x |")
    lines.append("")
    for name, _, _, t in rows:  # what the end-to-end figure pays beyond the slides' device parts
        lines.append(f"- {name}: {t['wall_s'] - t['command_s']:.2f} s outside the command ({t['startup_s']:.2f} s start-up: "
                     f"libraries, CUDA; {t['exit_s']:.2f} s exit; a bare `tessera --version` takes {t['bare_s']:.2f} s), "
                     f"{t['load_s']:.2f} s loading the encoder ({parts(t['load_parts'])}), {t['rest_s']:.2f} s writing the last "
                     f"slide's outputs.")
    text = "\n".join(lines) + "\n"
    print(text)
    pathlib.Path(a.out).write_text(text)


if __name__ == "__main__":
    main()
