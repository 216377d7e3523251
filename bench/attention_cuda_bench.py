#!/usr/bin/env python3
"""Tessera CUDA attention vs PyTorch SDPA (flash / cuDNN / efficient) in one process.

  python3 bench/attention_cuda_bench.py --lib build/.../libtessera_torch.so [--quick] [--long] [--out TABLE.md]

Times forward, backward and forward+backward (CUDA events, median; the backends taking turns
call by call, bench_rounds) in bf16 and
reports ms, TFLOP/s by the FlashAttention formula (4*B*H*Nq*Nk*d, /2 causal,
bwd 2.5x, fwd+bwd 3.5x) and the ratio of each SDPA backend's time to ours
(> 1: we are faster). Swin cases pass the relative-position bias and the
shift mask (Swin's real one) to Tessera as broadcast terms (dBias for the relative
bias; the mask is a constant, as in the model) and to cuDNN / efficient as one materialised
attn_mask, as a PyTorch user would.
"""
import argparse
import math
import random
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

BACKENDS = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
            "efficient": SDPBackend.EFFICIENT_ATTENTION}


def bench_rounds(calls, reps, warmup=3):
    """Median device time of one call for each backend of `calls` ({name: (fn, pre)}), the backends
    taking turns: `reps` rounds, in each every backend runs one call, in a fresh random order each round (a rotation would keep who follows
    whom: a backend would always run after the same one, e.g. after the slow, cooler efficient kernel).
    Calls are queued back to back with an event pair around each and one synchronisation at the end
    (as triton.testing.do_bench does), so the host's launch work overlaps the device's.
    Why turns: under load the H200 drops from its 1980 MHz boost to ~1650-1750 MHz (nvidia-smi: sw
    power cap, bench/sustained_clocks.py), so a backend timed alone, after a lighter one, ran at a higher
    clock than the next; until 2026-12-02 each backend was timed in one block (cuDNN's d128 N8k fwd+bwd
    then read 4.5 % below the sum of its own fwd and bwd rows; looped for 1.5 s each, both backends'
    fwd+bwd are 0.5-1 % above their sums).
    pre: run before each call, outside its events: the backward passes set the inputs' .grad to None
    there, as FlashAttention's benchmark_backward does, so that autograd's adds into the previous call's
    gradients (0.1 ms at Swin d16, 0.55 ms at d32, for every backend) are not timed as attention."""
    names = list(calls)
    for n in names:
        fn, pre = calls[n]
        for _ in range(warmup):
            pre()
            fn()
    torch.cuda.synchronize()
    ev = {n: [] for n in names}
    order = random.Random(0)
    for _ in range(reps):
        for n in order.sample(names, len(names)):
            fn, pre = calls[n]
            e = (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
            pre()
            e[0].record()
            fn()
            e[1].record()
            ev[n].append(e)
    torch.cuda.synchronize()
    out = {}
    for n in names:
        times = sorted(a.elapsed_time(b) for a, b in ev[n])
        out[n] = times[len(times) // 2]
    return out


def swin_shift_mask(nw, N, ws=7, shift=3):
    """Swin's shifted-window attention mask [nW, 1, N, N] for a cube of nW = side^3 windows of
    ws^3 = N tokens (MONAI SwinUNETR's compute_mask): -100 between tokens from different regions
    of the rolled volume, else 0. Only the windows on a far border hold any -100 (127 of 343).
    Until 2026-12-01 the benchmark drew a random mask (10 % of -100 in every window) instead."""
    side = round(nw ** (1 / 3))
    assert side ** 3 == nw and ws ** 3 == N, "a cube of ws^3-token windows"
    L = side * ws
    r = torch.zeros(L, dtype=torch.long)
    r[L - ws:L - shift] = 1
    r[L - shift:] = 2
    ids = 9 * r[:, None, None] + 3 * r[None, :, None] + r[None, None, :]  # [L, L, L] region ids
    # windows in (d, h, w) order, tokens within a window in (d, h, w) order
    ids = ids.view(side, ws, side, ws, side, ws).permute(0, 2, 4, 1, 3, 5).reshape(nw, N)
    return ((ids[:, :, None] != ids[:, None, :]).float() * -100.0)[:, None]


def run_case(name, B, N, Hq, Hkv, D, causal, reps, swin_nw=0, fwd_only=False, warmup=3):
    """Each backend's (fwd, bwd, fwd+bwd) ms (fwd_only: (fwd,)), and the forward's FLOP count."""
    dev = "cuda"
    dt = torch.bfloat16
    grad = not fwd_only
    q = torch.randn(B, N, Hq, D, device=dev, dtype=dt, requires_grad=grad)
    k = torch.randn(B, N, Hkv, D, device=dev, dtype=dt, requires_grad=grad)
    v = torch.randn(B, N, Hkv, D, device=dev, dtype=dt, requires_grad=grad)
    do = None if fwd_only else torch.randn(B, N, Hq, D, device=dev, dtype=dt)
    flops = 4.0 * B * Hq * N * N * D / (2 if causal else 1)
    kw = dict(causal=causal)
    rel = mask = None
    if swin_nw:
        rel = torch.randn(Hq, N, N, device=dev, dtype=dt, requires_grad=True)
        # the shift mask is a constant, as in the Swin UNETR model: only the relative bias has a gradient
        mask = swin_shift_mask(swin_nw, N).to(dev, dt)
        kw = dict(bias=rel, mask=mask)
    res = {}
    attn_mask = None

    def clear():  # bench()'s pre for the backward passes
        for x in (q, k, v, rel, attn_mask):
            if x is not None:
                x.grad = None

    def ours_fwd():
        return torch.ops.tessera.attention(q, k, v, **kw)[0]

    # per backend: forward and forward + backward (the backward pass reuses one forward's graph)
    passes = {"tessera": (ours_fwd, lambda: ours_fwd().backward(do))}

    # SDPA: [B, H, N, D] views of the same tensors
    qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
    dot = None if fwd_only else do.transpose(1, 2)
    if swin_nw:
        imgs = B // swin_nw
        attn_mask = (rel.detach()[None, None] + mask.detach().view(1, swin_nw, 1, N, N)).expand(imgs, swin_nw, Hq, N, N)
        attn_mask = attn_mask.reshape(B, Hq, N, N).contiguous().requires_grad_(True)
    gqa = Hq != Hkv

    def sdpa(be, m):
        def f():
            with sdpa_kernel([be]):
                return F.scaled_dot_product_attention(qt, kt, vt, attn_mask=m, is_causal=causal, enable_gqa=gqa)
        return f

    for bname, be in BACKENDS.items():
        if swin_nw and bname == "flash":
            continue
        masks = [attn_mask] if attn_mask is None else [attn_mask, attn_mask.detach()]
        for m in masks:  # with a bias gradient first; without, if the backend refuses that
            f = sdpa(be, m)
            try:
                if fwd_only:
                    f()  # does the backend take this shape?
                else:
                    f().backward(dot)  # does the backend take this shape / mask, both ways?
                torch.cuda.synchronize()
                passes[bname] = (f, lambda f=f: f().backward(dot))
                if m is not None and not m.requires_grad:
                    res[bname + "_nograd"] = True
                break
            except Exception as e:
                res[bname] = None
                print(f"  [{name}] {bname}{' (mask grad)' if m is not None and m.requires_grad else ''}: "
                      f"{type(e).__name__}: {str(e).splitlines()[0][:120]}", file=sys.stderr)
            finally:
                clear()

    t_f = bench_rounds({n: (p[0], lambda: None) for n, p in passes.items()}, reps, warmup)
    if fwd_only:
        for n in passes:
            res[n] = (t_f[n],)
        return flops, res
    t_fb = bench_rounds({n: (p[1], clear) for n, p in passes.items()}, reps)
    outs = {n: p[0]() for n, p in passes.items()}  # each backend's graph, kept for its backward calls
    t_b = bench_rounds({n: (lambda o=o, g=(do if n == "tessera" else dot): o.backward(g, retain_graph=True), clear)
                        for n, o in outs.items()}, reps)
    del outs
    clear()
    for n in passes:
        res[n] = (t_f[n], t_b[n], t_fb[n])
    return flops, res


def fmt_row(name, flops, res):
    rows = []
    ours = res["tessera"]
    for i, (pname, mult) in enumerate((("fwd", 1.0), ("bwd", 2.5), ("fwd+bwd", 3.5))[:len(ours)]):
        cells = [name, pname, f"{ours[i]:.3f}", f"{mult * flops / ours[i] * 1e-9:.0f}"]
        for b in BACKENDS:
            r = res.get(b)
            if r is None:
                cells += ["—", "—"]
            else:
                star = "*" if res.get(b + "_nograd") else ""
                cells += [f"{mult * flops / r[i] * 1e-9:.0f}{star}", f"{r[i] / ours[i]:.2f}x ({r[i]:.3f} ms)"]
        rows.append("| " + " | ".join(cells) + " |")
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--out", default=None)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--only", default=None, help="run the cases whose name contains this (';' between several)")
    ap.add_argument("--long", action="store_true",
                    help="also the million-token forward rows (dense and causal; minutes: 3 calls per backend)")
    args = ap.parse_args()
    torch.ops.load_library(args.lib)
    import warnings
    warnings.filterwarnings("ignore", category=UserWarning)
    torch.manual_seed(0)
    cases = []
    for D in (64, 128):
        for causal in (False, True):
            for N in (512, 1024, 2048, 4096, 8192, 16384):
                if args.quick and N not in (1024, 8192):
                    continue
                H, B = 2048 // D, 16384 // N
                cases.append((f"d{D}{' causal' if causal else ''} N{N} B{B} H{H}", B, N, H, H, D, causal, 0))
    cases.append(("ViT-B tiles N197 B256 H12 d64", 256, 197, 12, 12, 64, False, 0))
    cases.append(("ViT-L tiles N197 B256 H16 d64", 256, 197, 16, 16, 64, False, 0))
    cases.append(("VideoMAE-B clips N1568 B8 H12 d64", 8, 1568, 12, 12, 64, False, 0))
    cases.append(("ViT-B slide N32k H12 d64", 1, 32768, 12, 12, 64, False, 0))
    if not args.quick:
        cases.append(("ViT-B slide N64k H12 d64", 1, 65536, 12, 12, 64, False, 0))
    cases.append(("ViT-g tiles N261 B128 H24 d64", 128, 261, 24, 24, 64, False, 0))
    cases.append(("d256 N4k B2 H8", 2, 4096, 8, 8, 256, False, 0))
    cases.append(("d256 N4k B2 H8 causal", 2, 4096, 8, 8, 256, True, 0))
    cases.append(("GQA 32/8 d128 N4k B4 causal", 4, 4096, 32, 8, 128, True, 0))
    cases.append(("GQA 16/2 d128 N8k B2", 2, 8192, 16, 2, 128, False, 0))
    cases.append(("GQA 16/2 d128 N8k B2 causal", 2, 8192, 16, 2, 128, True, 0))
    if args.long:  # a slide as one sequence: forward only, one warm-up, 3 timed calls per backend
        for causal in (False, True):
            cases.append((f"1M tokens B1 H12 d64{' causal' if causal else ''} fwd", 1, 1 << 20, 12, 12, 64, causal, 0,
                          dict(fwd_only=True, warmup=1, reps=3)))
    cases.append(("Swin 1372x3x343 d16 rel+mask", 1372, 343, 3, 3, 16, False, 343))
    cases.append(("Swin 2048x6x343 d32 rel+mask", 2048, 343, 6, 6, 32, False, 512))

    head = ["case", "pass", "tessera ms", "tessera TF/s"]
    for b in BACKENDS:
        head += [f"{b} TF/s", f"{b}/tessera"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    print("\n".join(lines), flush=True)
    for c in cases:
        name = c[0]
        if args.only and not any(part in name for part in args.only.split(";")):
            continue
        try:
            opts = dict(c[8]) if len(c) > 8 else {}
            flops, res = run_case(*c[:7], reps=opts.pop("reps", args.reps), swin_nw=c[7], **opts)
        except Exception as e:
            print(f"| {name} | failed: {type(e).__name__}: {str(e).splitlines()[0][:150]} |", flush=True)
            lines.append(f"| {name} | failed: {type(e).__name__} |")
            continue
        rows = fmt_row(name, flops, res)
        print("\n".join(rows), flush=True)
        lines += rows
        torch.cuda.empty_cache()
    if args.out:
        with open(args.out, "w") as f:
            f.write(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}, bf16, median of {args.reps} calls per backend, "
                    f"the backends taking turns call by call\n\n")
            f.write("\n".join(lines) + "\n")
            f.write("\n`*`: the backend refused a mask that requires grad; timed without the mask gradient "
                    "(Tessera returns the gradient of the Swin relative-position bias; the shift mask is a "
                    "constant, as in the model).\n")


if __name__ == "__main__":
    main()
