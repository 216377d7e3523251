"""Gradients of tessera.attention against the float64 reference's autograd, varlen against separate
per-sequence calls, and dropout (reproducible for a seed, exact at p = 0, and a backward that uses the
forward's mask).

The op has no float64 kernels, so torch.autograd.gradcheck cannot run on it directly: the fp32 (or, on
CUDA, bf16 / fp16) gradients are compared with the reference's float64 gradients instead. Should float64
ever be accepted, test_gradcheck_float64 runs gradcheck itself.
"""
import math

import pytest
import torch

import tessera
from conftest import (ALLOWED_ERRORS, assert_close, check_close, fwd_tol, grad_tol, reference_attention)

pytestmark = pytest.mark.usefixtures("poison_memory")


def randn(g, *shape, device, dtype, amp=1.0):
    return (torch.randn(*shape, generator=g, dtype=torch.float64) * amp).to(device, dtype)


def compare_with_reference(q, k, v, kw, seed=0):
    """tessera.attention(q, k, v, **kw, return_lse=True) against reference_attention: out, lse and the
    gradients of q, k, v and of every bias / mask that requires grad, for a random upstream gradient of
    both out and lse. Returns the list of problems (empty when all match)."""
    terms = {name: kw[name] for name in ("bias", "mask") if kw.get(name) is not None and kw[name].requires_grad}
    inputs = [q, k, v] + list(terms.values())
    names = ["q", "k", "v"] + list(terms)
    for t in (q, k, v):
        t.requires_grad_(True)
    out, lse = tessera.attention(q, k, v, return_lse=True, **kw)

    ref_in = {n: t.detach().to("cpu", torch.float64).requires_grad_(True) for n, t in zip(names, inputs)}
    rkw = {key: val for key, val in kw.items() if key not in ("bias", "mask", "deterministic")}
    ref_out, ref_lse = reference_attention(ref_in["q"], ref_in["k"], ref_in["v"],
                                           bias=ref_in.get("bias", kw.get("bias")),
                                           mask=ref_in.get("mask", kw.get("mask")), **rkw)
    tol = fwd_tol(q.dtype, q.device)
    problems = [check_close("out", out, ref_out, tol), check_close("lse", lse, ref_lse, tol)]

    g = torch.Generator().manual_seed(seed + 99)
    g_out = torch.randn(*out.shape, generator=g, dtype=torch.float64)
    dead = ref_lse == float("-inf")
    g_lse = torch.randn(*lse.shape, generator=g, dtype=torch.float64).masked_fill(dead, 0.0)
    loss = (out.double() * g_out.to(out.device)).sum() + \
        (lse.double().masked_fill(dead.to(lse.device), 0.0) * g_lse.to(lse.device)).sum()
    ref_loss = (ref_out * g_out).sum() + (ref_lse.masked_fill(dead, 0.0) * g_lse).sum()
    grads = torch.autograd.grad(loss, inputs, allow_unused=True)
    ref_grads = torch.autograd.grad(ref_loss, [ref_in[n] for n in names], allow_unused=True)
    for name, t, gr, rg in zip(names, inputs, grads, ref_grads):
        if gr is None:
            problems.append(f"no gradient for {name}")
            continue
        if gr.dtype != t.dtype:
            problems.append(f"grad {name} is {gr.dtype}, expected {t.dtype}")
        rg = torch.zeros(t.shape, dtype=torch.float64) if rg is None else rg
        problems.append(check_close(f"grad {name}", gr, rg, max(grad_tol(q.dtype, q.device),
                                                               grad_tol(t.dtype, q.device))))
    return [p for p in problems if p]


# ----------------------------------------------------------------------------- dense configurations
# Each builds (q, k, v, kwargs) from a generator, a device and a dtype. Shapes are small and ragged
# (not multiples of the kernels' tiles) so that partial tiles are exercised.

def _qkv(g, dev, dt, B=2, Nq=17, Nk=None, Hq=2, Hkv=None, D=16, Dv=None):
    Nk, Hkv, Dv = Nk or Nq, Hkv or Hq, Dv or D
    return (randn(g, B, Nq, Hq, D, device=dev, dtype=dt), randn(g, B, Nk, Hkv, D, device=dev, dtype=dt),
            randn(g, B, Nk, Hkv, Dv, device=dev, dtype=dt))


