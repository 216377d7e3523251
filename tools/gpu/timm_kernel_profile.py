#!/usr/bin/env python3
"""The GPU kernels of a timm tile encoder's forward, eager and under torch.compile, in the table format of
`bench_models --profile` (bench/src/kernel_profile.cpp), so that the two can be read side by side where
`embed-wsi` trails the compiled model (bench/encoders_vs_timm.py).

The architecture is the one bench/encoders_vs_timm.py times (scripts/fixtures/make_encoder_fixtures.py):
random weights, bf16, inference mode, a batch of random tiles already on the GPU.

  python3 tools/gpu/timm_kernel_profile.py --model uni2_h [--batch 256] [--reps 3] [--top 25] [--modes eager,compiled]
"""
import argparse
import collections
import pathlib
import sys

import torch

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
import encoders_vs_timm  # noqa: E402  (the same timm models)


def profile(fn, x, reps):
    with torch.inference_mode():
        for _ in range(3):  # compiled graphs, cuBLAS plans and caches outside the profile
            fn(x)
        torch.cuda.synchronize()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            for _ in range(reps):
                fn(x)
            torch.cuda.synchronize()
    by_name = collections.defaultdict(lambda: [0.0, 0])
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            by_name[e.name][0] += e.device_time
            by_name[e.name][1] += 1
    return by_name


def print_table(title, by_name, reps, top):
    total = sum(us for us, _ in by_name.values())
    print(f"\n### {title}\n\nGPU time per run: {total / 1e3 / reps:.2f} ms over {len(by_name)} distinct kernels\n")
    print("| kernel | calls per run | ms per run | share |\n|---|---|---|---|")
    for name, (us, calls) in sorted(by_name.items(), key=lambda kv: -kv[1][0])[:top]:
        print(f"| {name[:110]} | {calls / reps:.1f} | {us / 1e3 / reps:.3f} | {100 * us / max(total, 1e-9):.1f} % |")
    sys.stdout.flush()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="uni2_h", help="a configs/<name>.yaml name that bench/encoders_vs_timm.py knows")
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--top", type=int, default=25)
    p.add_argument("--modes", default="eager,compiled")
    a = p.parse_args()
    model, pool = encoders_vs_timm.timm_model(a.model)
    model = model.to("cuda", torch.bfloat16)
    x = torch.randn(a.batch, 3, 224, 224, device="cuda", dtype=torch.bfloat16)
    print(f"{a.model}: timm, batch {a.batch}, bf16, {torch.cuda.get_device_name()}, torch {torch.__version__}")
    for mode in a.modes.split(","):
        if mode not in ("eager", "compiled"):
            sys.exit(f"timm_kernel_profile: --modes: unknown mode '{mode}' (eager, compiled)")
        fwd = model if mode == "eager" else torch.compile(model)
        print_table(f"{a.model}, timm {mode}", profile(lambda t: pool(fwd(t)), x, a.reps), a.reps, a.top)


if __name__ == "__main__":
    main()
