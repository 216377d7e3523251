#!/usr/bin/env python3
"""Where the time of one attention forward+backward goes, through the LibTorch op and
through SDPA (cuDNN), by torch.profiler's CUDA kernel times beside the wall time.

  python3 bench/profile_torch_op.py --lib build/.../libtessera_torch.so [--cases 64:1024,256x197x12x64] [--pass fb|bwd|fwd]

A profile, not a benchmark: it prints each kernel's device time of one step and the
step's wall time, so host work that leaves the GPU idle shows as the difference.
"""
import argparse
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.profiler import ProfilerActivity, profile


def step_fn(kind, q, k, v, do, pss):
    """One step: forward+backward (fb), the forward alone (fwd, without autograd, as a model's
    inference runs it), or the backward of one retained forward (bwd, as the benchmark times it;
    the gradients accumulate into .grad for both backends)."""
    if kind == "tessera":
        fwd = lambda: torch.ops.tessera.attention(q, k, v)[0]
        dout = do
    else:
        qt, kt, vt, dout = (x.transpose(1, 2) for x in (q, k, v, do))

        def fwd():
            with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
                return F.scaled_dot_product_attention(qt, kt, vt)
    if pss == "fwd":
        def f():
            with torch.no_grad():
                fwd()
        return f
    if pss == "bwd":
        o = fwd()
        return lambda: o.backward(dout, retain_graph=True)
    return lambda: fwd().backward(dout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--cases", default="64:1024",
                    help="comma-separated head_dim:seqlen (the FlashAttention grid: B = 16k / N, H = 2048 / d) "
                         "or BxNxHxD (q, k, v as views of one packed [B, N, 3, H, D] tensor, as the models do)")
    ap.add_argument("--pass", dest="pss", choices=["fb", "bwd", "fwd"], default="fb")
    args = ap.parse_args()
    torch.ops.load_library(args.lib)
    for c in args.cases.split(","):
        if ":" in c:
            D, N = (int(x) for x in c.split(":"))
            profile_case(16384 // N, N, 2048 // D, D, False, args.pss)
        else:
            B, N, H, D = (int(x) for x in c.split("x"))
            profile_case(B, N, H, D, True, args.pss)


def profile_case(B, N, H, D, packed, pss):
    if packed:
        qkv = torch.randn(B, N, 3, H, D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        q, k, v = qkv.unbind(2)
    else:
        mk = lambda: torch.randn(B, N, H, D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        q, k, v = mk(), mk(), mk()
    do = torch.randn(B, N, H, D, device="cuda", dtype=torch.bfloat16)
    for kind in ("tessera", "cudnn"):
        f = step_fn(kind, q, k, v, do, pss)
        for _ in range(10):
            f()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(20):
            f()
        torch.cuda.synchronize()
        wall = (time.perf_counter() - t0) / 20 * 1e3
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            f()
            torch.cuda.synchronize()
        evs = [e for e in prof.key_averages() if e.device_type == torch.autograd.DeviceType.CUDA]
        tot = sum(e.device_time_total for e in evs) / 1e3
        print(f"== {kind}: d{D} N{N} B{B} H{H} {pss}{' packed' if packed else ''}, wall {wall:.3f} ms per step, kernels {tot:.3f} ms")
        for e in sorted(evs, key=lambda e: -e.device_time_total)[:12]:
            print(f"   {e.device_time_total / 1e3:8.3f} ms  x{e.count:<3d} {e.key[:110]}")
        if packed:
            qkv.grad = None
        else:
            q.grad = k.grad = v.grad = None


if __name__ == "__main__":
    main()
