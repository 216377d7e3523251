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


def step_fn(kind, q, k, v, do, pss, swin=None):
    """One step: forward+backward (fb), the forward alone (fwd, without autograd, as a model's
    inference runs it), or the backward of one retained forward (bwd, as the benchmark times it;
    the gradients accumulate into .grad for both backends). swin: (rel, mask, attn_mask), the
    Swin terms as the benchmark passes them (Tessera: two broadcast terms; cuDNN: their sum)."""
    if kind == "tessera":
        kw = dict(bias=swin[0], mask=swin[1]) if swin else {}
        fwd = lambda: torch.ops.tessera.attention(q, k, v, **kw)[0]
        dout = do
    else:
        qt, kt, vt, dout = (x.transpose(1, 2) for x in (q, k, v, do))
        am = swin[2] if swin else None

        def fwd():
            with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
                return F.scaled_dot_product_attention(qt, kt, vt, attn_mask=am)
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
                         "or BxNxHxD (q, k, v as views of one packed [B, N, 3, H, D] tensor, as the models do), "
                         "or swin16 / swin32 (the benchmark's Swin window cases: relative bias with its "
                         "gradient + shift mask)")
    ap.add_argument("--pass", dest="pss", choices=["fb", "bwd", "fwd"], default="fb")
    args = ap.parse_args()
    torch.ops.load_library(args.lib)
    for c in args.cases.split(","):
        if c in SWIN:
            profile_case(*SWIN[c], False, args.pss, swin_nw=SWIN_NW[c])
        elif ":" in c:
            D, N = (int(x) for x in c.split(":"))
            profile_case(16384 // N, N, 2048 // D, D, False, args.pss)
        else:
            B, N, H, D = (int(x) for x in c.split("x"))
            profile_case(B, N, H, D, True, args.pss)


SWIN = {"swin16": (1372, 343, 3, 16), "swin32": (2048, 343, 6, 32)}  # B, N, H, D
SWIN_NW = {"swin16": 343, "swin32": 512}


def swin_terms(B, N, H, nw):
    """The relative bias (with a gradient), the shift mask, and cuDNN's summed [B, H, N, N] mask."""
    from attention_cuda_bench import swin_shift_mask  # same folder
    rel = torch.randn(H, N, N, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    mask = swin_shift_mask(nw, N).to("cuda", torch.bfloat16)
    am = (rel.detach()[None, None] + mask.view(1, nw, 1, N, N)).expand(B // nw, nw, H, N, N)
    return rel, mask, am.reshape(B, H, N, N).contiguous()


def profile_case(B, N, H, D, packed, pss, swin_nw=0):
    swin = swin_terms(B, N, H, swin_nw) if swin_nw else None
    if packed:
        qkv = torch.randn(B, N, 3, H, D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        q, k, v = qkv.unbind(2)
    else:
        mk = lambda: torch.randn(B, N, H, D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        q, k, v = mk(), mk(), mk()
    do = torch.randn(B, N, H, D, device="cuda", dtype=torch.bfloat16)
    leaves = [qkv] if packed else [q, k, v]
    if swin:
        leaves.append(swin[0])

    def clear():  # gradients set to None before each step: autograd's adds into them are not attention
        for x in leaves:
            x.grad = None

    for kind in ("tessera", "cudnn"):
        f0 = step_fn(kind, q, k, v, do, pss, swin)

        def f():
            clear()
            f0()
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
        print(f"== {kind}: d{D} N{N} B{B} H{H} {pss}{' packed' if packed else ''}{' swin' if swin else ''}, wall {wall:.3f} ms per step, kernels {tot:.3f} ms")
        for e in sorted(evs, key=lambda e: -e.device_time_total)[:12]:
            print(f"   {e.device_time_total / 1e3:8.3f} ms  x{e.count:<3d} {e.key[:110]}")
        clear()


if __name__ == "__main__":
    main()
