#!/usr/bin/env python3
"""Where the time of one attention forward+backward goes, through the LibTorch op and
through SDPA (cuDNN), by torch.profiler's CUDA kernel times beside the wall time.

  python3 bench/profile_torch_op.py --lib build/.../libtessera_torch.so [--d 64 --n 1024]

A profile, not a benchmark: it prints each kernel's device time of one step and the
step's wall time, so host work that leaves the GPU idle shows as the difference.
"""
import argparse
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.profiler import ProfilerActivity, profile


def step_fn(kind, q, k, v, do):
    if kind == "tessera":
        def f():
            torch.ops.tessera.attention(q, k, v)[0].backward(do)
    else:
        qt, kt, vt, dot = (x.transpose(1, 2) for x in (q, k, v, do))

        def f():
            with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
                F.scaled_dot_product_attention(qt, kt, vt).backward(dot)
    return f


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--d", type=int, default=64)
    ap.add_argument("--n", type=int, default=1024)
    args = ap.parse_args()
    torch.ops.load_library(args.lib)
    D, N = args.d, args.n
    H, B = 2048 // D, 16384 // N
    mk = lambda: torch.randn(B, N, H, D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    q, k, v = mk(), mk(), mk()
    do = torch.randn(B, N, H, D, device="cuda", dtype=torch.bfloat16)
    for kind in ("tessera", "cudnn"):
        f = step_fn(kind, q, k, v, do)
        for _ in range(3):
            f()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(10):
            f()
        torch.cuda.synchronize()
        wall = (time.perf_counter() - t0) / 10 * 1e3
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            f()
            torch.cuda.synchronize()
        evs = [e for e in prof.key_averages() if e.device_type == torch.autograd.DeviceType.CUDA]
        tot = sum(e.device_time_total for e in evs) / 1e3
        print(f"== {kind}: d{D} N{N} B{B} H{H} fwd+bwd, wall {wall:.3f} ms per step, kernels {tot:.3f} ms")
        for e in sorted(evs, key=lambda e: -e.device_time_total)[:12]:
            print(f"   {e.device_time_total / 1e3:8.3f} ms  x{e.count:<3d} {e.key[:110]}")
        q.grad = k.grad = v.grad = None


if __name__ == "__main__":
    main()