def _grad_leaf(t):
    return t.detach().requires_grad_(True)


def cfg_plain(g, dev, dt):
    return (*_qkv(g, dev, dt), {})


def cfg_bias_3d(g, dev, dt):
    q, k, v = _qkv(g, dev, dt, Nq=19, Nk=23, Hq=3)
    return q, k, v, dict(bias=_grad_leaf(randn(g, 3, 19, 23, device=dev, dtype=dt, amp=2.0)))


def cfg_bias_2d_row(g, dev, dt):
    q, k, v = _qkv(g, dev, dt, Nq=9, Nk=30)
    return q, k, v, dict(bias=_grad_leaf(randn(g, 1, 30, device=dev, dtype=torch.float32)))


def cfg_swin_bias_and_mask(g, dev, dt):
    # Swin: relative-position bias [H, N, N] for every window, shift mask [nW, 1, N, N] over B = 2 * nW
    nW, N, H = 3, 13, 2
    q, k, v = _qkv(g, dev, dt, B=2 * nW, Nq=N, Hq=H)
    keep = torch.rand(nW, 1, N, N, generator=g) < 0.7
    mask = torch.zeros(nW, 1, N, N).masked_fill(~keep, -100.0).to(dev, dt)
    return q, k, v, dict(bias=_grad_leaf(randn(g, H, N, N, device=dev, dtype=dt)), mask=_grad_leaf(mask))


def cfg_float_mask_with_inf(g, dev, dt):
    q, k, v = _qkv(g, dev, dt, Nq=21, Nk=21)
    keep = torch.rand(2, 2, 21, 21, generator=g) < 0.6
    keep[:, :, :, 0] = True
    mask = torch.zeros(2, 2, 21, 21).masked_fill(~keep, float("-inf")).to(dev, dt)
    return q, k, v, dict(mask=_grad_leaf(mask))


def cfg_bool_mask(g, dev, dt):
    q, k, v = _qkv(g, dev, dt, Nq=14, Nk=29)
    return q, k, v, dict(mask=(torch.rand(14, 29, generator=g) < 0.5).to(dev))


def cfg_alibi(g, dev, dt):
    q, k, v = _qkv(g, dev, dt, Nq=20, Nk=27, Hq=4)
    return q, k, v, dict(alibi_slopes=(torch.rand(4, generator=g) * 0.5).to(dev))


def cfg_alibi_per_batch_causal(g, dev, dt):
    q, k, v = _qkv(g, dev, dt, B=3, Nq=25, Nk=18, Hq=2)
    return q, k, v, dict(alibi_slopes=(torch.rand(3, 2, generator=g) * 0.5).to(dev), causal=True)


def cfg_window(g, dev, dt):
    return (*_qkv(g, dev, dt, Nq=40, Nk=33), dict(window=(5, 3)))


def cfg_window_left_only(g, dev, dt):
    return (*_qkv(g, dev, dt, Nq=33, Nk=33), dict(window=(7, -1), causal=True))


def cfg_causal_nq_lt_nk(g, dev, dt):
    return (*_qkv(g, dev, dt, Nq=11, Nk=37), dict(causal=True))


def cfg_causal_nq_gt_nk(g, dev, dt):
    # the first Nq - Nk query rows see no key: out 0, lse -inf, zero gradients
    return (*_qkv(g, dev, dt, Nq=37, Nk=11), dict(causal=True))


def cfg_gqa(g, dev, dt):
    q, k, v = _qkv(g, dev, dt, Nq=19, Hq=6, Hkv=2, D=24, Dv=40)
    return q, k, v, dict(bias=_grad_leaf(randn(g, 2, 6, 1, 19, device=dev, dtype=dt)))


def cfg_mqa_scale(g, dev, dt):
    return (*_qkv(g, dev, dt, Nq=16, Hq=4, Hkv=1, D=64), dict(scale=0.3))


