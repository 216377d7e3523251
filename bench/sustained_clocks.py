#!/usr/bin/env python3
"""Sustained time per call and the GPU's clock and power while it runs: Tessera's op against
SDPA on cuDNN, forward, backward and forward+backward, in one process.

  python3 bench/sustained_clocks.py --lib build/.../libtessera_torch.so [--cases 128:8192,c128:4096]
                                    [--seconds 1.5] [--interval-ms 20]

Cases are head_dim:seqlen on the FlashAttention grid of bench/attention_cuda_bench.py (B = 16k / N,
H = 2048 / d, bf16); a leading c makes one causal. For each case, backend and pass the calls are
queued back to back for about --seconds (the gradients set to None before each call, a host-only
step, as the benchmark does outside its events), one event pair around the whole loop, while
`nvidia-smi` samples the SM clock, the power draw and the throttle reasons. It prints the time per
call over the loop, the clock (mean and minimum), the mean power and the throttle reasons seen, and
per backend how far forward+backward lands from the sum of its forward and backward.

A diagnostic, not a benchmark (attention_cuda_bench.py reports speed): it asks whether a pass runs
at a lower clock than another. Its first run (2026-12-02) showed that the earlier tables' gap between
forward+backward and forward plus backward came from the benchmark's timing, not the kernels: looped,
both backends settle at 1650-1750 MHz under the power cap.
"""
import argparse
import shutil
import subprocess
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

# nvidia-smi's clocks_throttle_reasons.active bits (nvml's clocksThrottleReason*)
REASONS = {0x1: "idle", 0x2: "app clocks", 0x4: "sw power cap", 0x8: "hw slowdown", 0x10: "sync boost",
           0x20: "sw thermal", 0x40: "hw thermal", 0x80: "hw power brake", 0x100: "display clocks"}


class Sampler:
    """nvidia-smi in the background, one line per interval: SM MHz, watts, throttle bitmask."""

    def __init__(self, interval_ms):
        self.ok = shutil.which("nvidia-smi") is not None
        dev = f"--id={torch.cuda.current_device()}"
        field = "clocks_throttle_reasons.active"
        if self.ok:  # newer drivers also name it clocks_event_reasons.active; take the one this one knows
            for f in ("clocks_throttle_reasons.active", "clocks_event_reasons.active"):
                r = subprocess.run(["nvidia-smi", f"--query-gpu={f}", "--format=csv,noheader", dev],
                                   capture_output=True, text=True)
                if r.returncode == 0 and r.stdout.strip().startswith("0x"):
                    field = f
                    break
        self.cmd = ["nvidia-smi", f"--query-gpu=clocks.sm,power.draw,{field}", "--format=csv,noheader,nounits",
                    f"--loop-ms={interval_ms}", dev]

    def __enter__(self):
        self.p = subprocess.Popen(self.cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                  text=True) if self.ok else None
        return self

    def __exit__(self, *exc):
        self.samples = []
        if self.p is None:
            return
        self.p.terminate()
        out = self.p.communicate()[0]
        for line in out.splitlines():
            parts = [x.strip() for x in line.split(",")]
            try:
                self.samples.append((float(parts[0]), float(parts[1]), int(parts[2], 16)))
            except (ValueError, IndexError):
                continue  # a partial last line, or [N/A]

    def summary(self):
        if not self.samples:
            return "—", "—", "—", 0
        mhz = [s[0] for s in self.samples]
        watts = sum(s[1] for s in self.samples) / len(self.samples)
        bits = 0
        for s in self.samples:
            bits |= s[2]
        reasons = ", ".join(v for k, v in REASONS.items() if bits & k) or "none"
        return f"{sum(mhz) / len(mhz):.0f} ({min(mhz):.0f})", f"{watts:.0f}", reasons, len(self.samples)


def steps(backend, q, k, v, do, causal):
    """The three passes as callables: fwd, bwd (of one retained forward), fb."""
    if backend == "tessera":
        def fwd():
            return torch.ops.tessera.attention(q, k, v, causal=causal)[0]
        dout = do
    else:
        qt, kt, vt, dout = (x.transpose(1, 2) for x in (q, k, v, do))

        def fwd():
            with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
                return F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)

    def clear():
        q.grad = k.grad = v.grad = None

    o = fwd()

    def bwd():
        clear()
        o.backward(dout, retain_graph=True)

    def fb():
        clear()
        fwd().backward(dout)

    return {"fwd": fwd, "bwd": bwd, "fb": fb}


def sustained(fn, seconds, interval_ms):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(5):
        fn()
    b.record()
    torch.cuda.synchronize()
    n = max(5, int(seconds * 1e3 / (a.elapsed_time(b) / 5)))
    with Sampler(interval_ms) as s:
        a.record()
        for _ in range(n):
            fn()
        b.record()
        torch.cuda.synchronize()
    return a.elapsed_time(b) / n, n, s


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lib", required=True)
    ap.add_argument("--cases", default="128:8192,128:4096")
    ap.add_argument("--seconds", type=float, default=1.5)
    ap.add_argument("--interval-ms", type=int, default=20)
    args = ap.parse_args()
    torch.ops.load_library(args.lib)
    torch.manual_seed(0)
    if not shutil.which("nvidia-smi"):
        print("(nvidia-smi not found: times only)", file=sys.stderr)
    print("| case | backend | pass | ms per call | calls | SM MHz mean (min) | W | throttle reasons | samples |")
    print("|---|---|---|---|---|---|---|---|---|")
    for c in args.cases.split(","):
        causal = c.startswith("c")
        D, N = (int(x) for x in c.lstrip("c").split(":"))
        H, B = 2048 // D, 16384 // N
        name = f"d{D}{' causal' if causal else ''} N{N} B{B} H{H}"
        q, k, v = (torch.randn(B, N, H, D, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
        do = torch.randn(B, N, H, D, device="cuda", dtype=torch.bfloat16)
        notes = []
        for backend in ("tessera", "cudnn"):
            ms = {}
            for pss, fn in steps(backend, q, k, v, do, causal).items():
                t, n, s = sustained(fn, args.seconds, args.interval_ms)
                ms[pss] = t
                clk, watts, reasons, m = s.summary()
                print(f"| {name} | {backend} | {pss} | {t:.3f} | {n} | {clk} | {watts} | {reasons} | {m} |", flush=True)
            gap = ms["fb"] - (ms["fwd"] + ms["bwd"])
            notes.append(f"{name} {backend}: fb {ms['fb']:.3f} ms against fwd + bwd {ms['fwd'] + ms['bwd']:.3f} "
                         f"({100 * gap / (ms['fwd'] + ms['bwd']):+.1f} %)")
        print("\n".join(notes), flush=True)
        del q, k, v, do
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
