#!/usr/bin/env python3
"""ViT-B/16 and ViT-L/16 written in plain PyTorch (timm VisionTransformer's
forward: patch conv, class token, position table, pre-norm blocks with qkv
bias and GELU MLP, final norm), bf16 weights, batch 256, eager mode: the
reference for `bench_models`' C++ ViT rows, which run the same operations
through LibTorch. Attention through F.scaled_dot_product_attention or, with
--lib, through torch.ops.tessera.attention, so the two C++ rows and the two
Python rows can be compared in one call.

  python3 bench/vit_eager_reference.py [--lib build/attention/libtessera_torch.so] [--batch 256] [--reps 10]
                                      [--only ViT-B]
"""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, dim, heads, attend):
        super().__init__()
        self.heads, self.attend = heads, attend
        self.norm1, self.norm2 = nn.LayerNorm(dim, eps=1e-6), nn.LayerNorm(dim, eps=1e-6)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.fc1, self.fc2 = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

    def forward(self, x):
        B, N, C = x.shape
        qkv = self.qkv(self.norm1(x)).view(B, N, 3, self.heads, C // self.heads)
        a = self.attend(qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2])  # [B, N, H, D] each
        x = x + self.proj(a.reshape(B, N, C))
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))


class ViT(nn.Module):
    def __init__(self, dim, depth, heads, attend, img=224, patch=16):
        super().__init__()
        self.patch = nn.Conv2d(3, dim, patch, stride=patch)
        self.cls = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos = nn.Parameter(torch.randn(1, (img // patch) ** 2 + 1, dim) * 0.02)
        self.blocks = nn.ModuleList(Block(dim, heads, attend) for _ in range(depth))
        self.norm = nn.LayerNorm(dim, eps=1e-6)

    def forward(self, x):
        t = self.patch(x).flatten(2).transpose(1, 2)
        t = torch.cat([self.cls.expand(t.shape[0], -1, -1), t], 1) + self.pos
        for b in self.blocks:
            t = b(t)
        return self.norm(t)


def sdpa(q, k, v):
    return F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)).transpose(1, 2)


def tessera(q, k, v):
    return torch.ops.tessera.attention(q, k, v)[0]


def median_ms(fn, reps, warmup=2):
    """Synchronised wall time per call, as bench_models measures its models."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b))
    return sorted(times)[len(times) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", help="libtessera_torch.so: also time the models with Tessera's attention")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--only", help="run the models whose name holds this (e.g. ViT-B)")
    args = ap.parse_args()
    attends = {"SDPA": sdpa}
    if args.lib:
        torch.ops.load_library(args.lib)
        attends["Tessera"] = tessera
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}, bf16, eager, batch {args.batch}, "
          f"median of {args.reps}\n")
    print("| model (Python eager) | attention | ms | tiles/s |\n|---|---|---|---|")
    x = torch.randn(args.batch, 3, 224, 224, device="cuda", dtype=torch.bfloat16)
    for name, dim, depth, heads in (("ViT-B/16", 768, 12, 12), ("ViT-L/16", 1024, 24, 16)):
        if args.only and args.only not in name:
            continue
        torch.manual_seed(0)
        for label, fn in attends.items():
            m = ViT(dim, depth, heads, fn).to("cuda", torch.bfloat16).eval()
            with torch.no_grad():
                ms = median_ms(lambda: m(x), args.reps)
            print(f"| {name} | {label} | {ms:.1f} | {args.batch * 1000 / ms:.0f} |", flush=True)


if __name__ == "__main__":
    main()