def cfg_everything(g, dev, dt):
    q, k, v = _qkv(g, dev, dt, B=2, Nq=31, Nk=45, Hq=4, Hkv=2, D=20, Dv=12)
    keep = torch.rand(1, 4, 31, 45, generator=g) < 0.8
    return q, k, v, dict(bias=_grad_leaf(randn(g, 2, 1, 31, 45, device=dev, dtype=dt)),
                         mask=_grad_leaf(torch.zeros(1, 4, 31, 45).masked_fill(~keep, -100.0).to(dev, dt)),
                         alibi_slopes=(torch.rand(4, generator=g) * 0.3).to(dev), causal=True, window=(20, 0),
                         scale=0.2, deterministic=True)


def cfg_several_tiles(g, dev, dt):
    # longer than the kernels' tiles in both directions, with ragged ends
    q, k, v = _qkv(g, dev, dt, B=1, Nq=131, Nk=203, Hq=2, D=64)
    return q, k, v, dict(bias=_grad_leaf(randn(g, 2, 131, 203, device=dev, dtype=dt)), causal=True)


DENSE = [cfg_plain, cfg_bias_3d, cfg_bias_2d_row, cfg_swin_bias_and_mask, cfg_float_mask_with_inf, cfg_bool_mask,
         cfg_alibi, cfg_alibi_per_batch_causal, cfg_window, cfg_window_left_only, cfg_causal_nq_lt_nk,
         cfg_causal_nq_gt_nk, cfg_gqa, cfg_mqa_scale, cfg_everything, cfg_several_tiles]


@pytest.mark.parametrize("cfg", DENSE, ids=[c.__name__[4:] for c in DENSE])
def test_gradients_match_float64(cfg, device, dtype):
    g = torch.Generator().manual_seed(DENSE.index(cfg))
    q, k, v, kw = cfg(g, device, dtype)
    problems = compare_with_reference(q, k, v, kw)
    assert not problems, "\n".join(problems)


# ----------------------------------------------------------------------------- varlen

LENS_Q = [5, 0, 17, 33, 1]
LENS_K = [7, 3, 17, 20, 1]


def _offsets(lens, dev):
    return torch.tensor([0] + list(torch.tensor(lens).cumsum(0).tolist()), dtype=torch.int32, device=dev)


def _varlen_inputs(device, dtype, seed=5):
    g = torch.Generator().manual_seed(seed)
    H, Hkv, D, Dv = 4, 2, 16, 24
    tq, tk = sum(LENS_Q), sum(LENS_K)
    q = randn(g, tq, H, D, device=device, dtype=dtype)
    k = randn(g, tk, Hkv, D, device=device, dtype=dtype)
    v = randn(g, tk, Hkv, Dv, device=device, dtype=dtype)
    # bias [nseq, H, max_q, max_k]: sequence b reads bias[b, :, :lq, :lk]
    bias = randn(g, len(LENS_Q), H, max(LENS_Q), max(LENS_K), device=device, dtype=dtype)
    slopes = (torch.rand(len(LENS_Q), H, generator=g) * 0.5).to(device)
    return q, k, v, bias, slopes


VARLEN_OPTS = {
    "plain": {},
    "causal": dict(causal=True),
    "bias_alibi_window": dict(bias=True, alibi=True, window=(6, 2)),
    "bias_causal": dict(bias=True, causal=True),
}


@pytest.mark.parametrize("opts", list(VARLEN_OPTS), ids=list(VARLEN_OPTS))
def test_varlen_gradients_match_float64(opts, device, dtype):
    q, k, v, bias, slopes = _varlen_inputs(device, dtype)
    o = VARLEN_OPTS[opts]
    kw = dict(cu_seqlens=(_offsets(LENS_Q, device), _offsets(LENS_K, device)))
    kw.update({key: val for key, val in o.items() if key in ("causal", "window")})
    if o.get("bias"):
        kw["bias"] = bias.requires_grad_(True)
    if o.get("alibi"):
        kw["alibi_slopes"] = slopes
    problems = compare_with_reference(q, k, v, kw)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("opts", list(VARLEN_OPTS), ids=list(VARLEN_OPTS))
