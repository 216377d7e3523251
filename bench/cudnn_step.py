#!/usr/bin/env python3
"""One forward + backward of PyTorch SDPA on its cuDNN backend, for a profiler to look at cuDNN's
kernels (launch shape, occupancy, memory traffic) beside ours: tools/gpu/gpu_profile.sh takes a case
"cudnn:D:N" and runs this under Nsight Compute.

  python3 bench/cudnn_step.py D:N [--causal]

Shapes follow the FlashAttention grid of the benchmarks: B = 16384 / N, H = 2048 / D, bf16.
"""
import argparse

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("shape", help="D:N, e.g. 128:1024")
    ap.add_argument("--causal", action="store_true")
    args = ap.parse_args()
    D, N = (int(x) for x in args.shape.split(":"))
    B, H = 16384 // N, 2048 // D
    q, k, v = (torch.randn(B, H, N, D, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
        o = F.scaled_dot_product_attention(q, k, v, is_causal=args.causal)
    o.backward(torch.randn_like(o))
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
