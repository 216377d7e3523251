"""Prov-GigaPath's slide encoder as its published code computes it (gigapath/slide_encoder.py
LongNetViT over torchscale's LongNet encoder with DilatedAttention), written out in plain PyTorch
with SDPA's FlashAttention kernel standing in for the flash_attn call (both return the per-row
log-sum-exp the branches are merged by): what a user runs today. It first checks itself against the
float64 fixture `gigapath_slide_tiny_*` (fp32 through a math attention, bf16 through FlashAttention),
then times the published 12-layer, 768-d configuration (random weights) over slides of N tiles, the
same rows as bench_slide_encoder prints for Tessera. Prints a markdown table.

  python3 bench/longnet_reference.py --fixtures DIR [--tiles 100000,1000000] [--backward 100000]
"""
import argparse
import math
import time

import torch
import torch.nn.functional as F
from torch import nn


def lattice_coords(n, device, gen):
    side = math.ceil(math.sqrt(n))
    cell = torch.randperm(side * side, generator=gen)[:n]
    return (torch.stack([cell % side, cell // side], -1) * 256).float().to(device)[None]


def sincos_1d(pos, dim):
    half = dim // 2
    omega = 10000.0 ** (-torch.arange(half, dtype=torch.float64, device=pos.device) / half)
    angle = pos[..., None] * omega
    return torch.cat([angle.sin(), angle.cos()], -1)


def slide_pos_embed(coords, dim):
    # MAE's 2-D table row of cell floor(coords / 256): first half encodes cell[..., 1], second cell[..., 0]
    cell = torch.floor(coords.double() / 256.0)
    return torch.cat([sincos_1d(cell[..., 1], dim // 2), sincos_1d(cell[..., 0], dim // 2)], -1).float()


def attend(q, k, v):
    """[b, L, H, D] each -> out [b, L, H, D], lse [b, H, L] (fp32)."""
    qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))
    if q.dtype in (torch.float16, torch.bfloat16):
        out, lse = torch.ops.aten._scaled_dot_product_flash_attention(qt, kt, vt, 0.0, False, False)[:2]
    else:
        s = (qt @ kt.transpose(-1, -2)) / math.sqrt(q.shape[-1])
        lse = torch.logsumexp(s, -1)
        out = torch.softmax(s, -1) @ vt
    return out.transpose(1, 2), lse.float()


def dilated_attention(q, k, v, segment_lengths, ratios):
    """torchscale's DilatedAttention (no offset, not causal): per branch, pad the sequence to whole
    segments, keep every r-th position with each of r head groups taking its own offset (heads padded
    to a multiple of r), attend, place the outputs back in segments of r-padded length, and merge the
    branches by the softmax of their log-sum-exps (computed without gradient, as published)."""
    B, N, H, D = q.shape
    outs, lses = [], []
    for sl, r in zip(segment_lengths, ratios):
        sl = min(sl, N)
        n_seg = -(-N // sl)
        L = -(-sl // r)
        hpg = -(-H // r)
        heads = torch.arange(H, device=q.device)
        pos = torch.arange(L, device=q.device)[:, None] * r + heads[None] // hpg  # [L, H]

        def sparse(x):
            x = F.pad(x, (0, 0, 0, 0, 0, n_seg * sl - N)).view(B * n_seg, sl, H, D)
            x = F.pad(x, (0, 0, 0, 0, 0, L * r - sl))
            return x[:, pos, heads]  # [B * n_seg, L, H, D]

        o, lse = attend(sparse(q), sparse(k), sparse(v))
        dense_o = q.new_zeros(B * n_seg, L * r, H, D)
        dense_o[:, pos, heads] = o
        dense_l = lse.new_full((B * n_seg, L * r, H), -1e8)
        dense_l[:, pos, heads] = lse.transpose(1, 2)
        dense_l = dense_l.masked_fill(dense_l == 0, -1e8)
        outs.append(dense_o.view(B, n_seg * L * r, H, D)[:, :N])
        lses.append(dense_l.view(B, n_seg * L * r, H)[:, :N])
    with torch.no_grad():
        w = torch.softmax(torch.stack(lses), 0)
    return sum(o * wi[..., None].to(o.dtype) for o, wi in zip(outs, w))


class Layer(nn.Module):
    def __init__(self, dim, heads, ffn, eps, segment_lengths, ratios):
        super().__init__()
        self.heads, self.seg, self.ratios = heads, segment_lengths, ratios
        self.self_attn = nn.Module()
        for name in ("q_proj", "k_proj", "v_proj", "out_proj"):
            setattr(self.self_attn, name, nn.Linear(dim, dim))
        self.self_attn.inner_attn_ln = nn.LayerNorm(dim, eps=eps)
        self.self_attn_layer_norm = nn.LayerNorm(dim, eps=eps)
        self.final_layer_norm = nn.LayerNorm(dim, eps=eps)
        self.ffn = nn.Module()
        self.ffn.fc1, self.ffn.fc2 = nn.Linear(dim, ffn), nn.Linear(ffn, dim)
        self.ffn.ffn_layernorm = nn.LayerNorm(ffn, eps=eps)

    def forward(self, x):
        a = self.self_attn
        h = self.self_attn_layer_norm(x)
        B, N, C = h.shape
        q, k, v = (p(h).view(B, N, self.heads, C // self.heads) for p in (a.q_proj, a.k_proj, a.v_proj))
        o = dilated_attention(q, k, v, self.seg, self.ratios).reshape(B, N, C)
        x = x + a.out_proj(a.inner_attn_ln(o))
        f = self.ffn
        h = F.gelu(f.fc1(self.final_layer_norm(x)).float()).to(x.dtype)
        return x + f.fc2(f.ffn_layernorm(h))


class LongNetViT(nn.Module):
    def __init__(self, in_chans=1536, dim=768, depth=12, heads=16, norm_eps=1e-6,
                 segment_lengths=(1024, 5792, 32768, 185363, 1048576), ratios=(1, 2, 4, 8, 16)):
        super().__init__()
        self.patch_embed = nn.Module()
        self.patch_embed.proj = nn.Linear(in_chans, dim)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.encoder = nn.Module()
        self.encoder.layers = nn.ModuleList(
            Layer(dim, heads, 4 * dim, 1e-5, segment_lengths, ratios) for _ in range(depth))
        self.encoder.layer_norm = nn.LayerNorm(dim, eps=1e-5)
        self.norm = nn.LayerNorm(dim, eps=norm_eps)

    def forward_features(self, tiles, coords):
        x = self.patch_embed.proj(tiles.to(self.cls_token.dtype))
        x = x + slide_pos_embed(coords, x.shape[-1]).to(x.dtype)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], 1)
        for layer in self.encoder.layers:
            x = layer(x)
        return self.encoder.layer_norm(x)

    def forward(self, tiles, coords):
        return self.norm(self.forward_features(tiles, coords))[:, 0]


def check_fixture(folder, device):
    from safetensors.torch import load_file
    w = load_file(f"{folder}/gigapath_slide_tiny_w.safetensors")
    x = load_file(f"{folder}/gigapath_slide_tiny_x0.safetensors")["tile_embeddings"]
    io = load_file(f"{folder}/gigapath_slide_tiny_io.safetensors")
    model = LongNetViT(dim=384, depth=3, heads=16, norm_eps=1e-5)
    state = {k[len("weights."):]: v for k, v in w.items() if k.startswith("weights.") and "pos_embed" not in k}
    model.load_state_dict(state, strict=True)
    for dtype, tol in ((torch.float32, 1e-4), (torch.bfloat16, 2e-2)):
        m = model.to(device, dtype).eval()
        with torch.no_grad():
            enc = m.forward_features(x.to(device), io["coords"].to(device)).float().cpu()
            emb = m.norm(enc.to(device, dtype))[:, 0].float().cpu()
        e1 = ((enc - io["encoder_out"]).norm() / io["encoder_out"].norm()).item()
        e2 = ((emb - io["slide_embedding"]).norm() / io["slide_embedding"].norm()).item()
        print(f"fixture gigapath_slide_tiny, {dtype}: encoder_out rel err {e1:.1e}, slide_embedding {e2:.1e}")
        if e1 > tol or e2 > tol:
            raise SystemExit(f"the reference does not reproduce the fixture at {dtype} (bound {tol})")


def median_s(fn, reps):
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--fixtures", required=True, help="folder holding gigapath_slide_tiny_*.safetensors")
    p.add_argument("--tiles", default="100000,1000000")
    p.add_argument("--backward", default="100000")
    p.add_argument("--reps", type=int, default=3)
    a = p.parse_args()
    dev = torch.device("cuda")
    check_fixture(a.fixtures, dev)
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    model = LongNetViT().to(dev, torch.bfloat16)
    tiles = [int(t) for t in a.tiles.split(",") if t]
    backward = [int(t) for t in a.backward.split(",") if t]
    print("| model | tiles | pass | seconds | peak GiB |\n|---|---|---|---|---|")
    for n in sorted(set(tiles) | set(backward)):
        x = torch.randn(1, n, 1536, device=dev, dtype=torch.bfloat16)
        coords = lattice_coords(n, dev, gen)
        rows = []
        if n in tiles:
            def fwd():
                with torch.no_grad():
                    model.eval()(x, coords)
            rows.append(("forward", fwd))
        if n in backward:
            def fb():
                model.train().zero_grad()
                model(x, coords).float().square().sum().backward()
            rows.append(("forward + backward", fb))
        for name, fn in rows:
            torch.cuda.reset_peak_memory_stats()
            try:
                s = median_s(fn, a.reps)
                peak = torch.cuda.max_memory_allocated() / 2**30
                print(f"| published LongNetViT (SDPA flash) | {n} | {name} | {s:.3f} | {peak:.1f} |", flush=True)
            except torch.OutOfMemoryError:
                print(f"| published LongNetViT (SDPA flash) | {n} | {name} | out of memory | - |", flush=True)
                torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