def test_varlen_equals_separate_calls(opts, device, dtype):
    """One packed call == one dense call per sequence, in out, lse and every gradient; the packed bias's
    gradient is zero outside each sequence's [lq, lk] corner."""
    o = VARLEN_OPTS[opts]
    q, k, v, bias, slopes = _varlen_inputs(device, dtype)
    q, k, v, bias = (t.detach().requires_grad_(True) for t in (q, k, v, bias))
    cu_q, cu_k = _offsets(LENS_Q, device), _offsets(LENS_K, device)
    common = {key: val for key, val in o.items() if key in ("causal", "window")}
    kw = dict(common, cu_seqlens=(cu_q, cu_k), return_lse=True)
    if o.get("bias"):
        kw["bias"] = bias
    if o.get("alibi"):
        kw["alibi_slopes"] = slopes
    out, lse = tessera.attention(q, k, v, **kw)
    g = torch.Generator().manual_seed(3)
    g_out = randn(g, *out.shape, device=device, dtype=torch.float32)
    finite_lse = torch.isfinite(lse)
    g_lse = randn(g, *lse.shape, device=device, dtype=torch.float32) * finite_lse
    inputs = [q, k, v] + ([bias] if o.get("bias") else [])
    grads = torch.autograd.grad((out.float() * g_out).sum() + (lse.where(finite_lse, torch.zeros_like(lse))
                                                                 * g_lse).sum(), inputs)

    tol = fwd_tol(dtype, device) / 10 if dtype == torch.float32 else fwd_tol(dtype, device)
    gtol = grad_tol(dtype, device) / 10 if dtype == torch.float32 else grad_tol(dtype, device)
    bias_grad_seen = torch.zeros(bias.shape, dtype=torch.bool)
    for b, (lq, lk) in enumerate(zip(LENS_Q, LENS_K)):
        if lq == 0:
            continue  # nothing to compare (and a dense call with no query rows is another test's business)
        sq = slice(int(cu_q[b]), int(cu_q[b + 1]))
        sk = slice(int(cu_k[b]), int(cu_k[b + 1]))
        qs, ks, vs = (t[s].detach().unsqueeze(0).requires_grad_(True) for t, s in ((q, sq), (k, sk), (v, sk)))
        skw = dict(common, return_lse=True)
        if o.get("bias"):
            skw["bias"] = bias[b:b + 1, :, :lq, :lk].detach().requires_grad_(True)
        if o.get("alibi"):
            skw["alibi_slopes"] = slopes[b:b + 1]
        so, sl = tessera.attention(qs, ks, vs, **skw)
        assert_close(f"seq {b} out", out[sq], so[0], tol)
        assert_close(f"seq {b} lse", lse[:, sq], sl[0], tol)
        sf = torch.isfinite(sl)
        sin = [qs, ks, vs] + ([skw["bias"]] if o.get("bias") else [])
        sgrads = torch.autograd.grad((so.float() * g_out[sq].unsqueeze(0)).sum()
                                     + (sl.where(sf, torch.zeros_like(sl)) * g_lse[:, sq].unsqueeze(0)).sum(), sin)
        assert_close(f"seq {b} grad q", grads[0][sq], sgrads[0][0], gtol)
        assert_close(f"seq {b} grad k", grads[1][sk], sgrads[1][0], gtol)
        assert_close(f"seq {b} grad v", grads[2][sk], sgrads[2][0], gtol)
        if o.get("bias"):
            assert_close(f"seq {b} grad bias", grads[3][b, :, :lq, :lk], sgrads[3][0], gtol)
            bias_grad_seen[b, :, :lq, :lk] = True
    if o.get("bias"):
        outside = grads[3].detach().cpu()[~bias_grad_seen]
        assert bool((outside == 0).all()), \
            f"bias gradient outside the sequences is not zero: max |g| = {outside.abs().max().item()}"


def test_varlen_single_offsets_and_max_seqlen(device, dtype):
    """One cu_seqlens tensor for q and k, and max_seqlen given larger than the longest sequence (the bias
    is then sized by it)."""
    g = torch.Generator().manual_seed(11)
    lens = [9, 4, 20]
    cu = _offsets(lens, device)
    q, k, v = (randn(g, sum(lens), 2, 8, device=device, dtype=dtype) for _ in range(3))
    bias = randn(g, 2, 24, 24, device=device, dtype=dtype).requires_grad_(True)
    kw = dict(cu_seqlens=cu, max_seqlen=24, bias=bias, causal=True)
    problems = compare_with_reference(q, k, v, kw)
    assert not problems, "\n".join(problems)


# ----------------------------------------------------------------------------- float64 gradcheck


def test_gradcheck_float64(device):
    """torch.autograd.gradcheck on float64 inputs, if the op accepts float64 at all (it is documented as
    float32 / float16 / bfloat16 only, in which case it must refuse float64 with a proper error)."""
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 5, 2, 4, generator=g, dtype=torch.float64).to(device).requires_grad_(True)
               for _ in range(3))
    bias = torch.randn(2, 5, 5, generator=g, dtype=torch.float64).to(device).requires_grad_(True)
    try:
        tessera.attention(q, k, v)
    except ALLOWED_ERRORS as e:
        assert "float" in str(e) or "dtype" in str(e), f"float64 refused without naming the dtype: {e}"
        pytest.skip(f"float64 is not supported: {e}")
    f = lambda q, k, v, bias: tessera.attention(q, k, v, bias=bias, causal=True, return_lse=True)  # noqa: E731
    assert torch.autograd.gradcheck(f, (q, k, v, bias), eps=1e-6, atol=1e-6)


# ----------------------------------------------------------------------------- dropout


def _dropout_inputs(device, dtype, B=2, N=48, H=2, D=16, seed=0):
    """q, k random; v the identity (Dv = Nk), so that out[b, i, h, :] is row i of the dropped and rescaled
    attention matrix of head h: the dropout mask can be read off the output."""
    g = torch.Generator().manual_seed(seed)
    q = randn(g, B, N, H, D, device=device, dtype=dtype)
    k = randn(g, B, N, H, D, device=device, dtype=dtype)
    v = torch.eye(N, dtype=torch.float64).view(1, N, 1, N).expand(B, N, H, N).to(device, dtype).contiguous()
    return q, k, v


def test_dropout_same_seed_same_output(device, dtype):
    q, k, v = _dropout_inputs(device, dtype)
    a = tessera.attention(q, k, v, dropout_p=0.3, seed=1234)
    b = tessera.attention(q, k, v, dropout_p=0.3, seed=1234)
    c = tessera.attention(q, k, v, dropout_p=0.3, seed=4321)
    assert torch.equal(a, b), "the same seed gave different outputs"
    assert not torch.equal(a, c), "different seeds gave the same output"
    assert bool(torch.isfinite(a).all())


def test_dropout_without_seed_follows_torch_manual_seed(device, dtype):
    q, k, v = _dropout_inputs(device, dtype)
    torch.manual_seed(7)
    a = tessera.attention(q, k, v, dropout_p=0.3)
    b = tessera.attention(q, k, v, dropout_p=0.3)
    torch.manual_seed(7)
    c = tessera.attention(q, k, v, dropout_p=0.3)
    assert torch.equal(a, c), "torch.manual_seed did not make dropout reproducible"
    assert not torch.equal(a, b), "two calls without a seed dropped the same entries"


def test_dropout_zero_equals_no_dropout(device, dtype):
    g = torch.Generator().manual_seed(2)
    q, k, v = (randn(g, 2, 19, 3, 16, device=device, dtype=dtype) for _ in range(3))
    bias = randn(g, 3, 19, 19, device=device, dtype=dtype)
    a, la = tessera.attention(q, k, v, bias=bias, causal=True, return_lse=True)
    b, lb = tessera.attention(q, k, v, bias=bias, causal=True, return_lse=True, dropout_p=0.0, seed=99)
    assert torch.equal(a, b) and torch.equal(la, lb), "dropout_p=0 changed the result"


@pytest.mark.parametrize("p", [0.1, 0.5])
def test_dropout_mask_statistics_and_backward(p, device, dtype):
    """With v = I the output is the dropped attention matrix Pd: each entry is 0 or P / (1 - p), about a
    fraction p is 0, and the gradients are those of out = Pd v with that very mask:
        dv = Pdᵀ dO,   dS = Pd ∘ (dO vᵀ) - P ∘ rowsum(dO ∘ out),   dq = scale dS k,   dk = scale dSᵀ q."""
    B, N, H, D = 2, 48, 2, 16
    q, k, v = _dropout_inputs(device, dtype, B, N, H, D, seed=1)
    q.requires_grad_(True)
    k.requires_grad_(True)
    v.requires_grad_(True)
    out = tessera.attention(q, k, v, dropout_p=p, seed=2024)
    pd = out.detach().to("cpu", torch.float64).permute(0, 2, 1, 3)  # [B, H, Nq, Nk]
    P, _ = reference_attention(q.detach(), k.detach(), v.detach())
    P = P.permute(0, 2, 1, 3)

    kept = pd != 0
    tol = 10 * fwd_tol(dtype, device)
    scaled = P / (1 - p)
    bad = kept & ((pd - scaled).abs() > tol * scaled + 1e-6)
    assert not bool(bad.any()), f"{int(bad.sum())} kept entries are not P / (1 - p)"
    frac = 1 - kept.double().mean().item()
    n = kept.numel()
    assert abs(frac - p) < 5 * math.sqrt(p * (1 - p) / n) + 1e-3, f"dropped fraction {frac:.4f}, expected {p}"

    g = torch.Generator().manual_seed(5)
    dO = torch.randn(B, N, H, N, generator=g, dtype=torch.float64)
    dq, dk, dv = torch.autograd.grad((out.double() * dO.to(device)).sum(), (q, k, v))
    dOh = dO.permute(0, 2, 1, 3)  # [B, H, Nq, Dv]; with v = I, dO vᵀ = dO
    out_h = pd
    rows = (dOh * out_h).sum(-1, keepdim=True)
    dS = pd * dOh - P * rows
    scale = 1 / math.sqrt(D)
    qh = q.detach().to("cpu", torch.float64).permute(0, 2, 1, 3)
    kh = k.detach().to("cpu", torch.float64).permute(0, 2, 1, 3)
    exp_dv = (pd.transpose(-1, -2) @ dOh).permute(0, 2, 1, 3)
    exp_dq = (scale * dS @ kh).permute(0, 2, 1, 3)
    exp_dk = (scale * dS.transpose(-1, -2) @ qh).permute(0, 2, 1, 3)
    gt = grad_tol(dtype, device)
    assert_close("dropout grad v", dv, exp_dv, gt)
    assert_close("dropout grad q", dq, exp_dq, 10 * gt)
    assert_close("dropout grad k", dk, exp_dk, 10 * gt)


def test_dropout_mask_same_on_cpu_and_cuda(device):
    """The package documents a Philox counter RNG: the same mask on CPU and CUDA for the same seed."""
    if device.type != "cuda":
        pytest.skip("compares CUDA with CPU")
    q, k, v = _dropout_inputs("cpu", torch.float32)
    a = tessera.attention(q, k, v, dropout_p=0.4, seed=77)
    b = tessera.attention(q.to(device), k.to(device), v.to(device), dropout_p=0.4, seed=77).cpu()
    assert torch.equal(a == 0, b == 0), f"{int(((a == 0) != (b == 0)).sum())} entries dropped on one device only"


# ----------------------------------------------------------------------------- deterministic


def test_deterministic_backward_is_bitwise_repeatable(device, dtype):
    g = torch.Generator().manual_seed(4)
    q, k, v = (randn(g, 2, 37, 4, 32, device=device, dtype=dtype) for _ in range(3))
    bias = randn(g, 4, 37, 37, device=device, dtype=dtype)
    results = []
    for _ in range(2):
        qq, kk, vv, bb = (t.detach().requires_grad_(True) for t in (q, k, v, bias))
        out = tessera.attention(qq, kk, vv, bias=bb, causal=True, deterministic=True)
        results.append(torch.autograd.grad(out.float().square().sum(), (qq, kk, vv, bb)))
    for name, a, b in zip("q k v bias".split(), *results):
        assert torch.equal(a, b), f"grad {name} differs between two deterministic runs"
